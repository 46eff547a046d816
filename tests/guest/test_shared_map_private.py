"""Private mappings of files in writable subvolumes share one copy and keep
the data they were made with (pcshare kernel, mount option
shared_cache_map_private).

Containers run from writable snapshots of an image (Docker's and Podman's
btrfs drivers); ld.so and exec map their binaries and libraries privately.
->mmap binds such a mapping, once, to the content inode of the file's
extent layout, while the file has no writer, for its owner and, within
shared_cache/mapped_keep_limit, for other users.  The
first operation that then changes the file (a write, fallocate, a clone into
it, a shrinking truncate) reflinks it into an internal orphan first and the
bound mappings read that copy: they keep the data they were made with
(POSIX leaves this unspecified; stock shows later writes in pages not yet
copied), and no byte written afterwards reaches the shared copy, so no
other file's mapping ever shows it.  Shared mappings stay on the file and
see writes, as on stock.  Every test compares mapped data with what it must
be (SHA-256) and checks the shared_cache/mapped_* counters.
"""
import errno
import mmap
import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from harness import fsutil
from harness.fsutil import MiB, sha256, sha256_file

from test_shared_cache import PAGE, cold
from test_shared_map import MADV_PAGEOUT, Hold, Mapped, assert_not_bound_beside, mapped_stats
from test_shared_map import (TRACING, Caller, elf_symbol_offset, remove_uprobes, tracefs,
                             uprobe_events, uprobe_hits)
from test_shared_map import scmp  # noqa: F401 (fixture)

# On the debug kernel in make test too (marker debug_kernel): the cases
# that need its config (hold points, copy failures), every operation that
# makes the copy, and the end of a kept copy (the last mapping gone, a
# crash). make test-debug runs the rest there too.
pytestmark = pytest.mark.shared_cache
SIZE = 4 * MiB


def writable_image(mnt, dev, snapshots, tag, size=SIZE):
    """Subvolume img with f of SIZE bytes, writable snapshots c0..cN-1 of
    it (containers), then a cold mount; returns the data."""
    data = fsutil.pattern(size, tag)
    fsutil.run("btrfs", "subvolume", "create", str(mnt / "img"))
    fsutil.write_file(mnt / "img" / "f", data)
    for i in range(snapshots):
        fsutil.run("btrfs", "subvolume", "snapshot", str(mnt / "img"), str(mnt / f"c{i}"))
    cold(mnt, dev)
    return data


def overwrite(path, data):
    """Open PATH for writing (no truncate), write DATA over it, fsync."""
    with open(path, "r+b") as f:
        f.write(data)
        os.fsync(f.fileno())


def orphan_items(dev, path, want=None, timeout=30):
    """ORPHAN_ITEMs on disk in the tree of PATH's subvolume, after a sync;
    with WANT, syncs again until there are that many or TIMEOUT passes
    (the copy is deleted by btrfs's cleaner thread, after the last
    mapping)."""
    root = fsutil.btrfs_root_id(path)
    deadline = time.monotonic() + timeout
    while True:
        fsutil.run("sync")
        dump = fsutil.run("btrfs", "inspect-internal", "dump-tree", "-t", root, dev)
        found = len(re.findall(r"ORPHAN_ITEM", dump))
        if want is None or found == want or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def test_the_option_is_shown_and_implies_shared_cache_map(scmp):
    mnt, _ = scmp
    options = fsutil.mount_options(mnt)
    assert {"shared_cache", "shared_cache_map", "shared_cache_map_private"} <= set(options)
    fsutil.run("mount", "-o", "remount,noshared_cache_map_private", str(mnt))
    options = fsutil.mount_options(mnt)
    assert "shared_cache_map_private" not in options and "shared_cache_map" in options


def test_private_mappings_of_writable_snapshots_share_one_copy(scmp):
    mnt, dev = scmp
    data = writable_image(mnt, dev, 3, "containers")
    m0 = mapped_stats(dev)
    maps = [Mapped(mnt / f"c{i}" / "f", private=True) for i in range(3)]
    try:
        assert [m.sha() for m in maps] == [sha256(data)] * 3
        m1 = mapped_stats(dev)
        assert m1["mapped_attaches"] == m0["mapped_attaches"] + 3
        assert m1["mapped_aliases"] == m0["mapped_aliases"] + 1
        # Read from disk once, for all three.
        assert m1["mapped_bytes_read"] - m0["mapped_bytes_read"] == SIZE
        assert m1["mapped_kept"] == m0["mapped_kept"]
    finally:
        for m in maps:
            m.close()


