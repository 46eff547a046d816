"""The btrfs shared extent cache (pcshare kernel, mount -o shared_cache).

Every test compares data read back with what was written (SHA-256) and, where
the cache is the point, checks its counters and the disk's read counter.
"""
import errno
import mmap
import os
import random
import subprocess
import threading
import time
from pathlib import Path

import pytest

from harness import fsutil
from harness.fsutil import MiB, sha256, sha256_file

from conftest import _fresh

pytestmark = pytest.mark.shared_cache
PAGE = 4096


def clone(src, dst):
    with open(src, "rb") as s, open(dst, "wb") as d:
        fsutil.ficlone(s.fileno(), d.fileno())


def cold(mnt, device):
    """Unmount, drop caches and mount again, with the shared_cache options
    the mount had (shared_cache if none)."""
    options = ",".join(o for o in fsutil.mount_options(mnt)
                       if o.startswith("shared_cache")) or "shared_cache"
    fsutil.run("umount", str(mnt))
    fsutil.drop_caches()
    fsutil.run("mount", "-o", options, device, str(mnt))


@pytest.fixture
def sc(request, scratch_dev, tmp_path):
    """A fresh btrfs mounted with shared_cache: (mount point, device)."""
    corrupts = request.node.get_closest_marker("corrupts") is not None
    for mnt in _fresh("btrfs", scratch_dev, tmp_path, "shared_cache", corrupts):
        yield mnt, scratch_dev


@pytest.fixture
def scm(request, scratch_dev, tmp_path):
    """A fresh btrfs mounted with shared_cache_map (implies shared_cache)."""
    for mnt in _fresh("btrfs", scratch_dev, tmp_path, "shared_cache_map"):
        yield mnt, scratch_dev


def test_mount_option_shown_and_toggled_by_remount(sc):
    mnt, dev = sc
    assert "shared_cache" in fsutil.mount_options(mnt)
    data = fsutil.pattern(MiB, "toggle")
    fsutil.write_file(mnt / "f", data)
    fsutil.drop_caches()
    assert sha256_file(mnt / "f") == sha256(data)
    assert fsutil.shared_cache_stats(dev)["resident_pages"] == MiB // PAGE

    fsutil.run("mount", "-o", "remount,noshared_cache", str(mnt))
    assert "shared_cache" not in fsutil.mount_options(mnt)
    # Turning it off gives the memory back; reads no longer touch the cache.
    before = fsutil.shared_cache_stats(dev)
    assert before["resident_pages"] == 0
    assert sha256_file(mnt / "f") == sha256(data)
    after = fsutil.shared_cache_stats(dev)
    assert after == before

    fsutil.run("mount", "-o", "remount,shared_cache", str(mnt))
    assert "shared_cache" in fsutil.mount_options(mnt)


def test_clone_of_cached_file_reads_no_disk_and_no_memory(sc):
    mnt, dev = sc
    size = 32 * MiB
    data = fsutil.pattern(size, "seed")
    fsutil.write_file(mnt / "src", data)
    cold(mnt, dev)
    s0 = fsutil.shared_cache_stats(dev)
    assert sha256_file(mnt / "src") == sha256(data)
    s1 = fsutil.shared_cache_stats(dev)
    assert s1["bytes_filled"] - s0["bytes_filled"] == size
    assert s1["bytes_served"] - s0["bytes_served"] == size
    assert s1["resident_pages"] == size // PAGE
    assert s1["misses"] - s0["misses"] >= 1

    clone(mnt / "src", mnt / "dst")
    disk0, cached0 = fsutil.disk_read_bytes(dev), fsutil.meminfo("Cached")
    assert sha256_file(mnt / "dst") == sha256(data)
    disk1, cached1 = fsutil.disk_read_bytes(dev), fsutil.meminfo("Cached")
    s2 = fsutil.shared_cache_stats(dev)
    assert s2["bytes_filled"] == s1["bytes_filled"]
    assert s2["hits"] - s1["hits"] == size // PAGE
    assert s2["misses"] == s1["misses"]
    assert s2["resident_pages"] == size // PAGE
    assert disk1 - disk0 < MiB  # metadata at most
    assert cached1 - cached0 < 4 * MiB


def test_thousand_clones_share_one_copy(sc):
    mnt, dev = sc
    size = 64 * 1024
    data = fsutil.pattern(size, "many")
    fsutil.write_file(mnt / "c0", data)
    for i in range(1, 1000):
        clone(mnt / "c0", mnt / f"c{i}")
    cold(mnt, dev)
    for i in range(1000):
        assert sha256_file(mnt / f"c{i}") == sha256(data)
    stats = fsutil.shared_cache_stats(dev)
    assert stats["bytes_filled"] == size
    assert stats["bytes_served"] == 1000 * size
    assert stats["resident_pages"] == size // PAGE


def test_clone_chain_and_assembled_file(sc):
    mnt, dev = sc
    a = fsutil.pattern(4 * MiB, "a")
    b = fsutil.pattern(4 * MiB, "b")
    fsutil.write_file(mnt / "a", a)
    fsutil.write_file(mnt / "b", b)
    clone(mnt / "a", mnt / "a1")
    clone(mnt / "a1", mnt / "a2")
    clone(mnt / "a2", mnt / "a3")
    with open(mnt / "a3", "rb") as fa, open(mnt / "b", "rb") as fb, \
            open(mnt / "mix", "wb") as out:
        fsutil.ficlonerange(fa.fileno(), out.fileno(), MiB, 2 * MiB, 0)
        fsutil.ficlonerange(fb.fileno(), out.fileno(), 0, MiB, 2 * MiB)
    cold(mnt, dev)
    for name in ("a", "a1", "a2", "a3"):
        assert sha256_file(mnt / name) == sha256(a)
    assert sha256_file(mnt / "mix") == sha256(a[MiB:3 * MiB] + b[:MiB])
    assert sha256_file(mnt / "b") == sha256(b)
    # a, its chain and mix's part of it were read from disk once; b once.
    assert fsutil.shared_cache_stats(dev)["bytes_filled"] == 8 * MiB


