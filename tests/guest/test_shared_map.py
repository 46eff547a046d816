"""Mappings of files in read-only subvolumes share one copy (pcshare kernel,
mount option shared_cache_map).

->mmap binds a mapping of a file in a read-only subvolume, once, to a
content inode found by the file's extent layout: read-only snapshots of one
image map the same folios, read from disk once, and keep them after the
last mapping like page cache.  Nothing is rebound later: the file cannot
change while bound (its subvolume stays read-only, EBUSY otherwise, and it
gets no writer).  Every test compares mapped data with what it must be
(SHA-256) and checks the shared_cache/mapped_* counters.
"""
import ctypes
import errno
import mmap
import os
import re
import struct
import subprocess
import time
from pathlib import Path

import pytest

from harness import fsutil
from harness.fsutil import MiB, sha256, sha256_file

from test_shared_cache import PAGE, _fresh, assert_compressed, cold, compressed_sc
from test_shared_cache import sc, scm  # noqa: F401 (fixtures)

# On the debug kernel in make test too (marker debug_kernel): the cases that
# need its config (hold points, IMA, migration) and the mm-facing paths of
# a mapping's life that KASAN should see end (fork and exit, uprobes, a
# deleted snapshot). make test-debug runs the rest there too.
pytestmark = pytest.mark.shared_cache
SIZE = 8 * MiB
libc = ctypes.CDLL(None, use_errno=True)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
MADV_PAGEOUT = 21
MADV_SOFT_OFFLINE = 101
# SHARED_CACHE_CONTENT_BATCH (fs/btrfs/shared-cache.h): folios one fill takes.
CONTENT_BATCH = 32


@pytest.fixture
def sczm(request, scratch_dev, tmp_path):
    """A fresh btrfs mounted with shared_cache_map,compress-force=zstd."""
    for mnt in compressed_sc(request, scratch_dev, tmp_path, "zstd", "shared_cache_map"):
        yield mnt, scratch_dev


@pytest.fixture
def scmp(scratch_dev, tmp_path):
    """A fresh btrfs mounted with shared_cache_map_private (implies
    shared_cache_map)."""
    for mnt in _fresh("btrfs", scratch_dev, tmp_path, "shared_cache_map_private"):
        yield mnt, scratch_dev


def mapped_stats(dev):
    return {k: v for k, v in fsutil.shared_cache_stats(dev).items() if k.startswith("mapped_")}


class Mapped:
    """PATH mapped from a read-only descriptor, shared or private."""

    def __init__(self, path, private=False):
        self.path = path
        with open(path, "rb") as f:
            access = mmap.ACCESS_COPY if private else mmap.ACCESS_READ
            self.map = mmap.mmap(f.fileno(), 0, access=access)

    def sha(self, start=0, end=None):
        return sha256(self.map[start:end])

    def pageout(self):
        """Drop the mapping's pages (MADV_PAGEOUT), so the next read faults."""
        self.map.madvise(MADV_PAGEOUT)

    def close(self):
        self.map.close()


def maps_lines(path, pid="self"):
    return [line for line in Path(f"/proc/{pid}/maps").read_text().splitlines()
            if line.endswith(" " + str(path))]


def image(mnt, dev, snapshots, tag, compressed=False, name="f", size=SIZE):
    """Subvolume img with NAME of SIZE bytes, read-only snapshots s0..sN-1
    of it, then a cold mount; returns the data."""
    data = fsutil.pattern(size, tag)
    fsutil.run("btrfs", "subvolume", "create", str(mnt / "img"))
    fsutil.write_file(mnt / "img" / name, data)
    if compressed:
        assert_compressed(mnt / "img" / name)
    for i in range(snapshots):
        fsutil.run("btrfs", "subvolume", "snapshot", "-r", str(mnt / "img"), str(mnt / f"s{i}"))
    cold(mnt, dev)
    return data


def set_ro(path, value):
    return subprocess.run(["btrfs", "property", "set", str(path), "ro", value],
                          capture_output=True, text=True)


@pytest.mark.parametrize("mount", ["scm", "sczm"])
def test_snapshots_mapped_share_one_copy_read_from_disk_once(request, mount):
    mnt, dev = request.getfixturevalue(mount)
    data = image(mnt, dev, 4, f"share{mount}", compressed=mount == "sczm")
    m0, disk0 = mapped_stats(dev), fsutil.disk_read_bytes(dev)
    cached0 = fsutil.meminfo("Cached")
    resident0 = fsutil.shared_cache_stats(dev)["resident_pages"]
    paths = [mnt / f"s{i}" / "f" for i in range(4)]
    maps = [Mapped(p, private=i % 2 == 1) for i, p in enumerate(paths)]
    try:
        for m in maps:
            assert m.sha() == sha256(data)
        grown = fsutil.meminfo("Cached") - cached0
        m1 = mapped_stats(dev)
        assert m1["mapped_attaches"] - m0["mapped_attaches"] == 4
        assert m1["mapped_aliases"] - m0["mapped_aliases"] == 1
        assert m1["mapped_pages"] == SIZE // PAGE
        if mount == "scm":
            # One copy, read from disk straight into the shared mapping:
            # neither a copy per file nor one in the extent cache beside it.
            assert 0.9 * SIZE <= grown <= 1.15 * SIZE, grown
            assert fsutil.shared_cache_stats(dev)["resident_pages"] - resident0 < 64
            assert SIZE <= m1["mapped_bytes_read"] - m0["mapped_bytes_read"] <= 1.1 * SIZE
            assert fsutil.disk_read_bytes(dev) - disk0 <= 1.2 * SIZE
        else:
            # Compressed extents are decompressed once, in the cache, and copied.
            assert grown <= 2.3 * SIZE, grown
        for p in paths:
            # /proc/<pid>/maps names the file, its device and inode.
            lines = maps_lines(p)
            assert lines and all(f" {os.stat(p).st_ino} " in line for line in lines)
    finally:
        for m in maps:
            m.close()
    # Like page cache, the content outlives its mappings: mapping a fifth
    # time reads nothing from disk.
    m2 = mapped_stats(dev)
    assert m2["mapped_aliases"] - m0["mapped_aliases"] == 1
    assert m2["mapped_pages"] == SIZE // PAGE
    disk1 = fsutil.disk_read_bytes(dev)
    again = Mapped(paths[2])
    try:
        assert again.sha() == sha256(data)
    finally:
        again.close()
    assert fsutil.disk_read_bytes(dev) - disk1 < MiB