def test_a_private_mapping_keeps_its_data_when_the_file_is_written(scmp):
    """Half the mapping is read before the write, half after (read from the
    copy); pages dropped after the write are read again from the copy.  The
    file, a new mapping of it and a shared one show the write; a sibling
    snapshot's mapping, bound to the same content inode, never does."""
    mnt, dev = scmp
    data = writable_image(mnt, dev, 2, "kept")
    m0 = mapped_stats(dev)
    m = Mapped(mnt / "c0" / "f", private=True)
    sibling = Mapped(mnt / "c1" / "f", private=True)
    try:
        assert m.sha(0, SIZE // 2) == sha256(data[:SIZE // 2])
        new = fsutil.pattern(SIZE, "written")
        overwrite(mnt / "c0" / "f", new)
        assert mapped_stats(dev)["mapped_kept"] == m0["mapped_kept"] + 1
        assert m.sha() == sha256(data)
        fsutil.run("sync")
        m.pageout()
        sibling.pageout()
        fsutil.drop_caches()
        assert m.sha() == sha256(data)
        assert sibling.sha() == sha256(data)
        assert sha256_file(mnt / "c0" / "f") == sha256(new)
        fresh = [Mapped(mnt / "c0" / "f", private=True), Mapped(mnt / "c0" / "f")]
        try:
            assert [x.sha() for x in fresh] == [sha256(new)] * 2
        finally:
            for x in fresh:
                x.close()
        # Writing again copies nothing more: the mappings read the copy.
        overwrite(mnt / "c0" / "f", data)
        assert mapped_stats(dev)["mapped_kept"] == m0["mapped_kept"] + 1
    finally:
        m.close()
        sibling.close()


def test_truncate_by_path_keeps_a_private_mapping_whole(scmp):
    """truncate(2) changes the file with write access but no open file: the
    mapping still reads all its data (stock: SIGBUS past the new size)."""
    mnt, dev = scmp
    data = writable_image(mnt, dev, 1, "truncated")
    m0 = mapped_stats(dev)
    m = Mapped(mnt / "c0" / "f", private=True)
    try:
        assert m.sha(0, PAGE) == sha256(data[:PAGE])
        os.truncate(mnt / "c0" / "f", 0)
        fsutil.run("sync")
        assert m.sha() == sha256(data)
        assert mapped_stats(dev)["mapped_kept"] == m0["mapped_kept"] + 1
        assert os.path.getsize(mnt / "c0" / "f") == 0
    finally:
        m.close()


def test_a_writer_who_may_not_create_files_there_still_keeps_the_mappings(scmp):
    """The copy is an internal file that no directory holds: an
    unprivileged user who may write the file but not its directory writes
    it, and the mapping keeps its data."""
    mnt, dev = scmp
    data = writable_image(mnt, dev, 1, "unprivileged")
    os.chmod(mnt / "c0" / "f", 0o666)
    os.chmod(mnt / "c0", 0o755)
    m0 = mapped_stats(dev)
    m = Mapped(mnt / "c0" / "f", private=True)
    try:
        new = fsutil.pattern(SIZE, "nobody")
        # O_PATH as root, reopened as nobody: only the file's own mode
        # is checked, not the test directory's parents (0700).
        script = ("import os, sys\n"
                  "path = os.open(sys.argv[1], os.O_PATH)\n"
                  "os.setgroups([]); os.setgid(65534); os.setuid(65534)\n"
                  "fd = os.open(f'/proc/self/fd/{path}', os.O_WRONLY)\n"
                  "os.write(fd, sys.stdin.buffer.read()); os.fsync(fd)\n")
        subprocess.run(["python3", "-c", script, str(mnt / "c0" / "f")],
                       input=new, check=True)
        assert sha256_file(mnt / "c0" / "f") == sha256(new)
        assert mapped_stats(dev)["mapped_kept"] == m0["mapped_kept"] + 1
        assert m.sha() == sha256(data)
    finally:
        m.close()


@pytest.mark.debug_kernel
def test_the_copy_is_an_orphan_deleted_with_the_last_mapping(scmp):
    """The copy no path reaches is an orphan item while mapped (a crash
    leaves it to orphan cleanup) and is deleted after the last mapping
    goes; a mapping of each version keeps a copy of its own, and
    mapped_kept_bytes says how many bytes those copies hold."""
    mnt, dev = scmp
    data = writable_image(mnt, dev, 1, "orphan")
    second = fsutil.pattern(SIZE, "x")
    assert orphan_items(dev, mnt / "c0") == 0
    kept = mapped_stats(dev)["mapped_kept_bytes"]
    maps = [Mapped(mnt / "c0" / "f", private=True)]
    try:
        overwrite(mnt / "c0" / "f", second)
        assert orphan_items(dev, mnt / "c0") == 1
        assert mapped_stats(dev)["mapped_kept_bytes"] - kept == SIZE
        maps.append(Mapped(mnt / "c0" / "f", private=True))
        overwrite(mnt / "c0" / "f", fsutil.pattern(SIZE, "y"))
        assert orphan_items(dev, mnt / "c0") == 2
        assert mapped_stats(dev)["mapped_kept_bytes"] - kept == 2 * SIZE
        assert [m.sha() for m in maps] == [sha256(data), sha256(second)]
        maps.pop(0).close()
        assert mapped_stats(dev)["mapped_kept_bytes"] - kept == SIZE
    finally:
        for m in maps:
            m.close()
    assert mapped_stats(dev)["mapped_kept_bytes"] == kept
    assert orphan_items(dev, mnt / "c0", want=0) == 0


@pytest.mark.debug_kernel
def test_a_crash_leaves_the_copy_to_orphan_cleanup():
    """The copy kept for a private mapping is an orphan on disk: a crash
    while it is mapped (here the image of the filesystem taken frozen, as
    a power cut after the last commit leaves it) leaves it to orphan
    cleanup, which deletes it at the next mount, when the subvolume is
    first used.  No inode leaks and btrfs check finds nothing wrong.
    A loop file on tmpfs, so the image costs no disk copy."""
    data, new = fsutil.pattern(SIZE, "crash"), fsutil.pattern(SIZE, "after")
    with tempfile.TemporaryDirectory(dir="/run") as tmp:
        image, crashed = Path(tmp) / "fs.img", Path(tmp) / "crashed.img"
        with open(image, "wb") as f:
            f.truncate(1 << 30)
        fsutil.mkfs("btrfs", str(image))
        with fsutil.mounted(str(image), Path(tmp) / "mnt",
                            "loop,shared_cache_map_private") as mnt:
            fsutil.run("btrfs", "subvolume", "create", str(mnt / "img"))
            fsutil.write_file(mnt / "img" / "f", data)
            fsutil.run("btrfs", "subvolume", "snapshot", str(mnt / "img"), str(mnt / "c0"))
            root = fsutil.btrfs_root_id(mnt / "c0")
            m = Mapped(mnt / "c0" / "f", private=True)
            try:
                assert m.sha(0, SIZE // 2) == sha256(data[:SIZE // 2])
                overwrite(mnt / "c0" / "f", new)
                fsutil.run("fsfreeze", "-f", str(mnt))
                try:
                    fsutil.run("cp", "--sparse=always", str(image), str(crashed))
                finally:
                    fsutil.run("fsfreeze", "-u", str(mnt))
                assert m.sha() == sha256(data)
            finally:
                m.close()
        dump = fsutil.run("btrfs", "inspect-internal", "dump-tree", "-t", root, str(crashed))
        orphans = re.findall(r"key \((?:ORPHAN|18446744073709551611) ORPHAN_ITEM (\d+)\)", dump)
        assert len(orphans) == 1, dump
        copy_inode = f"key ({orphans[0]} INODE_ITEM 0)"
        assert copy_inode in dump
        # Consistent as the crash left it, the copy's extents referenced.
        fsutil.run("btrfs", "check", "--readonly", str(crashed))
        with fsutil.mounted(str(crashed), Path(tmp) / "after", "loop") as mnt:
            assert sha256_file(mnt / "c0" / "f") == sha256(new)
            assert sha256_file(mnt / "img" / "f") == sha256(data)
        dump = fsutil.run("btrfs", "inspect-internal", "dump-tree", "-t", root, str(crashed))
        assert "ORPHAN_ITEM" not in dump and copy_inode not in dump
        fsutil.run("btrfs", "check", "--readonly", str(crashed))


# Maps argv[1] privately and prints the SHA-256 of its data.
PRIVATE_MAP_AND_HASH = ("import hashlib, mmap, sys\n"
                        "f = open(sys.argv[1], 'rb')\n"
                        "m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)\n"
                        "print(hashlib.sha256(m[:]).hexdigest(), flush=True)\n")


def map_while_written(dev, path, point, data):
    """A child maps PATH privately and hashes it, held at POINT; meanwhile
    PATH is written over with DATA and committed, and the child must still
    be held afterwards (the writer waited for nothing it does).  Returns
    the child and its output."""
    hold = Hold(dev, point)
    child = subprocess.Popen(["python3", "-S", "-c", PRIVATE_MAP_AND_HASH, str(path)],
                             stdout=subprocess.PIPE, text=True)
    try:
        hold.wait_held(child)
        overwrite(path, data)
        fsutil.run("sync")
        hold.assert_held(child)
    finally:
        hold.end()
    out, _ = child.communicate(timeout=120)
    return child, out


@pytest.mark.debug_kernel
def test_a_fill_that_picked_the_file_before_a_writer_reads_the_copy(scmp):
    """A fill of a private mapping picks the file to read through, and is
    held there (map_source).  Meanwhile the file is opened for writing,
    written over and committed: the writer waits for nothing (the fill is
    still held when it is done).  Released, the fill reads the file, which
    now holds the writer's bytes, and must see the switch to the copy and
    read again from it: the mapping and a sibling's mapping of the same
    content inode show the image's data, never the writer's."""
    mnt, dev = scmp
    data = writable_image(mnt, dev, 2, "picked")
    secret = fsutil.pattern(SIZE, "secret")
    child, out = map_while_written(dev, mnt / "c0" / "f", "map_source", secret)
    assert child.returncode == 0 and out.strip() == sha256(data)
    sibling = Mapped(mnt / "c1" / "f", private=True)
    try:
        sibling.pageout()
        assert sibling.sha() == sha256(data)
    finally:
        sibling.close()
    assert sha256_file(mnt / "c0" / "f") == sha256(secret)


def test_a_file_open_for_writing_is_not_bound(scmp):
    """A writer exists: the private mapping takes the stock path (it would
    otherwise read a file that can change under it) and sees a write to
    pages it has not read, as on stock."""
    mnt, dev = scmp
    data = writable_image(mnt, dev, 1, "writer-first")
    m0 = mapped_stats(dev)
    with open(mnt / "c0" / "f", "r+b") as writer:
        assert_not_bound_beside(writer, dev, data, private=True)
    assert mapped_stats(dev)["mapped_kept"] == m0["mapped_kept"]


@pytest.mark.debug_kernel
def test_opening_for_writing_waits_for_no_one(scmp):
    """The copy is made by the first operation that changes the file, under
    the i_rwsem that operation takes on stock, not at open(): a writer is
    held there (keep_copy) holding the file's i_rwsem, and meanwhile
    another process opens the file for writing at once, as on stock, where
    open() never waits for a reader (a reader can hold i_rwsem for as long
    as it likes, e.g. in FIEMAP faulting on its own buffer)."""
    mnt, dev = scmp
    data = writable_image(mnt, dev, 1, "open-waits")
    hold = Hold(dev, "keep_copy")  # skips on a kernel without holds
    m = Mapped(mnt / "c0" / "f", private=True)
    new = fsutil.pattern(SIZE, "held-writer")
    try:
        writer = subprocess.Popen(["python3", "-c",
                                   "import os, sys\n"
                                   "fd = os.open(sys.argv[1], os.O_WRONLY)\n"
                                   "os.write(fd, sys.stdin.buffer.read()); os.fsync(fd)\n",
                                   str(mnt / "c0" / "f")], stdin=subprocess.PIPE)
        try:
            writer.stdin.write(new)
            writer.stdin.close()
            hold.wait_held(writer)
            for flags in (os.O_WRONLY, os.O_RDWR | os.O_APPEND):
                os.close(os.open(mnt / "c0" / "f", flags))
            hold.assert_held(writer)  # the opens did not wait for it
        finally:
            hold.end()
        assert writer.wait(timeout=120) == 0
        assert m.sha() == sha256(data)
        assert sha256_file(mnt / "c0" / "f") == sha256(new)
    finally:
        m.close()


@pytest.mark.debug_kernel
def test_a_binding_made_while_the_file_is_written_is_dropped(scmp):
    """A mapping gets the file's source (no writer yet) and is held there
    (map_bind); a writer then retires the source, writes and commits, so
    the key the mapping builds next names the written data.  The mapping
    must not bind (stock path) and shows the written data, as a mapping
    made after a write does; and the writer copied nothing, since no
    binding was made through the source (a mapper cannot make a writer
    pay for a copy nobody reads)."""
    mnt, dev = scmp
    writable_image(mnt, dev, 1, "bind-race")
    m0 = mapped_stats(dev)
    new = fsutil.pattern(SIZE, "raced")
    child, out = map_while_written(dev, mnt / "c0" / "f", "map_bind", new)
    assert child.returncode == 0 and out.strip() == sha256(new)
    m1 = mapped_stats(dev)
    assert m1["mapped_attaches"] == m0["mapped_attaches"]
    assert m1["mapped_kept"] == m0["mapped_kept"]


# Maps argv[1] privately, reads its first half, says so, waits for a line
# on stdin, then prints the SHA-256 of the first half, reads the rest and
# prints the SHA-256 of all of it.
PRIVATE_MAP_IN_TWO = ("import hashlib, mmap, sys\n"
                      "f = open(sys.argv[1], 'rb')\n"
                      "m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)\n"
                      "half = len(m) // 2\n"
                      "h = hashlib.sha256(m[:half]).hexdigest()\n"
                      "print('read', flush=True)\n"
                      "sys.stdin.readline()\n"
                      "assert hashlib.sha256(m[:half]).hexdigest() == h\n"
                      "print(h, flush=True)\n"
                      "print(hashlib.sha256(m[:]).hexdigest(), flush=True)\n")


def private_map_across(path, change):
    """A child maps PATH privately and reads half of it; CHANGE() runs; the
    child reads the rest.  Returns its output lines and exit status."""
    child = subprocess.Popen(["python3", "-S", "-c", PRIVATE_MAP_IN_TWO, str(path)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "read\n"
        change()
        fsutil.run("sync")
        fsutil.drop_caches()
        out, _ = child.communicate("go\n", timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    return out.split(), child.returncode


@pytest.mark.parametrize("store", [False, True], ids=["read-only", "store"])
def test_a_store_through_a_shared_mapping_drops_what_private_ones_have_not_read(scmp, store):
    """A store through a shared mapping writes the file at writeback, with
    no system call in which to copy it first (->page_mkwrite holds
    mmap_lock, which i_rwsem nests outside of).  So the first store drops
    the source of the private mappings bound before: what they read stays,
    what they have not read faults with SIGBUS, as after a truncate on
    stock; they never see the new data.  A shared mapping of a writable
    descriptor that only reads (SQLite, LMDB) drops nothing."""
    mnt, dev = scmp
    data = writable_image(mnt, dev, 1, "shared-store")

    def map_shared():
        with open(mnt / "c0" / "f", "r+b") as f:
            shared = mmap.mmap(f.fileno(), 0)
            if store:
                shared[:SIZE] = fsutil.pattern(SIZE, "through-shared")
            else:
                assert sha256(shared[:]) == sha256(data)
            shared.flush()
            shared.close()
    out, status = private_map_across(mnt / "c0" / "f", map_shared)
    if store:
        assert out == [sha256(data[:SIZE // 2])] and status == -signal.SIGBUS
    else:
        assert out == [sha256(data[:SIZE // 2]), sha256(data)] and status == 0


def keep_cases(path):
    """Operations that change PATH's data, each as a function of an open
    O_RDWR descriptor (every one must copy the file for its mappings)."""
    new = fsutil.pattern(SIZE, "changed")
    donor = path.with_name("donor")
    fsutil.write_file(donor, new)

    def direct_write(fd):
        buf = mmap.mmap(-1, SIZE)  # page-aligned for O_DIRECT
        buf[:] = new
        dfd = os.open(path, os.O_WRONLY | os.O_DIRECT)
        try:
            assert os.pwritev(dfd, [buf], 0) == SIZE
        finally:
            os.close(dfd)

    def clone_into(fd):
        with open(donor, "rb") as src:
            fsutil.ficlone(src.fileno(), fd)

    def copy_range_into(fd):
        with open(donor, "rb") as src:
            assert os.copy_file_range(src.fileno(), fd, SIZE, 0, 0) == SIZE

    return {
        "write": lambda fd: os.pwrite(fd, new, 0),
        "direct-write": direct_write,
        "punch-hole": lambda fd: fsutil.fallocate(
            fd, fsutil.FALLOC_FL_PUNCH_HOLE | fsutil.FALLOC_FL_KEEP_SIZE, 0, SIZE // 2),
        "ficlone": clone_into,
        "copy-file-range": copy_range_into,
        "ftruncate": lambda fd: os.ftruncate(fd, PAGE),
    }


@pytest.mark.debug_kernel
@pytest.mark.parametrize("op", ["write", "direct-write", "punch-hole", "ficlone",
                                "copy-file-range", "ftruncate"])
def test_every_change_to_the_file_keeps_the_mappings_data(scmp, op):
    """Each way to change a file's data copies it first: the private
    mapping, half read before, reads all of the image's data after."""
    mnt, dev = scmp
    data = writable_image(mnt, dev, 1, f"change-{op}")
    path = mnt / "c0" / "f"
    change = keep_cases(path)[op]
    m0 = mapped_stats(dev)

    def apply():
        fd = os.open(path, os.O_RDWR)
        try:
            change(fd)
            os.fsync(fd)
        finally:
            os.close(fd)
    out, status = private_map_across(path, apply)
    assert status == 0 and out == [sha256(data[:SIZE // 2]), sha256(data)]
    assert mapped_stats(dev)["mapped_kept"] == m0["mapped_kept"] + 1
    assert sha256_file(path) != sha256(data)


def test_a_nowait_write_copies_nothing_and_says_eagain(scmp):
    """An RWF_NOWAIT write may not wait for the copy: EAGAIN, nothing
    copied or written; the blocking retry copies."""
    mnt, dev = scmp
    data = writable_image(mnt, dev, 1, "nowait")
    path = mnt / "c0" / "f"
    m0 = mapped_stats(dev)
    m = Mapped(path, private=True)
    try:
        fd = os.open(path, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                os.pwritev(fd, [b"x" * PAGE], 0, os.RWF_NOWAIT)
            assert mapped_stats(dev)["mapped_kept"] == m0["mapped_kept"]
            assert os.pwrite(fd, b"x" * PAGE, 0) == PAGE
        finally:
            os.close(fd)
        assert mapped_stats(dev)["mapped_kept"] == m0["mapped_kept"] + 1
        assert m.sha() == sha256(data)
    finally:
        m.close()


class FailCopy:
    """Every copy that keeps the data of a file's private mappings fails
    with ERRNO until end(): /sys/fs/btrfs/<fsid>/debug/shared_map_copy_error
    (CONFIG_BTRFS_DEBUG, the debug kernel; btrfs/0034)."""

    @staticmethod
    def knob(dev):
        path = fsutil.btrfs_sysfs_dir(dev) / "debug" / "shared_map_copy_error"
        if not path.exists():
            pytest.skip("shared_map_copy_error needs CONFIG_BTRFS_DEBUG (the debug kernel)")
        return path

    def __init__(self, dev, errno_value):
        self.path = self.knob(dev)
        self.path.write_text(str(errno_value))
        assert self.path.read_text().strip() == str(errno_value)

    def end(self):
        self.path.write_text("0")


# EINTR is left out: Python retries a system call that fails with it.
@pytest.mark.parametrize("op,error,fails", [
    ("write", errno.ENOSPC, True),
    ("write", errno.EDQUOT, True),
    ("ftruncate", errno.ENOMEM, True),
    ("write", errno.EIO, False),
    ("ftruncate", errno.ENOSPC, False),
], ids=["write-enospc", "write-edquot", "ftruncate-enomem", "write-eio", "ftruncate-enospc"])
@pytest.mark.debug_kernel
def test_a_copy_that_fails(scmp, op, error, fails):
    """The copy the first change of the file makes fails once made.  For
    lack of space a write fails with that error, and short of memory a
    truncate too, changing nothing: the file and the mapping keep their
    data.  A truncate short of space (it may be what frees space) and a
    write after any other failure go on: the mapping keeps what it read,
    its pages not yet read fault with SIGBUS (as after a truncate on
    stock), and the kernel names the file and the reason.  Either way the
    failed copy, an orphan holding the file's extents, is deleted."""
    mnt, dev = scmp
    FailCopy.knob(dev)
    data = writable_image(mnt, dev, 1, f"copy-fails-{op}-{error}")
    path = mnt / "c0" / "f"
    ino = os.stat(path).st_ino
    root = fsutil.btrfs_root_id(path.parent)
    change = keep_cases(path)[op]
    # The next inode number of the subvolume goes to the copy.
    copy_ino = os.stat(path.with_name("donor")).st_ino + 1
    m0 = mapped_stats(dev)
    # Only where nothing may fault with SIGBUS: a mapping for the next change.
    kept = Mapped(path, private=True) if fails else None
    log = fsutil.KernelLog()
    failing = []

    def apply():
        fail = FailCopy(dev, error)
        fd = os.open(path, os.O_RDWR)
        try:
            change(fd)
        except OSError as e:
            failing.append(e.errno)
        finally:
            os.close(fd)
            fail.end()
        # The copy was made (it took an inode number) before it failed.
        probe = path.with_name("probe")
        probe.touch()
        assert os.stat(probe).st_ino == copy_ino + 1
    try:
        out, status = private_map_across(path, apply)
        messages = log.read()
        if fails:
            assert sha256_file(path) == sha256(data)
            # The next change copies.
            with open(path, "r+b") as f:
                f.write(b"x")
            assert mapped_stats(dev)["mapped_kept"] == m0["mapped_kept"] + 1
            assert kept.sha() == sha256(data)
    finally:
        log.close()
        if kept:
            kept.close()
    said = [line for line in messages
            if f"root {root} ino {ino}: cannot keep the data of its private mappings" in line]
    if fails:
        assert failing == [error] and not said
        assert status == 0 and out == [sha256(data[:SIZE // 2]), sha256(data)]
    else:
        assert mapped_stats(dev)["mapped_kept"] == m0["mapped_kept"]
        assert failing == [] and len(said) == 1, messages
        # %pe: the name with CONFIG_SYMBOLIC_ERRNAME, else the number.
        assert re.search(rf": -({errno.errorcode[error]}|{error});", said[0]), said
        assert out == [sha256(data[:SIZE // 2])] and status == -signal.SIGBUS
        assert sha256_file(path) != sha256(data)
    # The copy that failed, an orphan, is deleted with its items.
    assert orphan_items(dev, path, want=0) == 0
    dump = fsutil.run("btrfs", "inspect-internal", "dump-tree", "-t", root, dev)
    assert f"key ({copy_ino} " not in dump


def test_uprobes_follow_private_mappings_across_a_change_of_their_file(scmp):
    """A uprobe on a library in a writable subvolume fires in its bound
    private mappings.  Once the file is written (they keep the old data), a
    breakpoint put there before still fires; a probe registered afterwards,
    whose instruction is read from the new data, goes only to mappings of
    the new data (unlike stock, where the old mapping shows the new data
    and the new probe fires there too); and removing both leaves no
    breakpoint behind (one would kill its process with SIGTRAP at the next
    call)."""
    mnt, dev = scmp
    lib = mnt / "img" / "libz.so"
    fsutil.run("btrfs", "subvolume", "create", str(mnt / "img"))
    fsutil.write_file(lib, Path("/lib/x86_64-linux-gnu/libz.so.1").read_bytes())
    cold(mnt, dev)
    offsets = {name: elf_symbol_offset(lib, name) for name in ("zlibVersion", "zlibCompileFlags")}
    tracefs()
    callers = []
    try:
        m0 = mapped_stats(dev)
        old = Caller("python3", lib)
        callers.append(old)
        m1 = mapped_stats(dev)
        assert m1["mapped_attaches"] > m0["mapped_attaches"]
        uprobe_events(f"p:pcshare/zlibVersion {lib}:{offsets['zlibVersion']:#x}")
        (TRACING / "events" / "pcshare" / "enable").write_text("1\n")
        uprobe_hits()
        old.call("zlibVersion", 3)
        assert uprobe_hits() == {("zlibVersion", old.pid): 3}
        # The same bytes: the file changed all the same, and was copied.
        overwrite(lib, lib.read_bytes())
        assert mapped_stats(dev)["mapped_kept"] - m1["mapped_kept"] == 1
        new = Caller("python3", lib)
        callers.append(new)
        assert mapped_stats(dev)["mapped_attaches"] > m1["mapped_attaches"]
        uprobe_events(f"p:pcshare/zlibCompileFlags {lib}:{offsets['zlibCompileFlags']:#x}")
        (TRACING / "events" / "pcshare" / "enable").write_text("1\n")
        uprobe_hits()
        for c in callers:
            for name in offsets:
                c.call(name, 3)
        assert uprobe_hits() == {("zlibVersion", old.pid): 3, ("zlibVersion", new.pid): 3,
                                 ("zlibCompileFlags", new.pid): 3}
        remove_uprobes("pcshare", offsets)
        for c in callers:
            for name in offsets:
                c.call(name, 3)
        assert uprobe_hits() == {}
    finally:
        codes = [c.finish() for c in callers]
        remove_uprobes("pcshare", offsets)
    assert codes == [0] * len(callers)


class OtherUser:
    """A process of user nobody that maps, privately and on command, the
    files PATHS, opened before it dropped root (the test's directories are
    root's), and answers with the mapping's SHA-256.  A path given twice
    is mapped twice."""

    SCRIPT = ("import hashlib, mmap, os, sys\n"
              "files = [open(p, 'rb') for p in sys.argv[1:]]\n"
              "os.setgroups([]); os.setgid(65534); os.setuid(65534)\n"
              "maps = {}\n"
              "print('up', flush=True)\n"
              "for line in sys.stdin:\n"
              "    op, i = line.split()\n"
              "    i = int(i)\n"
              "    if op == 'map':\n"
              "        maps[i] = mmap.mmap(files[i].fileno(), 0, access=mmap.ACCESS_COPY)\n"
              "    elif op == 'pageout':\n"
              "        maps[i].madvise(%d)\n"
              "    elif op == 'unmap':\n"
              "        maps.pop(i).close()\n"
              "    print(hashlib.sha256(maps[i][:]).hexdigest() if i in maps else 'unmapped',\n"
              "          flush=True)\n") % MADV_PAGEOUT

    def __init__(self, *paths):
        self.proc = subprocess.Popen(["python3", "-S", "-c", self.SCRIPT, *map(str, paths)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "up"

    def ask(self, op, i):
        self.proc.stdin.write(f"{op} {i}\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def finish(self):
        self.proc.stdin.close()
        return self.proc.wait(timeout=60)


def keep_limit(dev):
    return fsutil.btrfs_sysfs_dir(dev) / "shared_cache" / "mapped_keep_limit"


def assert_refused(user, i, data, dev):
    """USER's mapping of its file I shows DATA, through the stock path that
    the limit sent it to; it is unmapped again.  Returns the counters."""
    m0 = mapped_stats(dev)
    assert user.ask("map", i) == sha256(data)
    m1 = mapped_stats(dev)
    assert m1["mapped_attaches"] == m0["mapped_attaches"]
    assert m1["mapped_keep_refused"] == m0["mapped_keep_refused"] + 1
    assert user.ask("unmap", i) == "unmapped"
    return m1


def test_other_users_bind_up_to_the_keep_limit(scmp):
    """A binding may cost the file's writers a copy and keeps its space:
    the owner pays for its own, and another user's bindings reserve the
    disk bytes a copy would keep, once per version of a file (however
    many mappings of it, whoever bound it first) and until its last
    binding goes, against mapped_keep_limit (default 0: only owners bind).
    Past it a mapping takes the stock path; under it the owner's write
    copies the file for another user's mapping as for its own."""
    mnt, dev = scmp
    data = writable_image(mnt, dev, 2, "others")
    knob = keep_limit(dev)
    assert knob.read_text() == "0\n"
    c0, c1 = mnt / "c0" / "f", mnt / "c1" / "f"
    user = OtherUser(c0, c1, c0)
    own = None
    try:
        m1 = assert_refused(user, 0, data, dev)
        # Room for one file, not two.
        knob.write_text(f"{SIZE + SIZE // 2}\n")
        own = Mapped(c1, private=True)
        assert own.sha() == sha256(data)
        assert user.ask("map", 0) == sha256(data)
        assert user.ask("map", 2) == sha256(data)
        m2 = mapped_stats(dev)
        assert m2["mapped_attaches"] == m1["mapped_attaches"] + 3
        assert m2["mapped_keep_reserved"] == SIZE
        # The owner bound c1 first: the other user's binding must reserve.
        assert user.ask("map", 1) == sha256(data)
        m3 = mapped_stats(dev)
        assert m3["mapped_attaches"] == m2["mapped_attaches"]
        assert m3["mapped_keep_refused"] == m2["mapped_keep_refused"] + 1
        assert m3["mapped_keep_reserved"] == SIZE
        assert user.ask("unmap", 1) == "unmapped"
        new = fsutil.pattern(SIZE, "the owner wrote")
        overwrite(c0, new)
        assert mapped_stats(dev)["mapped_kept"] == m3["mapped_kept"] + 1
        fsutil.run("sync")
        assert user.ask("pageout", 0) == sha256(data)
        fsutil.drop_caches()
        assert user.ask("pageout", 2) == sha256(data)
        assert sha256_file(c0) == sha256(new)
        # The reservation lives as long as the copy it paid for.
        assert user.ask("unmap", 0) == "unmapped"
        assert mapped_stats(dev)["mapped_keep_reserved"] == SIZE
        assert user.ask("unmap", 2) == "unmapped"
        assert mapped_stats(dev)["mapped_keep_reserved"] == 0
        # Now c1, which the owner still maps, fits; it stays reserved after
        # the owner's mapping goes, until the other user's does.
        assert user.ask("map", 1) == sha256(data)
        assert mapped_stats(dev)["mapped_keep_reserved"] == SIZE
        own.close()
        own = None
        assert mapped_stats(dev)["mapped_keep_reserved"] == SIZE
        assert user.ask("unmap", 1) == "unmapped"
    finally:
        if own:
            own.close()
        code = user.finish()
        knob.write_text("0\n")
    assert code == 0
    assert mapped_stats(dev)["mapped_keep_reserved"] == 0


def test_other_users_bind_only_files_cheap_to_copy(scmp):
    """A copy costs the writer a step per file extent item: another user
    binds no file of more than 1024, whatever the limit, even one whose
    extents the key merges (1025 preallocated blocks, one zero segment);
    the owner does."""
    mnt, dev = scmp
    fsutil.run("btrfs", "subvolume", "create", str(mnt / "c0"))
    path = mnt / "c0" / "f"
    with open(path, "wb") as f:
        for i in range(1025):
            os.posix_fallocate(f.fileno(), i * PAGE, PAGE)
    cold(mnt, dev)
    dump = fsutil.run("btrfs", "inspect-internal", "dump-tree", "-t",
                      fsutil.btrfs_root_id(mnt / "c0"), dev)
    # Leaves' items, not the keys of the nodes above them.
    assert len(re.findall(r"item \d+ key \(\d+ EXTENT_DATA ", dump)) == 1025
    knob = keep_limit(dev)
    knob.write_text(f"{1 << 30}\n")
    m0 = mapped_stats(dev)
    user = OtherUser(path)
    try:
        assert user.ask("map", 0) == sha256(bytes(1025 * PAGE))
        m1 = mapped_stats(dev)
        assert m1["mapped_attaches"] == m0["mapped_attaches"]
        assert m1["mapped_keep_reserved"] == 0
        assert m1["mapped_keep_refused"] == m0["mapped_keep_refused"]
        assert user.ask("unmap", 0) == "unmapped"
    finally:
        code = user.finish()
        knob.write_text("0\n")
    assert code == 0
    own = Mapped(path, private=True)
    try:
        assert own.sha() == sha256(bytes(1025 * PAGE))
        assert mapped_stats(dev)["mapped_attaches"] == m0["mapped_attaches"] + 1
    finally:
        own.close()


def test_overlayfs_mappings_are_judged_by_the_task_not_the_mounter(scmp):
    """Overlayfs calls btrfs's ->mmap with its mounter's credentials (root
    here): the owner rule must judge the task mapping the file, so another
    user mapping root's file through the overlay is not its owner."""
    mnt, dev = scmp
    data = writable_image(mnt, dev, 1, "overlay-owner")
    upper, work, top = (mnt / d for d in ("upper", "work", "merged"))
    for d in (upper, work, top):
        d.mkdir()
    fsutil.run("mount", "-t", "overlay", "overlay", "-o",
               f"lowerdir={mnt / 'c0'},upperdir={upper},workdir={work}", str(top))
    try:
        user = OtherUser(top / "f")
        try:
            m0 = assert_refused(user, 0, data, dev)
        finally:
            assert user.finish() == 0
        own = Mapped(top / "f", private=True)
        try:
            assert own.sha() == sha256(data)
            assert mapped_stats(dev)["mapped_attaches"] == m0["mapped_attaches"] + 1
        finally:
            own.close()
    finally:
        fsutil.run("umount", str(top))


def test_the_keep_limit_takes_a_number_of_bytes_from_root(scmp):
    """mapped_keep_limit takes a decimal number of bytes from root;
    anything else is EINVAL, more than fits in s64 ERANGE, another user
    may not open it, and the limit stays what it was."""
    mnt, dev = scmp
    knob = keep_limit(dev)
    try:
        for text, value in (("1073741824", 1 << 30), ("4096\n", 4096)):
            knob.write_text(text)
            assert int(knob.read_text()) == value
        for text, err in (("1G", errno.EINVAL), ("abc", errno.EINVAL), ("-1", errno.EINVAL),
                          ("12 34", errno.EINVAL), ("0x10", errno.EINVAL), ("\n", errno.EINVAL),
                          (str(1 << 63), errno.ERANGE), (str(1 << 64), errno.ERANGE)):
            with pytest.raises(OSError) as raised:
                knob.write_text(text)
            assert raised.value.errno == err, text
        assert int(knob.read_text()) == 4096
        pid = os.fork()
        if pid == 0:
            os.setgid(65534)
            os.setuid(65534)
            try:
                knob.write_text("0\n")
            except PermissionError:
                os._exit(0)
            os._exit(1)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        assert int(knob.read_text()) == 4096
    finally:
        knob.write_text("0\n")