def write_at(path, offset, data, how):
    if how == "buffered":
        with open(path, "r+b") as f:
            f.seek(offset)
            f.write(data)
    elif how == "direct":
        fd = os.open(path, os.O_RDWR | os.O_DIRECT)
        buf = mmap.mmap(-1, len(data))
        buf[:] = data
        try:
            assert os.pwritev(fd, [buf], offset) == len(data)
        finally:
            os.close(fd)
    elif how == "mmap":
        with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
            m[offset:offset + len(data)] = data
            m.flush()
    else:
        raise ValueError(how)


@pytest.mark.parametrize("how", ["buffered", "direct", "mmap"])
@pytest.mark.parametrize("target", ["src", "dst"])
@pytest.mark.parametrize("sync", [True, False])
def test_write_after_clone_is_seen_by_that_file_only(sc, how, target, sync):
    mnt, dev = sc
    size = 8 * MiB
    data = fsutil.pattern(size, "w")
    fsutil.write_file(mnt / "src", data)
    clone(mnt / "src", mnt / "dst")
    fsutil.drop_caches()  # else src's own folios, left by the write, serve it
    assert sha256_file(mnt / "src") == sha256(data)
    assert fsutil.shared_cache_stats(dev)["resident_pages"] == size // PAGE
    expected = {"src": bytearray(data), "dst": bytearray(data)}
    # A partial page, a whole page range and a whole 1 MiB stretch.
    for offset, length in ((100, 1000), (3 * PAGE, 2 * PAGE), (4 * MiB, MiB)):
        if how == "direct" and (offset % PAGE or length % PAGE):
            continue
        patch = fsutil.pattern(length, f"{how}{offset}")
        write_at(mnt / target, offset, patch, how)
        expected[target][offset:offset + length] = patch
        if sync:
            os.sync()
        for name in ("src", "dst"):
            assert sha256_file(mnt / name) == sha256(expected[name]), name
    cold(mnt, dev)
    for name in ("src", "dst"):
        assert sha256_file(mnt / name) == sha256(expected[name]), name


def test_truncate_punch_fallocate_unlink(sc):
    mnt, dev = sc
    size = 8 * MiB
    data = fsutil.pattern(size, "t")
    fsutil.write_file(mnt / "src", data)
    for name in ("t", "p", "u"):
        clone(mnt / "src", mnt / name)
    fsutil.drop_caches()
    assert sha256_file(mnt / "src") == sha256(data)

    os.truncate(mnt / "t", 3 * MiB + 5)
    assert sha256_file(mnt / "t") == sha256(data[:3 * MiB + 5])
    os.truncate(mnt / "t", 6 * MiB)
    expect_t = data[:3 * MiB + 5] + bytes(6 * MiB - 3 * MiB - 5)
    assert sha256_file(mnt / "t") == sha256(expect_t)

    fsutil.run("fallocate", "--punch-hole", "-o", str(MiB), "-l", str(2 * MiB), str(mnt / "p"))
    expect_p = data[:MiB] + bytes(2 * MiB) + data[3 * MiB:]
    assert sha256_file(mnt / "p") == sha256(expect_p)
    fsutil.run("fallocate", "-o", str(size), "-l", str(2 * MiB), str(mnt / "p"))
    os.truncate(mnt / "p", size + 2 * MiB)
    expect_p += bytes(2 * MiB)
    assert sha256_file(mnt / "p") == sha256(expect_p)

    os.unlink(mnt / "src")
    os.sync()
    assert sha256_file(mnt / "u") == sha256(data)
    fsutil.write_file(mnt / "new", fsutil.pattern(size, "new"))
    os.unlink(mnt / "u")
    os.sync()
    assert sha256_file(mnt / "new") == sha256(fsutil.pattern(size, "new"))
    cold(mnt, dev)
    assert sha256_file(mnt / "t") == sha256(expect_t)
    assert sha256_file(mnt / "p") == sha256(expect_p)


def test_snapshots_and_dedupe(sc):
    mnt, dev = sc
    fsutil.run("btrfs", "subvolume", "create", str(mnt / "vol"))
    data = fsutil.pattern(8 * MiB, "snap")
    fsutil.write_file(mnt / "vol/f", data)
    fsutil.run("btrfs", "subvolume", "snapshot", "-r", str(mnt / "vol"), str(mnt / "ro"))
    fsutil.run("btrfs", "subvolume", "snapshot", str(mnt / "vol"), str(mnt / "rw"))
    cold(mnt, dev)
    for name in ("vol/f", "ro/f", "rw/f"):
        assert sha256_file(mnt / name) == sha256(data)
    assert fsutil.shared_cache_stats(dev)["bytes_filled"] == 8 * MiB

    patch = fsutil.pattern(PAGE, "rw")
    write_at(mnt / "rw/f", 2 * MiB, patch, "buffered")
    changed = data[:2 * MiB] + patch + data[2 * MiB + PAGE:]
    os.sync()
    cold(mnt, dev)
    assert sha256_file(mnt / "rw/f") == sha256(changed)
    assert sha256_file(mnt / "ro/f") == sha256(data)
    assert sha256_file(mnt / "vol/f") == sha256(data)

    # Two files written separately, then deduplicated: one copy cached.
    fsutil.write_file(mnt / "d1", data)
    fsutil.write_file(mnt / "d2", data)
    with open(mnt / "d1", "rb") as s, open(mnt / "d2", "r+b") as d:
        results = fsutil.fideduperange(s.fileno(), 0, len(data), [(d.fileno(), 0)])
    assert results == [(len(data), fsutil.FILE_DEDUPE_RANGE_SAME)]
    cold(mnt, dev)
    s0 = fsutil.shared_cache_stats(dev)["bytes_filled"]
    assert sha256_file(mnt / "d1") == sha256(data)
    assert sha256_file(mnt / "d2") == sha256(data)
    assert fsutil.shared_cache_stats(dev)["bytes_filled"] - s0 == len(data)


def overlaps(extents, ranges):
    return any(p < q + m and q < p + n for _, p, n in extents for q, m in ranges)