@pytest.mark.parametrize("mount", ["scm", "scmp"])
def test_files_of_writable_subvolumes_keep_the_stock_path(request, mount):
    """Mappings of a writable file stay on the file, and a shared one sees
    writes as on stock; with shared_cache_map_private the private one is
    bound and keeps the data it was made with (test_shared_map_private)."""
    mnt, dev = request.getfixturevalue(mount)
    private_bound = mount == "scmp"
    data = image(mnt, dev, 1, "writable")
    m0 = mapped_stats(dev)
    maps = [Mapped(mnt / "img" / "f"), Mapped(mnt / "img" / "f", private=True)]
    try:
        assert [m.sha() for m in maps] == [sha256(data)] * 2
        assert mapped_stats(dev)["mapped_attaches"] == m0["mapped_attaches"] + private_bound
        # Still writable, and its shared mapping sees the write as on stock.
        patch = fsutil.pattern(PAGE, "w")
        with open(mnt / "img" / "f", "r+b") as f:
            f.write(patch)
        assert maps[0].map[:PAGE] == patch
        assert (maps[1].map[:PAGE] == patch) != private_bound
    finally:
        for m in maps:
            m.close()


def test_a_mapped_subvolume_cannot_become_writable_until_unmapped(scm):
    mnt, dev = scm
    data = image(mnt, dev, 2, "ebusy")
    m = Mapped(mnt / "s0" / "f", private=True)
    try:
        assert m.sha() == sha256(data)
        flip = set_ro(mnt / "s0", "false")
        assert flip.returncode != 0 and "busy" in flip.stderr.lower(), flip.stderr
        assert fsutil.run("btrfs", "property", "get", str(mnt / "s0"), "ro").strip() == "ro=true"
        # The unmapped sibling flips at once.
        assert set_ro(mnt / "s1", "false").returncode == 0
    finally:
        m.close()
    assert set_ro(mnt / "s0", "false").returncode == 0
    patch = fsutil.pattern(PAGE, "after-flip")
    with open(mnt / "s0" / "f", "r+b") as f:
        f.write(patch)
    fresh = Mapped(mnt / "s0" / "f")
    try:
        assert fresh.map[:PAGE] == patch and fresh.sha(PAGE) == sha256(data[PAGE:])
    finally:
        fresh.close()


def assert_not_bound_beside(writer, dev, data, private=False):
    """A mapping of WRITER's file (holding DATA) made while WRITER is open
    takes the stock path: not bound, and it sees WRITER's write to a page
    it has not read."""
    m0 = mapped_stats(dev)
    m = Mapped(writer.name, private=private)
    try:
        assert m.sha(PAGE) == sha256(data[PAGE:])
        assert mapped_stats(dev)["mapped_attaches"] == m0["mapped_attaches"]
        patch = fsutil.pattern(PAGE, "late")
        writer.write(patch)
        writer.flush()
        assert m.map[:PAGE] == patch
    finally:
        m.close()


def test_a_writer_from_before_the_subvolume_became_read_only_is_not_bound(scm):
    """Such a descriptor can still write (btrfs checks read-only at open),
    so the file's mappings take the stock path and see its writes."""
    mnt, dev = scm
    data = image(mnt, dev, 0, "oldwriter")
    with open(mnt / "img" / "f", "r+b") as writer:
        assert set_ro(mnt / "img", "true").returncode == 0
        assert_not_bound_beside(writer, dev, data)


def test_changes_to_the_origin_never_reach_a_bound_mapping(scm):
    """The cross-file case of the old design (review M1): the writable
    origin and a clone of it are written, truncated and reflinked over
    while a snapshot's mapping is bound; its refaults read only its own
    file's data."""
    mnt, dev = scm
    data = image(mnt, dev, 1, "origin")
    fsutil.run("cp", "--reflink=always", str(mnt / "img" / "f"), str(mnt / "img" / "g"))
    m = Mapped(mnt / "s0" / "f", private=True)
    try:
        assert m.sha() == sha256(data)
        secret = fsutil.pattern(SIZE, "secret")
        fsutil.write_file(mnt / "img" / "f", secret)
        fsutil.write_file(mnt / "img" / "g", secret)
        os.truncate(mnt / "img" / "f", PAGE)
        fsutil.run("cp", "--reflink=always", str(mnt / "img" / "g"), str(mnt / "img" / "f"))
        fsutil.run("sync")
        for _ in range(3):
            m.pageout()
            assert m.sha() == sha256(data)
        assert sha256_file(mnt / "img" / "f") == sha256(secret)
    finally:
        m.close()


