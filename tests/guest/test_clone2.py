"""FICLONERANGE2 on btrfs and XFS, and readers of every kind making progress
while a long clone runs (pcshare series kernels only: marker clone2)."""
import errno
import hashlib
import mmap
import multiprocessing
import os
import random
import resource
import signal
import time

import pytest

from harness import fsutil
from harness.fsutil import CloneRange2, sha256, sha256_file

from conftest import _fresh

pytestmark = pytest.mark.clone2
MiB = 1 << 20
BS = 4096


@pytest.fixture(params=["btrfs", "xfs"])
def fs(request, scratch_dev, tmp_path):
    yield from _fresh(request.param, scratch_dev, tmp_path)


def block(i):
    return hashlib.sha512(b"blk%d" % i).digest() * (BS // 64)


def write_fragmented(path, extents):
    """A file of `extents` one-block extents with a hole after each but the
    last, written back to front so XFS's EOF preallocation cannot merge them.
    Returns its contents."""
    with open(path, "wb") as f:
        for i in reversed(range(extents)):
            os.pwrite(f.fileno(), block(i), 2 * i * BS)
        os.fsync(f.fileno())
    return b"".join(block(i) + (bytes(BS) if i < extents - 1 else b"")
                    for i in range(extents))


def extent_count(path):
    with open(path, "rb") as f:
        return len(fsutil.fiemap(f.fileno(), max_extents=1 << 16))


def clone2(src, dst, **kw):
    with open(src, "rb") as s, open(dst, "r+b" if os.path.exists(dst) else "wb") as d:
        args = CloneRange2(s.fileno(), **kw)
        return args.call(d.fileno()), args


def test_whole_file_in_one_call(fs):
    data = fsutil.pattern(8 * MiB + 123, "whole")
    fsutil.write_file(fs / "src", data)
    ret, args = clone2(fs / "src", fs / "dst")
    assert (ret, args.done, args.src_length) == (0, len(data), len(data))
    assert sha256_file(fs / "dst") == sha256(data)
    with open(fs / "dst", "rb") as d:
        assert all(fl & fsutil.FIEMAP_EXTENT_SHARED for *_, fl in fsutil.fiemap(d.fileno()))


def test_budget_expiry_returns_partial_progress_then_completes(fs):
    # 1000 one-block extents take many times a 1 ms budget to clone, even on
    # a fast machine (4000 took 19 s to set up and check here).
    data = write_fragmented(fs / "src", 1000)
    assert extent_count(fs / "src") >= 1000
    old = fsutil.pattern(len(data), "old")
    fsutil.write_file(fs / "dst", old)
    with open(fs / "src", "rb") as s, open(fs / "dst", "r+b") as d:
        args = CloneRange2(s.fileno(), budget_ms=1, chunk_size=BS)
        assert args.call(d.fileno()) == fsutil.FICLONERANGE2_PARTIAL
        first = args.done
        assert 0 < first < len(data) and first % BS == 0
        assert args.src_length == len(data)  # resolved once, written back
        # Below the cursor the source's data, above it the old contents.
        assert sha256_file(fs / "dst") == sha256(data[:first] + old[first:])
        calls = 1
        while args.call(d.fileno()) == fsutil.FICLONERANGE2_PARTIAL:
            calls += 1
            assert args.done > first
            first = args.done
    assert calls >= 2 and args.done == len(data)
    assert sha256_file(fs / "dst") == sha256(data)


def test_adapted_chunk_is_written_back_and_carried_on(fs):
    data = write_fragmented(fs / "src", 1000)  # 8 MiB: past the 2 MiB asserted below
    with open(fs / "src", "rb") as s, open(fs / "dst", "wb") as d:
        args = CloneRange2(s.fileno(), budget_ms=1)
        assert args.call(d.fileno()) == fsutil.FICLONERANGE2_PARTIAL
        # The first chunk is the kernel's default (1 MiB); what it learned
        # from timing that chunk comes back block-aligned.
        assert args.done == MiB
        learned = args.next_chunk
        assert learned > 0 and learned % BS == 0
        # A continuing call starts from the size it is given, not from
        # 1 MiB again: the first 1 MiB chunk alone outran the budget.
        args.next_chunk = 3 * BS
        assert args.call(d.fileno()) == fsutil.FICLONERANGE2_PARTIAL
        assert MiB + 3 * BS <= args.done < 2 * MiB
        while args.call(d.fileno()):
            assert args.next_chunk % BS == 0
    assert args.done == len(data)
    assert sha256_file(fs / "dst") == sha256(data)


def test_eof_length_is_resolved_once(fs):
    data = write_fragmented(fs / "src", 2000)
    with open(fs / "src", "rb") as s, open(fs / "dst", "wb") as d:
        args = CloneRange2(s.fileno(), budget_ms=1, chunk_size=BS)
        assert args.call(d.fileno()) == fsutil.FICLONERANGE2_PARTIAL
        assert args.src_length == len(data)
    with open(fs / "src", "ab") as s:  # the source grows between calls
        s.write(b"appended" * 1000)
    with open(fs / "src", "rb") as s, open(fs / "dst", "r+b") as d:
        args.fields[0] = s.fileno()
        while args.call(d.fileno()):
            pass
    assert os.path.getsize(fs / "dst") == len(data)
    assert sha256_file(fs / "dst") == sha256(data)


def test_zero_length_at_and_past_eof(fs):
    fsutil.write_file(fs / "src", fsutil.pattern(MiB, "z"))
    ret, args = clone2(fs / "src", fs / "dst", src_offset=MiB)
    assert (ret, args.done, args.src_length) == (0, 0, 0)
    assert os.path.getsize(fs / "dst") == 0
    with pytest.raises(OSError) as e:
        clone2(fs / "src", fs / "dst", src_offset=2 * MiB)
    assert e.value.errno == errno.EINVAL
    # A cursor already at the end is a finished clone.
    ret, args = clone2(fs / "src", fs / "dst", src_length=MiB, done=MiB)
    assert (ret, args.done) == (0, MiB)
    assert os.path.getsize(fs / "dst") == 0


@pytest.mark.parametrize("case, kwargs", [
    ("flags", dict(flags=1)),
    ("reserved", dict(reserved=(0, 7, 0))),
    ("misaligned src", dict(src_offset=512, src_length=BS)),
    ("misaligned dest", dict(dest_offset=100, src_length=BS)),
    ("misaligned chunk", dict(chunk_size=BS + 1)),
    ("misaligned next chunk", dict(next_chunk=BS + 1)),
    ("past eof", dict(src_length=2 * MiB)),
    ("unaligned middle", dict(src_length=BS + 1)),
    ("cursor past length", dict(src_length=BS, done=2 * BS)),
    ("misaligned cursor", dict(src_length=4 * BS, done=100)),
    ("negative offset", dict(src_offset=1 << 63, src_length=BS)),
])
def test_invalid_arguments_are_einval_with_nothing_cloned(fs, case, kwargs):
    fsutil.write_file(fs / "src", fsutil.pattern(MiB, "inv"))
    with pytest.raises(OSError) as e:
        clone2(fs / "src", fs / "dst", **kwargs)
    assert e.value.errno == errno.EINVAL, case
    assert os.path.getsize(fs / "dst") == 0


def test_errors_match_ficlonerange(fs, tmp_path):
    fsutil.write_file(fs / "src", fsutil.pattern(MiB, "err"))
    # Misalignment: the same errno from both calls.
    with open(fs / "src", "rb") as s, open(fs / "dst", "wb") as d:
        for call in (lambda: fsutil.ficlonerange(s.fileno(), d.fileno(), 512, BS, 0),
                     lambda: CloneRange2(s.fileno(), 512, BS).call(d.fileno())):
            with pytest.raises(OSError) as e:
                call()
            assert e.value.errno == errno.EINVAL
        with pytest.raises(OSError) as e:
            CloneRange2(9999).call(d.fileno())
        assert e.value.errno == errno.EBADF
    with open(fs / "src", "ab") as w, open(fs / "dst", "wb") as d:
        with pytest.raises(OSError) as e:  # source not open for reading
            CloneRange2(w.fileno()).call(d.fileno())
        assert e.value.errno == errno.EBADF
    other = tmp_path / "elsewhere"  # the test's tmp dir, not the scratch fs
    other.write_bytes(b"x" * BS)
    with open(other, "rb") as s, open(fs / "dst", "wb") as d:
        with pytest.raises(OSError) as e:
            CloneRange2(s.fileno()).call(d.fileno())
        assert e.value.errno == errno.EXDEV


def test_ranges_within_one_file(fs):
    data = fsutil.pattern(16 * MiB, "self")
    fsutil.write_file(fs / "f", data)
    with open(fs / "f", "r+b") as f:
        with pytest.raises(OSError) as e:  # overlapping: refused whole
            CloneRange2(f.fileno(), 0, 8 * MiB, 4 * MiB, chunk_size=MiB).call(f.fileno())
        assert e.value.errno == errno.EINVAL
        assert sha256_file(fs / "f") == sha256(data)
        args = CloneRange2(f.fileno(), 0, 4 * MiB, 8 * MiB, chunk_size=64 * 1024)
        assert args.call(f.fileno()) == 0 and args.done == 4 * MiB
    assert sha256_file(fs / "f") == sha256(data[:8 * MiB] + data[:4 * MiB] + data[12 * MiB:])


def errno_of(call):
    try:
        call()
    except OSError as e:
        return e.errno
    return 0


def test_partial_eof_block_inside_the_destination_is_refused_whole(fs):
    """FICLONERANGE checks the whole range, including that a partial EOF
    block lands only at the destination's EOF; chunk by chunk FICLONERANGE2
    used to clone 1 MiB and then fail on every retry."""
    src = fsutil.pattern(MiB + 100, "partial-src")
    old = fsutil.pattern(4 * MiB, "partial-dst")
    fsutil.write_file(fs / "src", src)
    fsutil.write_file(fs / "dst", old)
    with open(fs / "src", "rb") as s, open(fs / "dst", "r+b") as d:
        want = errno_of(lambda: fsutil.ficlonerange(s.fileno(), d.fileno(), 0, 0, 0))
        assert want == errno.EINVAL
        args = CloneRange2(s.fileno(), chunk_size=64 * 1024)
        assert errno_of(lambda: args.call(d.fileno())) == want
        assert args.done == 0
    assert sha256_file(fs / "dst") == sha256(old)


def clone_under_fsize_limit(src, dst, limit, **kwargs):
    """Errnos of FICLONERANGE and FICLONERANGE2 (and its cursor) in a child
    whose RLIMIT_FSIZE is limit, with SIGXFSZ ignored as a shell would."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
            with open(src, "rb") as s, open(dst, "r+b") as d:
                offset, length = kwargs.get("dest_offset", 0), kwargs.get("src_length", 0)
                one = errno_of(lambda: fsutil.ficlonerange(s.fileno(), d.fileno(), 0,
                                                           length, offset))
                args = CloneRange2(s.fileno(), chunk_size=64 * 1024, **kwargs)
                two = errno_of(lambda: args.call(d.fileno()))
                os.write(write_end, f"{one} {two} {args.done}".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as r:
        out = r.read()
    os.waitpid(pid, 0)
    return tuple(map(int, out.split()))


@pytest.mark.parametrize("dest_offset", [0, 4 * MiB], ids=["crosses", "beyond"])
def test_file_size_limit_is_checked_before_the_first_chunk(fs, dest_offset):
    src = fsutil.pattern(4 * MiB, "fsize")
    fsutil.write_file(fs / "src", src)
    fsutil.write_file(fs / "dst", b"")
    one, two, done = clone_under_fsize_limit(fs / "src", fs / "dst", 2 * MiB,
                                             dest_offset=dest_offset)
    # Crossing the limit shortens FICLONERANGE's count: EINVAL; starting at
    # or past it is EFBIG.  FICLONERANGE2 must say the same, having done nothing.
    assert one == (errno.EINVAL if dest_offset == 0 else errno.EFBIG)
    assert (two, done) == (one, 0)
    assert os.path.getsize(fs / "dst") == 0


@pytest.mark.parametrize("appended", [10, 5000])
def test_eof_clone_continues_after_the_source_grows(fs, appended):
    """A to-EOF range that ends in a partial block: once the source grows,
    that block is whole and is cloned whole, up to the new EOF."""
    data = write_fragmented(fs / "src", 1024)  # enough chunks to outlast 1 ms
    tail = fsutil.pattern(8 * MiB + 123 - len(data), "grow")
    with open(fs / "src", "ab") as s:
        s.write(tail)
        os.fsync(s.fileno())
    data += tail
    with open(fs / "src", "rb") as s, open(fs / "dst", "wb") as d:
        args = CloneRange2(s.fileno(), budget_ms=1, chunk_size=BS)
        assert args.call(d.fileno()) == fsutil.FICLONERANGE2_PARTIAL
        assert args.src_length == len(data)
    more = fsutil.pattern(appended, "grown")
    with open(fs / "src", "ab") as s:
        s.write(more)
    grown = data + more
    end = min(len(grown), len(data) - len(data) % BS + BS)
    with open(fs / "src", "rb") as s, open(fs / "dst", "r+b") as d:
        args.fields[0] = s.fileno()
        while args.call(d.fileno()):
            pass
    assert args.done == args.src_length == end
    assert sha256_file(fs / "dst") == sha256(grown[:end])


def test_clone_that_extends_its_own_file_finishes(fs):
    """Cloning a file's partial-block end past its EOF grows the source
    under the clone, so its last block is no longer at EOF when its turn
    comes: it is cloned whole (the bytes past the old EOF read as zeroes)
    instead of failing after the rest was cloned."""
    data = fsutil.pattern(3 * MiB + 100, "self-grow")
    fsutil.write_file(fs / "f", data)
    with open(fs / "f", "r+b") as f:
        args = CloneRange2(f.fileno(), dest_offset=4 * MiB, chunk_size=64 * 1024)
        assert args.call(f.fileno()) == 0
    tail = data + bytes(BS - 100)
    assert args.done == args.src_length == len(tail)
    assert sha256_file(fs / "f") == sha256(data + bytes(MiB - 100) + tail)


def test_budget_too_large_for_nanoseconds_is_no_budget(fs):
    """budget_ms * 10^6 wraps past 2^64 to a 0.45 ms budget unless the
    kernel saturates it."""
    data = write_fragmented(fs / "src", 2000)
    ret, args = clone2(fs / "src", fs / "dst", budget_ms=18446744073710, chunk_size=BS)
    assert (ret, args.done) == (0, len(data))
    assert sha256_file(fs / "dst") == sha256(data)


def long_clone_source(fs, extents=6000):
    data = write_fragmented(fs / "src", extents)
    return data


def test_alarm_interrupts_and_the_same_struct_continues(fs):
    data = long_clone_source(fs)
    fired = []
    old = signal.signal(signal.SIGALRM, lambda *_: fired.append(time.monotonic()))
    interrupts = 0
    try:
        with open(fs / "src", "rb") as s, open(fs / "dst", "wb") as d:
            args = CloneRange2(s.fileno(), chunk_size=BS)
            signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)
            while True:
                before = args.done
                try:
                    assert args.call(d.fileno()) == 0
                    break
                except InterruptedError:
                    interrupts += 1
                    assert args.done > before  # progress, and it came back
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert interrupts >= 1 and fired
    assert args.done == len(data)
    assert sha256_file(fs / "dst") == sha256(data)


def test_sa_restart_restarts_the_call_transparently(fs):
    data = long_clone_source(fs)
    fired = []
    old = signal.signal(signal.SIGALRM, lambda *_: fired.append(1))
    signal.siginterrupt(signal.SIGALRM, False)  # SA_RESTART
    try:
        with open(fs / "src", "rb") as s, open(fs / "dst", "wb") as d:
            args = CloneRange2(s.fileno(), chunk_size=BS)
            signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)
            ret = args.call(d.fileno())
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert ret == 0 and args.done == len(data) and fired
    assert sha256_file(fs / "dst") == sha256(data)


@pytest.mark.xfs
def test_xfs_enospc_part_way_keeps_the_cursor_true(scratch_dev, tmp_path):
    """A small XFS with only 256 KiB free: the destination's block map needs
    new blocks as the fragmented source is cloned in, and they run out part
    way. After space is freed, the same struct finishes the clone."""
    fsutil.run("mkfs.xfs", "-q", "-f", "-m", "reflink=1", "-d", "size=320m", scratch_dev)
    with fsutil.mounted(scratch_dev, tmp_path / "mnt") as mnt:
        data = write_fragmented(mnt / "src", 30000)
        (mnt / "dst").touch()
        st = os.statvfs(mnt)
        # fallocate, not writes: no data to push through the emulated disk.
        first = max(st.f_bavail * st.f_frsize - 4 * MiB, MiB)
        with open(mnt / "filler", "wb") as f:  # down to the last few blocks
            for step in (first, MiB, 64 * 1024, BS):
                try:
                    while True:
                        os.posix_fallocate(f.fileno(), os.fstat(f.fileno()).st_size, step)
                except OSError as e:
                    assert e.errno == errno.ENOSPC
            os.fsync(f.fileno())
            f.truncate(os.fstat(f.fileno()).st_size - 256 * 1024)
            os.fsync(f.fileno())
        with open(mnt / "src", "rb") as s, open(mnt / "dst", "r+b") as d:
            args = CloneRange2(s.fileno(), chunk_size=64 * BS)
            with pytest.raises(OSError) as e:
                args.call(d.fileno())
            assert e.value.errno == errno.ENOSPC
            done = args.done
            assert 0 < done < len(data) and done % BS == 0
            assert sha256_file(mnt / "dst", 0, done) == sha256(data[:done])
            os.unlink(mnt / "filler")
            os.sync()
            assert args.call(d.fileno()) == 0
        assert sha256_file(mnt / "dst") == sha256(data)


def _reader(path, kind, blocks, stop, out):
    """Read random written blocks of `path` until `stop`; report each read's
    (start, end) times and whether every block read back right."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if kind == "direct" else 0))
    size = os.fstat(fd).st_size
    buf = mmap.mmap(-1, BS)
    mapping = mmap.mmap(fd, size, prot=mmap.PROT_READ) if kind == "mmap" else None
    rng = random.Random(kind)
    spans, bad = [], 0
    while not stop.is_set():
        i = rng.randrange(blocks)
        off = 2 * i * BS
        start = time.monotonic()
        if kind == "mmap":
            got = mapping[off:off + BS]
            mapping.madvise(mmap.MADV_DONTNEED, off, BS)  # fault again next time
        else:
            if kind == "buffered":
                os.posix_fadvise(fd, off, BS, os.POSIX_FADV_DONTNEED)
            os.preadv(fd, [buf], off)
            got = bytes(buf)
        spans.append((start, time.monotonic()))
        bad += got != block(i)
    out.put((kind, spans, bad))


def test_readers_of_every_kind_progress_during_a_long_clone(fs):
    """One FICLONE of a many-extent file, which holds the files' locks from
    start to end; buffered, O_DIRECT and mmap readers of the source must each
    issue and complete reads while it runs (on stock btrfs O_DIRECT waits)."""
    blocks = 12000
    data = write_fragmented(fs / "src", blocks)
    ctx = multiprocessing.get_context("fork")
    stop, out = ctx.Event(), ctx.Queue()
    kinds = ["buffered", "direct", "mmap"]
    readers = [ctx.Process(target=_reader, args=(fs / "src", k, blocks, stop, out))
               for k in kinds]
    for r in readers:
        r.start()
    time.sleep(1)
    with open(fs / "src", "rb") as s, open(fs / "dst", "wb") as d:
        t0 = time.monotonic()
        fsutil.ficlone(s.fileno(), d.fileno())
        t1 = time.monotonic()
    stop.set()
    results = {}
    for _ in kinds:
        kind, spans, bad = out.get(timeout=120)
        results[kind] = (sum(t0 < a and b < t1 for a, b in spans), bad)
    for r in readers:
        r.join(timeout=60)
    print(f"clone {t1 - t0:.2f} s; reads within it: "
          + ", ".join(f"{k} {n}" for k, (n, _) in results.items()))
    for kind, (during, bad) in results.items():
        assert bad == 0, kind
        assert during >= 3, (kind, during, t1 - t0)
    assert sha256_file(fs / "dst") == sha256(data)


def _clone_in_pieces(src, dst, how):
    """Clone all of src into dst the way `how` says; returns the calls made."""
    size = os.path.getsize(src)
    with open(src, "rb") as s, open(dst, "wb") as d:
        if how == "ficlonerange_per_mib":
            for off in range(0, size, MiB):
                fsutil.ficlonerange(s.fileno(), d.fileno(), off, MiB, off)
            return size // MiB
        kwargs = {"clone2_1m_chunks": dict(chunk_size=MiB), "clone2_adaptive": {}}[how]
        args = CloneRange2(s.fileno(), **kwargs)
        calls = 1
        while args.call(d.fileno()):
            calls += 1
        return calls


@pytest.fixture
def btrfs_checked(scratch_dev, tmp_path):
    """A fresh btrfs that must pass `btrfs check` (extent references against
    file extent items) after the test unmounts it."""
    fsutil.mkfs("btrfs", scratch_dev)
    log = fsutil.KernelLog()
    try:
        with fsutil.mounted(scratch_dev, tmp_path / "mnt") as mnt:
            yield mnt
            problems = fsutil.btrfs_health_problems(mnt, log)
            assert not problems, f"btrfs reported errors: {problems}"
    finally:
        log.close()
    fsutil.run("btrfs", "check", "--readonly", scratch_dev)


@pytest.mark.parametrize("how", ["clone2_1m_chunks", "clone2_adaptive",
                                 "ficlonerange_per_mib"])
def test_pieces_of_one_extent_stay_one_item(btrfs_checked, scratch_dev, how):
    """A clone made of many calls leaves as many file extent items in its
    destination as its source has (before the fix, one per chunk boundary
    inside a source extent), with the same data, and the destination's
    extents still work as extents: overwrite, then clone again."""
    mnt = btrfs_checked
    data = fsutil.pattern(32 * MiB, "pieces")  # 32 pieces of 1 MiB
    fsutil.write_file(mnt / "src", data)
    calls = _clone_in_pieces(mnt / "src", mnt / "dst", how)
    fsutil.run("btrfs", "filesystem", "sync", str(mnt))
    inodes = {n: os.stat(mnt / n).st_ino for n in ("src", "dst")}
    items = fsutil.btrfs_extent_items(scratch_dev, inodes.values())
    src_items, dst_items = items[inodes["src"]], items[inodes["dst"]]
    print(f"{how}: {calls} calls, source {src_items} items, destination {dst_items}")
    assert dst_items == src_items
    with open(mnt / "dst", "r+b") as f:
        os.pwrite(f.fileno(), b"x" * BS, 10 * MiB)
        os.fsync(f.fileno())
    _clone_in_pieces(mnt / "dst", mnt / "dst2", how)
    fsutil.drop_caches()
    expect = data[:10 * MiB] + b"x" * BS + data[10 * MiB + BS:]
    assert sha256_file(mnt / "src") == sha256(data)
    assert sha256_file(mnt / "dst") == sha256(expect)
    assert sha256_file(mnt / "dst2") == sha256(expect)


def test_pieces_that_do_not_continue_stay_apart(btrfs_checked, scratch_dev):
    """Pieces of one extent that are not contiguous in it, or that land
    out of order, keep items of their own: each destination range reads
    what was cloned to it."""
    mnt = btrfs_checked
    data = fsutil.pattern(8 * MiB, "apart")
    fsutil.write_file(mnt / "src", data)
    order = [(0, 0), (2, 1), (1, 2), (5, 4), (4, 3)]   # (source MiB, destination MiB)
    with open(mnt / "src", "rb") as s, open(mnt / "dst", "wb") as d:
        for src_mib, dst_mib in order:
            fsutil.ficlonerange(s.fileno(), d.fileno(), src_mib * MiB, MiB, dst_mib * MiB)
    fsutil.drop_caches()
    expect = bytearray(5 * MiB)
    for src_mib, dst_mib in order:
        expect[dst_mib * MiB:(dst_mib + 1) * MiB] = data[src_mib * MiB:(src_mib + 1) * MiB]
    assert sha256_file(mnt / "dst") == sha256(bytes(expect))


def test_snapshot_taken_between_pieces_keeps_its_view(btrfs_checked, scratch_dev):
    """Growing an item in a leaf that a snapshot shares must copy the leaf:
    the snapshot keeps the first piece only, the live file gets both, in one
    item."""
    mnt = btrfs_checked
    fsutil.run("btrfs", "subvolume", "create", str(mnt / "vol"))
    data = fsutil.pattern(4 * MiB, "snap")
    fsutil.write_file(mnt / "vol/src", data)
    with open(mnt / "vol/src", "rb") as s, open(mnt / "vol/dst", "wb") as d:
        fsutil.ficlonerange(s.fileno(), d.fileno(), 0, 2 * MiB, 0)
        os.fsync(d.fileno())
        fsutil.run("btrfs", "subvolume", "snapshot", "-r", str(mnt / "vol"), str(mnt / "ro"))
        fsutil.ficlonerange(s.fileno(), d.fileno(), 2 * MiB, 2 * MiB, 2 * MiB)
    fsutil.run("btrfs", "filesystem", "sync", str(mnt))
    vol_id = fsutil.btrfs_root_id(mnt / "vol")
    inodes = [os.stat(mnt / "vol" / n).st_ino for n in ("src", "dst")]
    items = fsutil.btrfs_extent_items(scratch_dev, inodes, tree=vol_id)
    assert items[inodes[0]] == items[inodes[1]], items
    fsutil.drop_caches()
    assert sha256_file(mnt / "ro/dst") == sha256(data[:2 * MiB])
    assert sha256_file(mnt / "vol/dst") == sha256(data)