@pytest.mark.parametrize("sync_between", [True, False])
@pytest.mark.debug_kernel
def test_freed_and_reused_space_never_serves_old_data(sc, sync_between):
    mnt, dev = sc
    # Without ssd clustering, data allocation is first fit: freed space is reused.
    fsutil.run("mount", "-o", "remount,nossd", str(mnt))
    old = fsutil.pattern(4 * MiB, "old")
    fsutil.write_file(mnt / "old", old)
    clone(mnt / "old", mnt / "old2")
    fsutil.drop_caches()  # the writer's own folios would serve the read
    assert sha256_file(mnt / "old") == sha256(old)
    assert fsutil.shared_cache_stats(dev)["resident_pages"] == len(old) // PAGE
    old_ranges = [(p, n) for _, p, n in fsutil.physical_map(mnt / "old")]
    inval0 = fsutil.shared_cache_stats(dev)["invalidations"]
    os.unlink(mnt / "old")
    os.unlink(mnt / "old2")
    if sync_between:
        os.sync()
    fsutil.run("btrfs", "filesystem", "sync", str(mnt))
    fsutil.run("btrfs", "filesystem", "sync", str(mnt))  # past the commit that unpins
    assert fsutil.shared_cache_stats(dev)["invalidations"] > inval0

    reused = None
    for i in range(64):
        new = fsutil.pattern(MiB, f"new{i}")
        fsutil.write_file(mnt / f"new{i}", new)
        if overlaps(fsutil.physical_map(mnt / f"new{i}"), old_ranges):
            reused = (f"new{i}", new)
            break
    assert reused, "the allocator never reused the freed range; the test proves nothing"
    name, new = reused
    assert sha256_file(mnt / name) == sha256(new)
    fsutil.drop_caches()
    assert sha256_file(mnt / name) == sha256(new)


def test_balance_and_scrub_while_shared(sc):
    mnt, dev = sc
    data = fsutil.pattern(16 * MiB, "bal")
    fsutil.write_file(mnt / "a", data)
    clone(mnt / "a", mnt / "b")
    fsutil.drop_caches()
    assert sha256_file(mnt / "a") == sha256(data)
    assert fsutil.shared_cache_stats(dev)["resident_pages"] == len(data) // PAGE
    before = fsutil.physical_map(mnt / "a")
    inval0 = fsutil.shared_cache_stats(dev)["invalidations"]
    fsutil.run("btrfs", "balance", "start", "-d", str(mnt))
    assert fsutil.physical_map(mnt / "a") != before, "balance did not move the data"
    assert fsutil.shared_cache_stats(dev)["invalidations"] > inval0
    assert sha256_file(mnt / "b") == sha256(data)
    assert sha256_file(mnt / "a") == sha256(data)
    # Balance freed the old addresses: new data there is read correctly.
    fresh = fsutil.pattern(16 * MiB, "after-balance")
    fsutil.write_file(mnt / "c", fresh)
    fsutil.drop_caches()
    assert sha256_file(mnt / "c") == sha256(fresh)
    fsutil.run("btrfs", "scrub", "start", "-B", str(mnt))  # exits non-zero on errors
    assert sha256_file(mnt / "b") == sha256(data)


def read_around_bad_block(mnt, dev, data, logical, bad_start, bad_end):
    """Overwrite the disk block at LOGICAL, which files f and g (both DATA)
    map at file range [BAD_START, BAD_END), remount, and read both twice:
    the range gives EIO, a read running into it stops short, all else reads
    back. Twice: a failed fill must leave nothing uptodate behind. Returns
    the kernel's messages meanwhile."""
    fsutil.run("umount", str(mnt))
    physical = fsutil.btrfs_physical(dev, logical)
    fd = os.open(dev, os.O_WRONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, PAGE)
    buf[:] = b"\xa5" * PAGE
    try:
        os.pwritev(fd, [buf], physical)
    finally:
        os.close(fd)
    fsutil.drop_caches()
    fsutil.run("mount", "-o", "shared_cache", dev, str(mnt))
    log = fsutil.KernelLog()
    try:
        # Cold: a read from the good block before the bad one into it
        # returns the good block, as stock's retry of a single page gives
        # it. In a plain extent the fill reads both in one bio, which fails
        # whole, and the good page is read again alone.
        with open(mnt / "f", "rb", buffering=0) as f:
            assert os.pread(f.fileno(), 2 * PAGE, bad_start - PAGE) == \
                data[bad_start - PAGE:bad_start]
        for attempt in range(2):
            for name in ("f", "g"):
                fd = os.open(mnt / name, os.O_RDONLY)
                try:
                    assert os.pread(fd, bad_start, 0) == data[:bad_start]
                    with pytest.raises(OSError) as err:
                        os.pread(fd, PAGE, bad_end - PAGE)
                    assert err.value.errno == errno.EIO
                    assert os.pread(fd, 2 * PAGE, bad_start - PAGE) == \
                        data[bad_start - PAGE:bad_start]
                    assert os.pread(fd, len(data), bad_end) == data[bad_end:]
                finally:
                    os.close(fd)
        return log.read()
    finally:
        log.close()


@pytest.mark.corrupts
@pytest.mark.debug_kernel
def test_checksum_failure_returns_eio_and_caches_nothing_bad(sc, tmp_path):
    mnt, dev = sc
    data = fsutil.pattern(MiB, "bad")
    fsutil.write_file(mnt / "f", data)
    clone(mnt / "f", mnt / "g")
    _, logical, length = fsutil.physical_map(mnt / "f")[0]
    # The bad block and the good one before it share an extent, so the
    # cold read's fill puts both in one bio.
    assert length > 4 * PAGE, fsutil.physical_map(mnt / "f")
    messages = read_around_bad_block(mnt, dev, data, logical + 3 * PAGE, 3 * PAGE, 4 * PAGE)
    # The report names the files that own the block, not the cache's inode.
    for name in ("f", "g"):
        assert any(f"logical {logical + 3 * PAGE} " in m and m.endswith(f"(path: {name})")
                   for m in messages), messages
    assert not any("ino 18446744073709551603" in m for m in messages)
    # A block that already failed alone is read once more per read, as on
    # stock: only a fill that read it together with good pages retries.
    corruptions = lambda: sum(v for k, v in fsutil.btrfs_device_stats(mnt).items()  # noqa: E731
                              if k.endswith("corruption_errs"))
    before = corruptions()
    with open(mnt / "f", "rb", buffering=0) as f, pytest.raises(OSError) as err:
        os.pread(f.fileno(), 2 * PAGE, 3 * PAGE)
    assert err.value.errno == errno.EIO
    assert corruptions() == before + 1