def test_no_writer_waits_for_a_stopped_mapper(scm):
    """Binding touches no other process: with an unprivileged mapper stopped
    in the middle of its mapping, root writes, truncates and flips a sibling
    snapshot read-write at once (stock: a reader cannot delay a writer)."""
    mnt, dev = scm
    data = image(mnt, dev, 2, "stopped")
    script = ("import mmap, os, sys\n"
              "f = open(sys.argv[1], 'rb')\n"
              "m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)\n"
              "m[:4096]\n"
              "f.close()\n"
              "os.setgroups([]); os.setgid(65534); os.setuid(65534)\n"
              "print('mapped', flush=True)\n"
              "os.kill(os.getpid(), 19)\n"
              "print(m[4096:8192].hex(), flush=True)\n")
    child = subprocess.Popen(["python3", "-c", script, str(mnt / "s0" / "f")],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "mapped\n"
        t0 = time.monotonic()
        with open(mnt / "img" / "f", "r+b") as f:
            f.write(b"x" * PAGE)
        os.truncate(mnt / "img" / "f", PAGE)
        assert set_ro(mnt / "s1", "false").returncode == 0
        assert time.monotonic() - t0 < 30, "a writer waited for the stopped mapper"
    finally:
        os.kill(child.pid, 18)
        out, _ = child.communicate(timeout=60)
    assert out == data[PAGE:2 * PAGE].hex() + "\n"
    assert child.returncode == 0


def test_overlayfs_over_a_read_only_snapshot_shares(scm):
    mnt, dev = scm
    data = image(mnt, dev, 2, "overlay")
    merged = []
    try:
        for i in range(2):
            upper, work, top = (mnt / f"{d}{i}" for d in ("upper", "work", "merged"))
            for d in (upper, work, top):
                d.mkdir()
            fsutil.run("mount", "-t", "overlay", "overlay", "-o",
                       f"lowerdir={mnt / f's{i}'},upperdir={upper},workdir={work}", str(top))
            merged.append(top)
        m0 = mapped_stats(dev)
        maps = [Mapped(top / "f", private=True) for top in merged]
        try:
            assert [m.sha() for m in maps] == [sha256(data)] * 2
            m1 = mapped_stats(dev)
            assert m1["mapped_attaches"] - m0["mapped_attaches"] == 2
            assert m1["mapped_aliases"] - m0["mapped_aliases"] == 1
            # The user's path, the overlay's, names the mapping.
            assert maps_lines(merged[0] / "f")
            for m in maps:
                m.pageout()
            assert [m.sha() for m in maps] == [sha256(data)] * 2
        finally:
            for m in maps:
                m.close()
    finally:
        for top in merged:
            fsutil.run("umount", str(top))


@pytest.mark.debug_kernel
def test_a_deleted_snapshot_keeps_its_bound_mapping_readable(scm):
    mnt, dev = scm
    data = image(mnt, dev, 1, "deleted")
    m = Mapped(mnt / "s0" / "f", private=True)
    try:
        assert m.sha() == sha256(data)
        fsutil.run("btrfs", "subvolume", "delete", str(mnt / "s0"))
        # Its space may be reused by new data as soon as it is freed.
        fsutil.write_file(mnt / "img" / "f", fsutil.pattern(SIZE, "reuse"))
        fsutil.run("sync")
        m.pageout()
        assert m.sha() == sha256(data)
    finally:
        m.close()


def test_balance_under_bound_mappings(scm):
    """Balance moves the extents a content inode was found by: bound
    mappings keep their data; a new mapping finds a new content inode."""
    mnt, dev = scm
    data = image(mnt, dev, 2, "balance")
    before = fsutil.physical_map(mnt / "s0" / "f")
    a = Mapped(mnt / "s0" / "f", private=True)
    try:
        assert a.sha() == sha256(data)
        fsutil.run("btrfs", "balance", "start", "--full-balance", "-d", str(mnt))
        assert fsutil.physical_map(mnt / "s0" / "f") != before
        m0 = mapped_stats(dev)
        b = Mapped(mnt / "s1" / "f")
        try:
            assert b.sha() == sha256(data)
            assert mapped_stats(dev)["mapped_aliases"] == m0["mapped_aliases"] + 1
        finally:
            b.close()
        a.pageout()
        assert a.sha() == sha256(data)
    finally:
        a.close()


@pytest.mark.debug_kernel
def test_forks_and_exits_of_bound_mappings(scm):
    mnt, dev = scm
    data = image(mnt, dev, 1, "forks")
    m = Mapped(mnt / "s0" / "f", private=True)
    try:
        pids = []
        for i in range(16):
            pid = os.fork()
            if pid == 0:
                ok = m.sha(i * PAGE * 16, (i + 1) * PAGE * 16) == \
                    sha256(data[i * PAGE * 16:(i + 1) * PAGE * 16])
                os._exit(0 if ok else 1)
            pids.append(pid)
        assert [os.waitpid(p, 0)[1] for p in pids] == [0] * 16
        assert m.sha() == sha256(data)
    finally:
        m.close()
    assert set_ro(mnt / "s0", "false").returncode == 0


def test_remap_file_pages_of_a_bound_mapping_works_as_on_the_file(scm):
    """remap_file_pages() of a bound mapping answers as for the same file on
    the stock path (a writable subvolume's copy): a read-only descriptor's
    shared mapping is not VM_SHARED, so both refuse with EINVAL, and both
    keep their data."""
    mnt, dev = scm
    data = image(mnt, dev, 1, "remap")
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.remap_file_pages.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                      ctypes.c_size_t, ctypes.c_int]
    answers = []
    for path in (mnt / "img" / "f", mnt / "s0" / "f"):
        m0 = mapped_stats(dev)
        fd = os.open(path, os.O_RDONLY)
        addr = libc.mmap(None, SIZE, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        os.close(fd)
        assert addr != ctypes.c_void_p(-1).value, os.strerror(ctypes.get_errno())
        try:
            bound = mapped_stats(dev)["mapped_attaches"] - m0["mapped_attaches"]
            rc = libc.remap_file_pages(addr, PAGE, 0, 5, 0)
            answers.append((rc, ctypes.get_errno() if rc else 0))
            assert ctypes.string_at(addr, 2 * PAGE) == data[:2 * PAGE]
        finally:
            libc.munmap(addr, SIZE)
        assert bound == (path.parent.name == "s0")
    assert answers[0] == answers[1] == (-1, errno.EINVAL)


def python_image(mnt, dev):
    """Subvolume img holding this python3, read-only snapshots s0 and s1 of
    it, then a cold mount; returns the python3 copied."""
    python = Path(os.path.realpath("/usr/bin/python3"))
    fsutil.run("btrfs", "subvolume", "create", str(mnt / "img"))
    fsutil.write_file(mnt / "img" / "python3", python.read_bytes())
    os.chmod(mnt / "img" / "python3", 0o755)
    for i in range(2):
        fsutil.run("btrfs", "subvolume", "snapshot", "-r", str(mnt / "img"), str(mnt / f"s{i}"))
    cold(mnt, dev)
    return python


def test_executed_snapshots_share_their_text(scm):
    mnt, dev = scm
    python_image(mnt, dev)
    m0 = mapped_stats(dev)
    procs = [subprocess.Popen([str(mnt / f"s{i}" / "python3"), "-S", "-c",
                               "import sys; print('up', flush=True); sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for i in range(2)]
    try:
        for p in procs:
            assert p.stdout.readline() == "up\n"
        stats = mapped_stats(dev)
        assert stats["mapped_aliases"] - m0["mapped_aliases"] == 1
        assert stats["mapped_pages"] > 0
        for i, p in enumerate(procs):
            assert maps_lines(mnt / f"s{i}" / "python3", p.pid)
            assert os.readlink(f"/proc/{p.pid}/exe") == str(mnt / f"s{i}" / "python3")
    finally:
        for p in procs:
            p.communicate("")
    assert [p.returncode for p in procs] == [0, 0]


def elf_symbol_offset(path, name):
    """The file offset of the code of dynamic symbol NAME in ELF64 file PATH
    (what a uprobe definition names)."""
    b = Path(path).read_bytes()
    phoff, shoff = struct.unpack_from("<QQ", b, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", b, 0x36)
    sections = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize)
                for i in range(shnum)]
    dynsym = next(sec for sec in sections if sec[1] == 11)  # SHT_DYNSYM
    strtab = sections[dynsym[6]][4]
    for i in range(dynsym[5] // 24):
        st_name, _, _, _, value, _ = struct.unpack_from("<IBBHQQ", b, dynsym[4] + i * 24)
        if b[strtab + st_name:b.index(b"\0", strtab + st_name)] != name.encode():
            continue
        for j in range(phnum):
            p_type, _, p_offset, p_vaddr, _, p_filesz, _, _ = struct.unpack_from(
                "<IIQQQQQQ", b, phoff + j * phentsize)
            if p_type == 1 and p_vaddr <= value < p_vaddr + p_filesz:  # PT_LOAD
                return value - p_vaddr + p_offset
    raise AssertionError(f"{path}: no code for symbol {name}")


TRACING = Path("/sys/kernel/tracing")
TRACE_LINE = re.compile(r"^\s*.+?-(\d+)\s+\[\d+\].*?\s(\w+): \(")


def uprobe_events(*commands):
    """Write each command to uprobe_events on its own (no seek: Python's
    append mode seeks, which tracefs refuses)."""
    fd = os.open(TRACING / "uprobe_events", os.O_WRONLY | os.O_APPEND)
    try:
        for command in commands:
            os.write(fd, f"{command}\n".encode())
    finally:
        os.close(fd)


def tracefs():
    if not (TRACING / "uprobe_events").exists():
        fsutil.run("mount", "-t", "tracefs", "tracefs", str(TRACING))


def remove_uprobes(group, events):
    if (TRACING / "events" / group).exists():
        (TRACING / "events" / group / "enable").write_text("0\n")
        uprobe_events(*(f"-:{group}/{event}" for event in events))


def uprobe_hits():
    """{(event, pid): hits} from the trace buffer, which is then cleared."""
    hits = {}
    for line in (TRACING / "trace").read_text().splitlines():
        m = TRACE_LINE.match(line)
        if m:
            key = (m.group(2), int(m.group(1)))
            hits[key] = hits.get(key, 0) + 1
    (TRACING / "trace").write_text("")
    return hits


class Caller:
    """The python3 at PYTHON, which calls exported functions of itself or of
    the library LIB (through ctypes, so the exported code runs) as often as
    it is told."""

    SCRIPT = ("import ctypes, sys\n"
              "lib = ctypes.CDLL(sys.argv[1]) if len(sys.argv) > 1 else ctypes.pythonapi\n"
              "print('up', flush=True)\n"
              "for line in sys.stdin:\n"
              "    name, n = line.split()\n"
              "    for _ in range(int(n)):\n"
              "        getattr(lib, name)()\n"
              "    print('done', flush=True)\n")

    def __init__(self, python, lib=None):
        argv = [str(python), "-S", "-c", self.SCRIPT] + ([str(lib)] if lib else [])
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        assert self.proc.stdout.readline() == "up\n", argv
        self.pid = self.proc.pid

    def call(self, name, n):
        self.proc.stdin.write(f"{name} {n}\n")
        self.proc.stdin.flush()
        # A breakpoint left behind kills the process with SIGTRAP: no answer.
        assert self.proc.stdout.readline() == "done\n", self.proc.poll()

    def finish(self):
        self.proc.communicate("")
        return self.proc.returncode


@pytest.mark.debug_kernel
def test_uprobes_fire_in_every_bound_mapping_of_the_probed_file_only(scm):
    """A uprobe registered on a file of a read-only snapshot fires in its
    bound mappings made before the probe (found in the content inode's
    i_mmap) and after it (at mmap), also through overlayfs over that
    snapshot, as often as in an unbound file's mappings; never in another
    snapshot's mappings of the same content inode.  Removed, it leaves no
    breakpoint behind: the programs go on and exit 0."""
    mnt, dev = scm
    offset = elf_symbol_offset(python_image(mnt, dev), "Py_GetBuildInfo")
    upper, work, top = (mnt / d for d in ("upper", "work", "merged"))
    for d in (upper, work, top):
        d.mkdir()
    fsutil.run("mount", "-t", "overlay", "overlay", "-o",
               f"lowerdir={mnt / 's0'},upperdir={upper},workdir={work}", str(top))
    tracefs()
    probes = {"s0": mnt / "s0" / "python3", "img": mnt / "img" / "python3"}
    callers = []
    try:
        m0 = mapped_stats(dev)
        before = {name: Caller(path) for name, path in
                  (("s0", mnt / "s0" / "python3"), ("s1", mnt / "s1" / "python3"),
                   ("overlay", top / "python3"), ("img", mnt / "img" / "python3"))}
        callers += before.values()
        uprobe_events(*(f"p:pcshare/{event} {path}:{offset:#x}"
                        for event, path in probes.items()))
        (TRACING / "events" / "pcshare" / "enable").write_text("1\n")
        uprobe_hits()
        after = {name: Caller(mnt / name / "python3") for name in ("s0", "img")}
        callers += after.values()
        stats = mapped_stats(dev)
        # s0, s1 and the overlay's lower file: one content inode; img is writable.
        assert stats["mapped_aliases"] - m0["mapped_aliases"] == 1
        assert stats["mapped_attaches"] > m0["mapped_attaches"]
        for c in callers:
            c.call("Py_GetBuildInfo", 3)
        hits = uprobe_hits()
        assert hits.get(("img", before["img"].pid)) == 3, hits
        # Started after the probe: ld.so and python's start-up may call it too.
        assert hits.get(("img", after["img"].pid), 0) >= 3, hits
        assert hits.get(("s0", before["s0"].pid)) == 3, hits
        assert hits.get(("s0", before["overlay"].pid)) == 3, hits
        assert hits.get(("s0", after["s0"].pid)) == hits[("img", after["img"].pid)], hits
        # One probe a process, and none in s1's mapping of the same content.
        assert sorted(pid for _, pid in hits) == sorted(c.pid for c in callers if
                                                        c is not before["s1"]), hits
        remove_uprobes("pcshare", probes)
        for c in callers:
            c.call("Py_GetBuildInfo", 3)
        assert uprobe_hits() == {}
    finally:
        codes = [c.finish() for c in callers]
        fsutil.run("umount", str(top))
        remove_uprobes("pcshare", probes)
    assert codes == [0] * len(callers)


def test_sharing_mappings_is_opt_in(sc):
    """shared_cache alone leaves mappings private; shared_cache_map, set by
    remount, binds the next ones, and turning it off keeps shared_cache."""
    mnt, dev = sc
    data = image(mnt, dev, 2, "optin")
    assert "shared_cache_map" not in fsutil.mount_options(mnt)

    def map_both():
        before = mapped_stats(dev)
        maps = [Mapped(mnt / f"s{i}" / "f") for i in range(2)]
        try:
            assert [m.sha() for m in maps] == [sha256(data)] * 2
            return mapped_stats(dev)["mapped_attaches"] - before["mapped_attaches"]
        finally:
            for m in maps:
                m.close()

    assert map_both() == 0
    fsutil.run("mount", "-o", "remount,shared_cache_map", str(mnt))
    assert {"shared_cache", "shared_cache_map"} <= set(fsutil.mount_options(mnt))
    assert map_both() == 2
    fsutil.run("mount", "-o", "remount,noshared_cache_map", str(mnt))
    options = fsutil.mount_options(mnt)
    assert "shared_cache" in options and "shared_cache_map" not in options
    assert map_both() == 0


@pytest.mark.debug_kernel
def test_shared_folios_migrate_and_soft_offline(scm):
    """Compaction migrates content folios and MADV_SOFT_OFFLINE moves one
    out of a page it retires; the mapping reads the same data after both.
    Needs CONFIG_COMPACTION and CONFIG_MEMORY_FAILURE (the debug kernel)."""
    if not Path("/proc/sys/vm/compact_memory").exists():
        pytest.skip("kernel without CONFIG_COMPACTION")
    mnt, dev = scm
    data = image(mnt, dev, 2, "migrate")
    maps = [Mapped(mnt / f"s{i}" / "f", private=True) for i in range(2)]
    anchor = ctypes.c_char.from_buffer(maps[0].map)
    try:
        assert [m.sha() for m in maps] == [sha256(data)] * 2
        Path("/proc/sys/vm/compact_memory").write_text("1\n")
        assert [m.sha() for m in maps] == [sha256(data)] * 2
        addr = ctypes.addressof(anchor)
        if libc.madvise(addr + MiB, PAGE, MADV_SOFT_OFFLINE) != 0:
            err = ctypes.get_errno()
            assert err == errno.EINVAL, os.strerror(err)
            pytest.skip("kernel without CONFIG_MEMORY_FAILURE")
        assert [m.sha() for m in maps] == [sha256(data)] * 2
    finally:
        del anchor
        for m in maps:
            m.close()


def load_apparmor_profile(name, rules):
    if not Path("/sys/kernel/security/apparmor/profiles").exists():
        pytest.skip("kernel without AppArmor (or securityfs not mounted)")
    text = f"profile {name} flags=(attach_disconnected) {{\n{rules}\n}}\n"
    done = subprocess.run(["apparmor_parser", "--replace", "--skip-cache"], input=text,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


MPROTECT_SCRIPT = """
import ctypes, hashlib, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
PROT_READ, PROT_EXEC, MAP_PRIVATE, FAILED = 1, 4, 2, ctypes.c_void_p(-1).value
out = []
for path in sys.argv[1:]:
    fd = os.open(path, os.O_RDONLY)
    addr = libc.mmap(None, 4096, PROT_READ, MAP_PRIVATE, fd, 0)
    assert addr != FAILED, os.strerror(ctypes.get_errno())
    sha = hashlib.sha256(ctypes.string_at(addr, 4096)).hexdigest()
    rc = libc.mprotect(addr, 4096, PROT_READ | PROT_EXEC)
    mprot = 0 if rc == 0 else ctypes.get_errno()
    exec_map = libc.mmap(None, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0)
    mmap_exec = 0 if exec_map != FAILED else ctypes.get_errno()
    out.append(f"{sha} {mprot} {mmap_exec}")
print(" ".join(out), flush=True)
sys.stdin.readline()
"""


def mprotect_each(dev, paths, prefix=()):
    """Run MPROTECT_SCRIPT on PATHS (under PREFIX, e.g. aa-exec): per path,
    its first page's sha256, mprotect(PROT_EXEC)'s errno, mmap(PROT_EXEC)'s
    errno. Checks that exactly one of the read-only mappings was bound (the
    callers pass one file of a read-only snapshot)."""
    m0 = mapped_stats(dev)
    child = subprocess.Popen([*prefix, "python3", "-S", "-c", MPROTECT_SCRIPT, *map(str, paths)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline().split()
        bound = mapped_stats(dev)["mapped_attaches"] - m0["mapped_attaches"]
    finally:
        try:
            child.communicate("\n", timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    assert child.returncode == 0, f"the mapping script failed ({child.returncode})"
    assert bound == 1
    return line


def test_apparmor_judges_the_users_file_on_mmap_and_mprotect(scm):
    """A profile that lets a task read a file but not map it executable
    (r, not m): mmap(PROT_EXEC) and mprotect(PROT_EXEC) of a bound mapping
    are refused as on stock (review M3: AppArmor judged the content inode,
    on an internal filesystem it does not mediate, and allowed it)."""
    mnt, dev = scm
    data = image(mnt, dev, 1, "apparmor", name="lib")
    denied, allowed = mnt / "s0" / "lib", mnt / "img" / "lib"
    load_apparmor_profile("pcshare_mprotect", f"  /** rmix,\n  deny {denied} m,")
    line = mprotect_each(dev, [denied, allowed], ["aa-exec", "-p", "pcshare_mprotect", "--"])
    want = sha256(data[:PAGE])
    assert line == [want, str(errno.EACCES), str(errno.EACCES), want, "0", "0"], line


@pytest.mark.debug_kernel
def test_ima_judges_the_users_file_on_mprotect(scm, tmp_path):
    """An IMA policy that appraises executable mappings of this filesystem
    (its fsuuid): mprotect(PROT_EXEC) of a bound read-only mapping is
    refused as on stock, where IMA looked up the policy for the content
    inode, on an internal filesystem no rule names, and allowed it (review
    M3, btrfs/0017). A file elsewhere shows the rule is the filesystem's."""
    policy = Path("/sys/kernel/security/ima/policy")
    if not policy.exists():
        pytest.skip("kernel without IMA (CONFIG_IMA: the debug variant has it), securityfs "
                    "not mounted, or a policy was already loaded in this boot")
    mnt, dev = scm
    data = image(mnt, dev, 1, "ima", name="lib")
    bound, unbound = mnt / "s0" / "lib", mnt / "img" / "lib"
    elsewhere = tmp_path / "lib"
    elsewhere.write_bytes(data[:PAGE])
    fsuuid = fsutil.run("blkid", "-p", "-s", "UUID", "-o", "value", dev).strip()
    assert fsuuid
    # A policy loads once per boot (no CONFIG_IMA_WRITE_POLICY) and names
    # only this filesystem, which no later test mounts again.
    policy.write_text(f"appraise func=MMAP_CHECK fsuuid={fsuuid}\n")
    line = mprotect_each(dev, [bound, unbound, elsewhere])
    want = sha256(data[:PAGE])
    refused = [want, str(errno.EPERM), str(errno.EACCES)]
    assert line == refused * 2 + [want, "0", "0"], line


def core_file_names(core):
    """The file names of a core dump's NT_FILE note."""
    import struct
    raw = core.read_bytes()
    assert raw[:4] == b"\x7fELF"
    phoff, phentsize, phnum = (struct.unpack_from("<Q", raw, 0x20)[0],
                               *struct.unpack_from("<HH", raw, 0x36))
    for i in range(phnum):
        ptype, _, offset, _, _, filesz = struct.unpack_from("<IIQQQQ", raw, phoff + i * phentsize)
        if ptype != 4:  # PT_NOTE
            continue
        pos = offset
        while pos < offset + filesz:
            namesz, descsz, ntype = struct.unpack_from("<III", raw, pos)
            desc = pos + 12 + (namesz + 3) // 4 * 4
            if ntype == 0x46494C45:  # NT_FILE
                count = struct.unpack_from("<Q", raw, desc)[0]
                names = raw[desc + 16 + 24 * count:desc + descsz]
                return names.rstrip(b"\0").decode().split("\0")
            pos = desc + (descsz + 3) // 4 * 4
    raise AssertionError("no NT_FILE note in the core dump")


def test_core_dumps_name_the_mapped_file(scm, tmp_path):
    mnt, dev = scm
    image(mnt, dev, 1, "core")
    pattern = Path("/proc/sys/kernel/core_pattern")
    old = pattern.read_text()
    pattern.write_text(f"{tmp_path}/core.%p\n")
    try:
        script = ("import mmap, os, resource, sys\n"
                  "resource.setrlimit(resource.RLIMIT_CORE, (-1, -1))\n"
                  "f = open(sys.argv[1], 'rb')\n"
                  "m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)\n"
                  "m[0]\n"
                  "os.abort()\n")
        m0 = mapped_stats(dev)
        child = subprocess.run(["python3", "-S", "-c", script, str(mnt / "s0" / "f")])
        assert child.returncode == -6
        assert mapped_stats(dev)["mapped_attaches"] - m0["mapped_attaches"] == 1
        names = core_file_names(next(tmp_path.glob("core.*")))
    finally:
        pattern.write_text(old)
    assert str(mnt / "s0" / "f") in names, names
    assert not [n for n in names if "btrfs-shared-map" in n], names


class Hold:
    """The next thread to pass POINT in the kernel sleeps there until
    release(): /sys/fs/btrfs/<fsid>/debug/shared_cache_hold, a
    CONFIG_BTRFS_DEBUG knob.  Makes a race window as wide as the test
    needs, every run."""

    def __init__(self, dev, point):
        self.path = fsutil.btrfs_sysfs_dir(dev) / "debug" / "shared_cache_hold"
        if not self.path.exists():
            pytest.skip("shared_cache_hold needs CONFIG_BTRFS_DEBUG (the debug kernel)")
        self.point = point
        self.path.write_text(point)
        assert self.state() == f"armed {point}"

    def state(self):
        return self.path.read_text().strip()

    def assert_held(self, proc):
        """PROC is held at the point now; returns the hold's number."""
        parts = self.state().split()
        assert parts[:3] == ["held", self.point, str(proc.pid)], parts
        return int(parts[3])

    def wait_held(self, proc, timeout=60, after=0, may_exit=False):
        """Wait for PROC to be held by a hold numbered above AFTER (the
        state shows the last hold until its thread has woken); returns
        the hold's number, or None if PROC exited first and MAY_EXIT."""
        deadline = time.monotonic() + timeout
        while True:
            parts = self.state().split()
            if parts[0] == "held" and int(parts[3]) > after:
                return self.assert_held(proc)
            if may_exit and proc.poll() is not None:
                return None
            assert proc.poll() is None, f"exited before reaching {self.point}"
            assert time.monotonic() < deadline, f"nothing reached {self.point}"
            time.sleep(0.02)

    def rearm_and_release(self):
        """Arm the point again, then let the held thread go: the next
        thread to pass the point, the released one too, is held."""
        self.path.write_text(self.point)
        self.path.write_text("release")

    def end(self):
        """Disarm, and let a held thread go (ENOENT: the thread shown held
        had been released already and was just leaving)."""
        self.path.write_text("none")
        if self.state().startswith("held "):
            try:
                self.path.write_text("release")
            except FileNotFoundError:
                pass


# Maps argv[1] read-only and shared and prints the SHA-256 of its data.
MAP_AND_HASH = ("import hashlib, mmap, sys\n"
                "f = open(sys.argv[1], 'rb')\n"
                "m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)\n"
                "print(hashlib.sha256(m[:]).hexdigest(), flush=True)\n")


def map_and_hash(path):
    return subprocess.Popen(["python3", "-S", "-c", MAP_AND_HASH, str(path)],
                            stdout=subprocess.PIPE, text=True)


def balance_data(mnt, path):
    """Relocate every data extent; PATH's blocks must move (and their old
    space is freed, which forgets content inodes naming it)."""
    before = fsutil.physical_map(path)
    fsutil.run("btrfs", "balance", "start", "--full-balance", "-d", str(mnt))
    assert fsutil.physical_map(path) != before


def map_during_balance(mnt, dev, point, snapshots):
    """Map s0/f in a child whose mmap (or fault) is held at POINT while a
    balance moves the file; the child must read the image's data.
    Returns the counters before and after."""
    data = image(mnt, dev, snapshots, point)
    m0 = mapped_stats(dev)
    hold = Hold(dev, point)
    child = map_and_hash(mnt / "s0" / "f")
    try:
        hold.wait_held(child)
        balance_data(mnt, mnt / "s0" / "f")
        hold.assert_held(child)  # the balance ran inside the window
    finally:
        hold.end()
    out, _ = child.communicate(timeout=120)
    assert child.returncode == 0 and out.strip() == sha256(data)
    return data, m0, mapped_stats(dev)


@pytest.mark.debug_kernel
def test_a_key_built_across_a_balance_is_neither_used_nor_kept(scm):
    """Between building a mapping's key (extent lock held) and looking it
    up, a balance moves the file and frees the space the key names.  The
    key must not bind the mapping nor enter the table, where a later file
    with that layout in the reused space would find it.  The mapping takes
    the stock path with the right data; the next mapping binds afresh."""
    mnt, dev = scm
    data, m0, m1 = map_during_balance(mnt, dev, "map_key", 2)
    assert m1["mapped_attaches"] == m0["mapped_attaches"]
    assert m1["mapped_aliases"] == m0["mapped_aliases"]
    b = Mapped(mnt / "s1" / "f")
    try:
        assert b.sha() == sha256(data)
        m2 = mapped_stats(dev)
        assert m2["mapped_attaches"] == m1["mapped_attaches"] + 1
        assert m2["mapped_aliases"] == m1["mapped_aliases"] + 1
    finally:
        b.close()


@pytest.mark.debug_kernel
def test_a_fill_reads_again_blocks_moved_while_it_read(scm):
    """A content fill's reads complete, then a balance moves the file's
    extents and frees the blocks read, before the fill rechecks that the
    file still maps them.  The recheck must see the move and read those
    folios again from the new place: the data is right and the disk bytes
    read exceed the file by the re-read batch, at most one batch.  (The
    data would be right without the recheck too: the old blocks are freed
    but not yet reused; the byte count is what tells.)"""
    mnt, dev = scm
    _, m0, m1 = map_during_balance(mnt, dev, "fill_recheck", 1)
    assert m1["mapped_attaches"] == m0["mapped_attaches"] + 1
    reread = m1["mapped_bytes_read"] - m0["mapped_bytes_read"] - SIZE
    assert 0 < reread <= CONTENT_BATCH * PAGE and reread % PAGE == 0, reread


# Where a copy from the compressed cache may find the file's extent map
# dropped by the shrinker, and how many holds at least reading the file
# takes with the fix: one a fill (32 pages), or one a page.
DROP_POINTS = {"content_copy": CONTENT_BATCH, "copy_check": 1}


@pytest.mark.debug_kernel
@pytest.mark.parametrize("point", sorted(DROP_POINTS))
def test_a_compressed_copy_survives_the_shrinker_dropping_its_extent_map(sczm, point):
    """A content fill of a mapping caches a compressed run and copies it
    from the cache.  The extent map shrinker may drop the file's map
    before the copy looks it up (content_copy), or while it waits for the
    cache's read (copy_check, after which the map compares unequal by
    identity though the extent did not change).  The copy must load the
    map again and compare by value: a content folio has no disk read to
    fall back on; a fill gives up after three passes, and the fault's
    read_folio() after three more, with SIGBUS.  The point holds a thread
    and, released, drops the maps as the shrinker may (drop_caches cannot
    aim the shrinker at one file).  Every thread is held, re-armed before
    each release so the next one is held whichever it is, until the
    mapping is read: it must read the file's data.  Without the reload
    (the check by value) every pass fails and the reader dies of SIGBUS.
    (Holding fewer would not tell: the fault reads a failed folio again
    once the holds stop.)"""
    mnt, dev = sczm
    size = 1 * MiB
    data = image(mnt, dev, 1, point, compressed=True, size=size)
    hold = Hold(dev, point)
    child = map_and_hash(mnt / "s0" / "f")
    held = seq = 0
    try:
        while (seq := hold.wait_held(child, after=seq, may_exit=True)) is not None:
            held += 1
            hold.rearm_and_release()
    finally:
        hold.end()
    out, _ = child.communicate(timeout=120)
    assert child.returncode == 0 and out.strip() == sha256(data), (child.returncode, held)
    assert held >= size // (DROP_POINTS[point] * PAGE), held