def test_counters_are_readable_by_root_only(sc):
    """Hits and misses on shared extents would tell one tenant what another
    reads: the counters are mode 0400, the one knob 0600, and another user
    cannot read them."""
    mnt, dev = sc
    directory = fsutil.btrfs_sysfs_dir(dev) / "shared_cache"
    names = sorted(p.name for p in directory.iterdir())
    assert names == ["bytes_filled", "bytes_served", "hits", "invalidations",
                     "mapped_aliases", "mapped_attaches", "mapped_bytes_read",
                     "mapped_keep_limit", "mapped_keep_refused", "mapped_keep_reserved",
                     "mapped_kept", "mapped_kept_bytes", "mapped_pages", "misses",
                     "resident_pages"]
    modes = {n: oct(os.stat(directory / n).st_mode & 0o777) for n in names}
    assert modes.pop("mapped_keep_limit") == "0o600"
    assert set(modes.values()) == {"0o400"}
    pid = os.fork()
    if pid == 0:
        os.setgid(65534)
        os.setuid(65534)
        try:
            (directory / "hits").read_text()
        except PermissionError:
            os._exit(0)
        os._exit(1)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def unmovable_pageblocks():
    """Pageblocks of migrate type Unmovable, summed over zones
    (/proc/pagetypeinfo)."""
    text = Path("/proc/pagetypeinfo").read_text()
    table = text[text.index("Number of blocks type"):].splitlines()
    column = table[0].split().index("Unmovable") - 4  # after "Number of blocks type"
    return sum(int(line.split()[4 + column]) for line in table[1:] if "zone" in line)


def test_cache_folios_are_movable(sc):
    """A cache filled with plain GFP_NOFS lands in unmovable pageblocks and
    steals them from movable memory, which defeats compaction and THP."""
    mnt, dev = sc
    size = 128 * MiB
    data = fsutil.pattern(size, "movable")
    fsutil.write_file(mnt / "f", data)
    del data
    cold(mnt, dev)
    before = unmovable_pageblocks()
    fsutil.sha256_file(mnt / "f")
    assert fsutil.shared_cache_stats(dev)["bytes_filled"] >= size
    grown = unmovable_pageblocks() - before
    # A quarter of the pageblocks it fills (2 MiB each) for unrelated churn:
    # a cache landing in unmovable blocks grows them by all of them.
    assert grown < (size >> 21) // 4, \
        f"{grown} more unmovable pageblocks after caching {size >> 20} MiB"


def test_sequential_reader_behind_an_appender_reads_nothing_unsummed(sc):
    """A fill reads only what its caller locked.  A merged extent map can
    reach into the extent an appender just wrote, whose ordered extent is
    still inserting its checksums; reading that early "fails" every mirror
    and counts as corruption.  Here a sequential reader with a 1 MiB window
    follows an appender (O_DIRECT, and buffered + fsync + DONTNEED so the
    reader goes through the cache); the fixture fails the test on any device
    error counter or checksum message, and every byte read is compared."""
    mnt, dev = sc
    seconds = float(os.environ.get("PCSHARE_APPEND_RACE_SECONDS", "60"))
    chunk = 64 * 1024
    chunks = [fsutil.pattern(chunk, f"append{i}") for i in range(16)]
    bdi = fsutil.btrfs_sysfs_dir(dev) / "bdi" / "read_ahead_kb"
    bdi.write_text("1024\n")
    path = mnt / "log"
    path.touch()
    stop = threading.Event()
    errors, progress = [], {"appended": 0, "read": 0}

    def appender():
        buffered = os.open(path, os.O_WRONLY)
        direct = os.open(path, os.O_WRONLY | os.O_DIRECT)
        buf = mmap.mmap(-1, chunk)
        try:
            i = 0
            while not stop.is_set() and i < 8192:
                data = chunks[i % len(chunks)]
                if i % 2:
                    buf[:] = data
                    assert os.pwritev(direct, [buf], i * chunk) == chunk
                else:
                    assert os.pwrite(buffered, data, i * chunk) == chunk
                os.fsync(buffered)
                os.posix_fadvise(buffered, 0, 0, os.POSIX_FADV_DONTNEED)
                i += 1
                progress["appended"] = i
        except Exception as e:  # noqa: BLE001 - reported by the test
            errors.append(f"appender: {e!r}")
        finally:
            stop.set()
            os.close(buffered)
            os.close(direct)

    def reader():
        fd = os.open(path, os.O_RDONLY)
        pos = 0
        try:
            while not stop.is_set():
                # A few chunks behind EOF: written, fsynced and dropped, so
                # the reads go through the cache and its window reaches
                # into the extents being finished right now.
                limit = os.fstat(fd).st_size - 4 * chunk
                if pos >= limit:
                    time.sleep(0.001)
                    continue
                data = os.pread(fd, min(128 * 1024, limit - pos), pos)
                for off in range(0, len(data), chunk):
                    n = pos + off
                    want = chunks[(n // chunk) % len(chunks)][n % chunk:]
                    got = data[off:off + len(want)]
                    if got != want[:len(got)]:
                        errors.append(f"reader: wrong data at {n}")
                        return
                pos += len(data)
                progress["read"] = pos
        except OSError as e:
            errors.append(f"reader at {pos}: {e!r}")
        finally:
            os.close(fd)

    threads = [threading.Thread(target=appender), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not stop.is_set():
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join()
    assert not errors, errors
    # The reader kept up with a file that grew: the race was exercised.
    assert progress["appended"] > 100 and progress["read"] > 50 * chunk, progress
    assert fsutil.shared_cache_stats(dev)["bytes_filled"] > 0


def test_concurrent_readers_while_a_clone_is_rewritten(sc):
    mnt, dev = sc
    data = fsutil.pattern(16 * MiB, "conc")
    fsutil.write_file(mnt / "src", data)
    for i in range(4):
        clone(mnt / "src", mnt / f"r{i}")
    fsutil.drop_caches()
    errors = []
    stop = threading.Event()

    def reader(name):
        while not stop.is_set():
            digest = sha256_file(mnt / name)
            if digest != sha256(data):
                errors.append(name)
                return

    threads = [threading.Thread(target=reader, args=(f"r{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    try:
        for round_ in range(6):
            clone(mnt / "src", mnt / "w")
            write_at(mnt / "w", round_ * MiB, fsutil.pattern(MiB, round_), "buffered")
            os.truncate(mnt / "w", 5 * MiB)
            if round_ % 2:
                os.sync()
            os.unlink(mnt / "w")
            fsutil.drop_caches()
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, f"readers saw wrong data: {errors}"


# Beside the default kernel (PCSHARE_TEST_KERNELS=pcshare:default,
# pcshare:debug), the debug kernel runs only the cases whose reclaim meets
# partly cached compressed extents and content inodes, where a folio freed
# under a reader is likeliest; the others took 1-5 min each there.
DEBUG = pytest.mark.debug_kernel


@pytest.mark.parametrize("mount,how", [("sc", "read"), ("sc", "mmap"),
                                       pytest.param("scz", "read", marks=DEBUG),
                                       ("scz", "mmap"), pytest.param("scm", "mmap", marks=DEBUG)])
def test_memory_pressure_keeps_reads_correct(request, mount, how):
    """Three readers of three 64 MiB clones at once in 32 MiB: reclaim takes cache
    pages one at a time, so compressed extents are found partly cached and
    must be read again whole; mapped readers fill their own pages from the
    cache while both are reclaimed, or (scm: clones in a read-only
    snapshot) share one content inode's pages."""
    mnt, dev = request.getfixturevalue(mount)
    data = fsutil.pattern(64 * MiB, "pressure")
    fsutil.write_file(mnt / "a", data)
    if mount == "scz":
        assert_compressed(mnt / "a")
    for name in ("b", "c"):
        clone(mnt / "a", mnt / name)
    if mount == "scm":
        fsutil.run("btrfs", "subvolume", "snapshot", "-r", str(mnt), str(mnt / "ro"))
    cold(mnt, dev)
    files = [mnt / "ro" / n if mount == "scm" else mnt / n for n in "abc"]
    attaches = fsutil.shared_cache_stats(dev)["mapped_attaches"]
    expected = sha256(data)
    script = ("import sys, hashlib, mmap\n"
              "h = hashlib.sha256()\n"
              "with open(sys.argv[1], 'rb') as f:\n"
              "    if sys.argv[2] == 'mmap':\n"
              "        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)\n"
              "        for i in range(0, len(m), 1 << 20):\n"
              "            h.update(m[i:i + (1 << 20)])\n"
              "    else:\n"
              "        while (b := f.read(1 << 20)):\n"
              "            h.update(b)\n"
              "print(h.hexdigest())\n")
    with fsutil.memory_cgroup("pcshare-pressure", 32 * MiB) as procs:
        children = [subprocess.Popen(
            ["python3", "-c", script, str(path), how], stdout=subprocess.PIPE, text=True,
            preexec_fn=lambda: procs.write_text(str(os.getpid()))) for path in files]
        results = [(child.communicate()[0].strip(), child.returncode) for child in children]
        events = dict(line.split() for line in
                      procs.with_name("memory.events").read_text().splitlines())
    assert results == [(expected, 0)] * 3
    # The readers met the limit: what they read was reclaimed under them.
    assert int(events["max"]) > 0, events
    bound = fsutil.shared_cache_stats(dev)["mapped_attaches"] - attaches
    assert bound == (3 if mount == "scm" else 0)


def source_and_clone(mnt, dev, size, tag):
    """SRC written, DST its clone, then a cold mount: returns SRC's data."""
    data = fsutil.pattern(size, tag)
    fsutil.write_file(mnt / "src", data)
    clone(mnt / "src", mnt / "dst")
    cold(mnt, dev)
    return data


def test_sendfile_and_splice_read_through_cache(sc):
    mnt, dev = sc
    data = source_and_clone(mnt, dev, 4 * MiB, "splice")
    assert sha256_file(mnt / "src") == sha256(data)
    s0 = fsutil.shared_cache_stats(dev)
    with open(mnt / "dst", "rb") as src, open(mnt / "copy", "wb") as out:
        sent = 0
        while sent < len(data):
            n = os.sendfile(out.fileno(), src.fileno(), sent, len(data) - sent)
            assert n > 0
            sent += n
    s1 = fsutil.shared_cache_stats(dev)
    assert s1["bytes_filled"] == s0["bytes_filled"]
    assert s1["bytes_served"] - s0["bytes_served"] == len(data)
    assert sha256_file(mnt / "copy") == sha256(data)


@pytest.fixture(scope="module")
def asyncread(tmp_path_factory):
    """tests/guest/asyncread.c built: a file to stdout via io_uring or AIO."""
    exe = tmp_path_factory.mktemp("asyncread") / "asyncread"
    fsutil.run("cc", "-O2", "-Wall", "-o", str(exe), str(Path(__file__).parent / "asyncread.c"))
    return exe


def read_nowait(fd, size):
    """SIZE bytes from FD by preadv2(RWF_NOWAIT), which must never fail."""
    got = bytearray()
    while len(got) < size:
        buf = bytearray(256 * 1024)
        n = os.preadv(fd, [buf], len(got), os.RWF_NOWAIT)
        assert n > 0
        got += buf[:n]
    return bytes(got[:size])


@pytest.mark.debug_kernel
def test_nowait_reads_serve_cached_data_and_leave_misses_to_a_retry(sc):
    mnt, dev = sc
    data = source_and_clone(mnt, dev, 4 * MiB, "nowait")
    fd = os.open(mnt / "dst", os.O_RDONLY)
    try:
        # Nothing cached: EAGAIN, and no read started on the caller's behalf.
        s0, disk0 = fsutil.shared_cache_stats(dev), fsutil.disk_read_bytes(dev)
        with pytest.raises(BlockingIOError):
            os.preadv(fd, [bytearray(PAGE)], 0, os.RWF_NOWAIT)
        assert fsutil.shared_cache_stats(dev)["bytes_filled"] == s0["bytes_filled"]
        assert fsutil.disk_read_bytes(dev) == disk0

        assert sha256_file(mnt / "src") == sha256(data)
        # One blocking read loads dst's extent map; then every NOWAIT read
        # of the clone is served from the cache, without disk or growth.
        assert os.pread(fd, PAGE, 0) == data[:PAGE]
        s1, disk1, cached1 = (fsutil.shared_cache_stats(dev), fsutil.disk_read_bytes(dev),
                              fsutil.meminfo("Cached"))
        got = read_nowait(fd, len(data))
    finally:
        os.close(fd)
    assert sha256(got) == sha256(data)
    s2 = fsutil.shared_cache_stats(dev)
    assert s2["bytes_filled"] == s1["bytes_filled"]
    assert s2["bytes_served"] - s1["bytes_served"] == len(data)
    assert fsutil.disk_read_bytes(dev) - disk1 < MiB  # metadata at most
    assert fsutil.meminfo("Cached") - cached1 < MiB


def test_nowait_reads_serve_holes_and_preallocated_ranges(sc):
    mnt, dev = sc
    data = fsutil.pattern(MiB, "holes")
    path = mnt / "sparse"
    with open(path, "wb") as f:
        f.write(data)
        f.seek(3 * MiB)
        f.write(data)
    fsutil.run("fallocate", "-o", str(4 * MiB), "-l", str(MiB), str(path))
    expected = data + bytes(2 * MiB) + data + bytes(MiB)
    cold(mnt, dev)
    # A blocking read loads the file's extent maps; the NOWAIT reads then
    # need nothing from the disk, holes and preallocated space included.
    assert sha256_file(path) == sha256(expected)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert read_nowait(fd, len(expected)) == expected
    finally:
        os.close(fd)


@pytest.mark.parametrize("engine", ["uring", "aio"])
@pytest.mark.debug_kernel
def test_io_uring_and_aio_reads_share_the_cache(sc, asyncread, engine):
    mnt, dev = sc
    data = source_and_clone(mnt, dev, 8 * MiB, engine)

    def read(name):
        out = subprocess.run([str(asyncread), engine, str(mnt / name)], check=True,
                             capture_output=True).stdout
        return sha256(out)

    s0 = fsutil.shared_cache_stats(dev)
    assert read("src") == sha256(data)
    s1 = fsutil.shared_cache_stats(dev)
    assert s1["bytes_filled"] - s0["bytes_filled"] == len(data)
    assert s1["bytes_served"] - s0["bytes_served"] == len(data)

    disk1, cached1 = fsutil.disk_read_bytes(dev), fsutil.meminfo("Cached")
    assert read("dst") == sha256(data)
    s2 = fsutil.shared_cache_stats(dev)
    assert s2["bytes_filled"] == s1["bytes_filled"]
    assert s2["bytes_served"] - s1["bytes_served"] == len(data)
    assert s2["resident_pages"] == len(data) // PAGE
    assert fsutil.disk_read_bytes(dev) - disk1 < MiB
    assert fsutil.meminfo("Cached") - cached1 < 2 * MiB


def patchwork_file(path, size):
    """PATH of SIZE bytes whose readahead windows each map many extents of
    every kind: random (incompressible) data written at once, every 16th
    64 KiB piece rewritten compressed (the file's compression property),
    random 4 KiB blocks rewritten plain, holes punched, preallocated
    ranges; each step synced.  Returns the data it must read as."""
    rnd = random.Random(size)
    data = bytearray(rnd.randbytes(size))
    fsutil.write_file(path, bytes(data))
    fsutil.run("sync")
    piece = 64 * 1024
    fsutil.run("btrfs", "property", "set", str(path), "compression", "zstd")
    with open(path, "r+b") as f:
        for off in range(0, size, 16 * piece):
            data[off:off + piece] = fsutil.pattern(piece, f"z{off}")
            os.pwrite(f.fileno(), data[off:off + piece], off)
        os.fsync(f.fileno())
    fsutil.run("btrfs", "property", "set", str(path), "compression", "")
    with open(path, "r+b") as f:
        fd = f.fileno()
        for _ in range(size // piece):
            off = rnd.randrange(size // PAGE) * PAGE
            data[off:off + PAGE] = rnd.randbytes(PAGE)
            os.pwrite(fd, data[off:off + PAGE], off)
        os.fsync(fd)
        for n, off in enumerate(range(5 * piece + PAGE, size - piece, 7 * piece)):
            fsutil.fallocate(fd, fsutil.FALLOC_FL_PUNCH_HOLE | fsutil.FALLOC_FL_KEEP_SIZE,
                             off, 4 * PAGE)
            if n % 2:
                fsutil.fallocate(fd, 0, off, 4 * PAGE)  # preallocated: zeros
            data[off:off + 4 * PAGE] = bytes(4 * PAGE)
        os.fsync(fd)
    return bytes(data)


@pytest.mark.parametrize("how", ["read-4k", "read-1m", "uring"])
def test_a_readahead_window_across_extents_of_every_kind_reads_right(sc, asyncread, how):
    """A window of the cache's readahead is filled across every extent it
    maps (btrfs/0035): a file whose windows map plain, compressed, small
    rewritten, hole and preallocated extents, read cold from start to end,
    reads as written, through the cache, with no checksum message (the
    fixture's check)."""
    mnt, dev = sc
    path = mnt / "patchwork"
    size = 16 * MiB
    data = patchwork_file(path, size)
    fsutil.run("sync")
    ino = os.stat(path).st_ino
    extents = fsutil.btrfs_extent_items(dev, [ino])[ino]
    assert extents > size // (64 * 1024)  # the windows are patchwork indeed
    cold(mnt, dev)
    s0 = fsutil.shared_cache_stats(dev)
    if how == "uring":
        got = subprocess.run([str(asyncread), "uring", str(path)], check=True,
                             capture_output=True).stdout
    else:
        bs = PAGE if how == "read-4k" else MiB
        with open(path, "rb", buffering=0) as f:
            got = b"".join(iter(lambda: f.read(bs), b""))
    assert sha256(got) == sha256(data)
    s1 = fsutil.shared_cache_stats(dev)
    assert s1["bytes_served"] - s0["bytes_served"] > size // 2


def compressed_sc(request, scratch_dev, tmp_path, algorithm, option="shared_cache"):
    corrupts = request.node.get_closest_marker("corrupts") is not None
    yield from _fresh("btrfs", scratch_dev, tmp_path,
                      f"{option},compress-force={algorithm}", corrupts)


@pytest.fixture
def scz(request, scratch_dev, tmp_path):
    """A fresh btrfs mounted with shared_cache,compress-force=zstd."""
    for mnt in compressed_sc(request, scratch_dev, tmp_path, "zstd"):
        yield mnt, scratch_dev


def assert_compressed(path):
    with open(path, "rb") as f:
        extents = fsutil.fiemap(f.fileno())
    assert extents and all(flags & fsutil.FIEMAP_EXTENT_ENCODED for *_, flags in extents), \
        f"{path} is not stored compressed: {extents}"


@pytest.mark.parametrize("algorithm", ["zlib", "lzo", "zstd"])
def test_compressed_clone_reads_no_disk_and_no_memory(request, scratch_dev, tmp_path,
                                                      algorithm):
    for mnt in compressed_sc(request, scratch_dev, tmp_path, algorithm):
        dev = scratch_dev
        size = 8 * MiB
        data = fsutil.pattern(size, algorithm)
        fsutil.write_file(mnt / "src", data)
        assert_compressed(mnt / "src")
        clone(mnt / "src", mnt / "dst")
        with open(mnt / "src", "rb") as s, open(mnt / "part", "wb") as d:
            # Starts and ends inside compressed extents (128 KiB each).
            fsutil.ficlonerange(s.fileno(), d.fileno(), 64 * 1024, 3 * MiB, 0)
        cold(mnt, dev)

        s0, disk0 = fsutil.shared_cache_stats(dev), fsutil.disk_read_bytes(dev)
        assert sha256_file(mnt / "src") == sha256(data)
        s1, disk1 = fsutil.shared_cache_stats(dev), fsutil.disk_read_bytes(dev)
        # Filled once, decompressed; far fewer bytes came from disk.
        assert s1["bytes_filled"] - s0["bytes_filled"] == size
        assert s1["bytes_served"] - s0["bytes_served"] == size
        assert s1["resident_pages"] == size // PAGE
        assert disk1 - disk0 < size // 4

        cached1 = fsutil.meminfo("Cached")
        assert sha256_file(mnt / "dst") == sha256(data)
        assert sha256_file(mnt / "part") == sha256(data[64 * 1024:64 * 1024 + 3 * MiB])
        s2 = fsutil.shared_cache_stats(dev)
        assert s2["bytes_filled"] == s1["bytes_filled"]
        assert s2["misses"] == s1["misses"]
        assert s2["bytes_served"] - s1["bytes_served"] == size + 3 * MiB
        assert s2["resident_pages"] == size // PAGE
        assert fsutil.disk_read_bytes(dev) - disk1 < MiB
        assert fsutil.meminfo("Cached") - cached1 < 4 * MiB


def test_compressed_writes_after_clone_are_seen_by_that_file_only(scz):
    mnt, dev = scz
    size = 4 * MiB
    data = fsutil.pattern(size, "zw")
    fsutil.write_file(mnt / "src", data)
    clone(mnt / "src", mnt / "dst")
    fsutil.drop_caches()
    assert sha256_file(mnt / "src") == sha256(data)
    expected = {"src": bytearray(data), "dst": bytearray(data)}
    for how, target, offset, length in (("buffered", "dst", 100, 1000),
                                        ("mmap", "src", 200 * 1024, 3 * PAGE),
                                        ("direct", "dst", MiB, 256 * 1024)):
        patch = fsutil.pattern(length, f"z{how}")
        write_at(mnt / target, offset, patch, how)
        expected[target][offset:offset + length] = patch
        os.sync()
        for name in ("src", "dst"):
            assert sha256_file(mnt / name) == sha256(expected[name]), (how, name)
    cold(mnt, dev)
    for name in ("src", "dst"):
        assert sha256_file(mnt / name) == sha256(expected[name]), name


@pytest.mark.debug_kernel
def test_compressed_freed_and_reused_space_never_serves_old_data(scz):
    mnt, dev = scz
    fsutil.run("mount", "-o", "remount,nossd", str(mnt))
    old = fsutil.pattern(4 * MiB, "zold")
    fsutil.write_file(mnt / "old", old)
    assert_compressed(mnt / "old")
    fsutil.drop_caches()
    assert sha256_file(mnt / "old") == sha256(old)
    old_starts = {p for _, p, _ in fsutil.physical_map(mnt / "old")}
    inval0 = fsutil.shared_cache_stats(dev)["invalidations"]
    os.unlink(mnt / "old")
    fsutil.run("btrfs", "filesystem", "sync", str(mnt))
    fsutil.run("btrfs", "filesystem", "sync", str(mnt))
    assert fsutil.shared_cache_stats(dev)["invalidations"] > inval0
    # New compressed extents at the old extents' addresses: same positions
    # in the compressed cache, other data.
    reused = []
    for i in range(16):
        new = fsutil.pattern(MiB, f"znew{i}")
        fsutil.write_file(mnt / f"new{i}", new)
        if old_starts & {p for _, p, _ in fsutil.physical_map(mnt / f"new{i}")}:
            reused.append((f"new{i}", new))
    assert reused, "no new extent started where an old one did; the test proves nothing"
    fsutil.drop_caches()
    for name, new in reused:
        assert sha256_file(mnt / name) == sha256(new), name


@pytest.mark.corrupts
@pytest.mark.debug_kernel
def test_compressed_checksum_failure_returns_eio_and_caches_nothing_bad(scz):
    mnt, dev = scz
    ext = 128 * 1024
    data = fsutil.pattern(MiB, "zbad")
    fsutil.write_file(mnt / "f", data)
    assert_compressed(mnt / "f")
    clone(mnt / "f", mnt / "g")
    logical = fsutil.physical_map(mnt / "f")[1][1]  # the second extent
    # The whole extent fails: its data on disk is one compressed stream.
    messages = read_around_bad_block(mnt, dev, data, logical, ext, 2 * ext)
    for name in ("f", "g"):
        assert any(f"logical {logical} " in m and m.endswith(f"(path: {name})")
                   for m in messages), messages


def sha256_mapped(path):
    """PATH's data read through a shared read-only mapping (page faults)."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return sha256(m[:])


@pytest.mark.parametrize("mount", ["sc", "scz"])
def test_mapped_clone_of_cached_data_reads_no_disk(request, mount):
    mnt, dev = request.getfixturevalue(mount)
    data = source_and_clone(mnt, dev, 8 * MiB, f"map{mount}")
    if mount == "scz":
        assert_compressed(mnt / "src")
    assert sha256_file(mnt / "src") == sha256(data)
    s0, disk0 = fsutil.shared_cache_stats(dev), fsutil.disk_read_bytes(dev)
    assert sha256_mapped(mnt / "dst") == sha256(data)
    s1, disk1 = fsutil.shared_cache_stats(dev), fsutil.disk_read_bytes(dev)
    assert s1["bytes_filled"] == s0["bytes_filled"]
    # Every page of the mapping was copied from the cache once.
    assert s1["bytes_served"] - s0["bytes_served"] == len(data)
    assert disk1 - disk0 < MiB  # metadata at most

    # Mapping first fills the cache too: the source's pages, then its reads.
    (mnt / "dst").unlink()
    clone(mnt / "src", mnt / "dst2")
    cold(mnt, dev)
    assert sha256_mapped(mnt / "dst2") == sha256(data)
    disk2 = fsutil.disk_read_bytes(dev)
    assert sha256_file(mnt / "src") == sha256(data)
    assert fsutil.disk_read_bytes(dev) - disk2 < MiB


@pytest.mark.parametrize("advice", ["fadvise", "readahead"])
def test_willneed_of_a_clone_fills_from_the_cache(sc, advice):
    mnt, dev = sc
    data = source_and_clone(mnt, dev, 8 * MiB, advice)
    assert sha256_file(mnt / "src") == sha256(data)
    disk0 = fsutil.disk_read_bytes(dev)
    fd = os.open(mnt / "dst", os.O_RDONLY)
    try:
        if advice == "fadvise":
            os.posix_fadvise(fd, 0, len(data), os.POSIX_FADV_WILLNEED)
        else:
            fsutil.readahead(fd, 0, len(data))
        assert sha256_file(mnt / "dst") == sha256(data)
    finally:
        os.close(fd)
    assert fsutil.disk_read_bytes(dev) - disk0 < MiB


def test_mapping_of_a_clone_sees_every_change_to_its_file(sc):
    """A clone's own folios filled from the cache behave as stock ones: a
    write, clone or hole punch of the file shows in its mapping, a write to
    the source does not."""
    mnt, dev = sc
    size = 8 * MiB
    data = source_and_clone(mnt, dev, size, "coherent")
    other = fsutil.pattern(size, "other")
    fsutil.write_file(mnt / "other", other)
    assert sha256_file(mnt / "src") == sha256(data)
    expected = bytearray(data)
    with open(mnt / "dst", "r+b") as f, \
            mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as shared, \
            mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY) as private:
        assert sha256(shared[:]) == sha256(data)
        private[0:PAGE] = bytes(PAGE)  # this page is the mapping's own now
        write_at(mnt / "src", 0, fsutil.pattern(MiB, "src-write"), "buffered")
        write_at(mnt / "dst", MiB, fsutil.pattern(PAGE, "dst-write"), "buffered")
        expected[MiB:MiB + PAGE] = fsutil.pattern(PAGE, "dst-write")
        with open(mnt / "other", "rb") as o:
            fsutil.ficlonerange(o.fileno(), f.fileno(), 2 * MiB, MiB, 2 * MiB)
        expected[2 * MiB:3 * MiB] = other[2 * MiB:3 * MiB]
        fsutil.run("fallocate", "--punch-hole", "-o", str(4 * MiB), "-l", str(MiB),
                   str(mnt / "dst"))
        expected[4 * MiB:5 * MiB] = bytes(MiB)
        write_at(mnt / "dst", 6 * MiB, fsutil.pattern(MiB, "dst-direct"), "direct")
        expected[6 * MiB:7 * MiB] = fsutil.pattern(MiB, "dst-direct")
        assert sha256(shared[:]) == sha256(expected)
        assert sha256(private[PAGE:]) == sha256(expected[PAGE:])
        assert private[:PAGE] == bytes(PAGE)
    assert sha256_file(mnt / "dst") == sha256(expected)


def cloned_python(mnt, dev, src, dst):
    """The system's python3 binary as SRC and its clone DST, both
    executable, then a cold mount."""
    python = Path(os.path.realpath("/usr/bin/python3"))
    fsutil.write_file(mnt / src, python.read_bytes())
    os.chmod(mnt / src, 0o755)
    clone(mnt / src, mnt / dst)
    os.chmod(mnt / dst, 0o755)
    cold(mnt, dev)


def test_exec_of_a_cloned_binary_reads_no_disk(sc):
    mnt, dev = sc
    cloned_python(mnt, dev, "python-src", "python-dst")
    script = "import hashlib; print(hashlib.sha256(b'exec').hexdigest())"
    want = sha256(b"exec") + "\n"
    disk0 = fsutil.disk_read_bytes(dev)
    assert fsutil.run(str(mnt / "python-src"), "-S", "-c", script) == want
    disk1 = fsutil.disk_read_bytes(dev)
    assert fsutil.run(str(mnt / "python-dst"), "-S", "-c", script) == want
    disk2 = fsutil.disk_read_bytes(dev)
    assert disk1 - disk0 > MiB // 2  # the source's run read its pages from disk
    assert disk2 - disk1 < (disk1 - disk0) // 8


def test_direct_reads_bypass_the_cache(sc):
    mnt, dev = sc
    data = fsutil.pattern(2 * MiB, "dio")
    fsutil.write_file(mnt / "f", data)
    cold(mnt, dev)
    s0 = fsutil.shared_cache_stats(dev)
    assert sha256_file(mnt / "f", direct=True) == sha256(data)
    assert fsutil.shared_cache_stats(dev) == s0


def test_noshared_cache_leaves_the_cache_alone(scratch_dev, tmp_path):
    fsutil.mkfs("btrfs", scratch_dev)
    with fsutil.mounted(scratch_dev, tmp_path / "mnt") as mnt:
        assert "shared_cache" not in fsutil.mount_options(mnt)
        data = fsutil.pattern(4 * MiB, "off")
        fsutil.write_file(mnt / "a", data)
        clone(mnt / "a", mnt / "b")
        fsutil.drop_caches()
        disk0 = fsutil.disk_read_bytes(scratch_dev)
        assert sha256_file(mnt / "a") == sha256(data)
        assert sha256_file(mnt / "b") == sha256(data)
        # Stock behaviour: the clone is read from disk again.
        assert fsutil.disk_read_bytes(scratch_dev) - disk0 >= 2 * len(data)
        stats = fsutil.shared_cache_stats(scratch_dev)
        assert stats["bytes_served"] == 0 and stats["resident_pages"] == 0
