"""Mappings of unchanged clones share one copy (pcshare kernel, btrfs/0017,
mount option shared_cache_map).

Read-only and private mappings of files whose extents are all the same
(clones, snapshots) map the folios of one alias; an open for writing or a
truncate moves the file's mappings back to the file first.  Every test
compares mapped data with what it must be (SHA-256) and checks the
shared_cache/mapped_* counters against the mappings it made.
"""
import ctypes
import mmap
import os
import signal
import subprocess
from pathlib import Path

import pytest

import fsutil
from fsutil import MiB, sha256, sha256_file
from test_shared_cache import (PAGE, assert_compressed, clone, cold, cloned_python,
                               compressed_sc, write_at)
from test_shared_cache import sc, scm  # noqa: F401 (fixtures)

pytestmark = pytest.mark.shared_cache
SIZE = 8 * MiB


@pytest.fixture
def sczm(request, scratch_dev, tmp_path):
    """A fresh btrfs mounted with shared_cache_map,compress-force=zstd."""
    for mnt in compressed_sc(request, scratch_dev, tmp_path, "zstd", "shared_cache_map"):
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

    def close(self):
        self.map.close()


def maps_lines(path):
    return [line for line in Path("/proc/self/maps").read_text().splitlines()
            if line.endswith(" " + str(path))]


def clones(mnt, dev, names, tag, compressed=False):
    data = fsutil.pattern(SIZE, tag)
    fsutil.write_file(mnt / names[0], data)
    if compressed:
        assert_compressed(mnt / names[0])
    for name in names[1:]:
        clone(mnt / names[0], mnt / name)
    cold(mnt, dev)
    return data


@pytest.mark.parametrize("mount", ["scm", "sczm"])
def test_mappings_of_unchanged_clones_share_one_copy(request, mount):
    mnt, dev = request.getfixturevalue(mount)
    names = ["a", "b", "c", "d"]
    data = clones(mnt, dev, names, f"share{mount}", compressed=mount == "sczm")
    assert sha256_file(mnt / "a") == sha256(data)  # the cache holds it now
    m0, disk0 = mapped_stats(dev), fsutil.disk_read_bytes(dev)
    cached0 = fsutil.meminfo("Cached")
    maps = [Mapped(mnt / n, private=i % 2 == 1) for i, n in enumerate(names)]
    try:
        for m in maps:
            assert m.sha() == sha256(data)
        # One copy for the four mappings (a copy per file would be 4x).
        grown = fsutil.meminfo("Cached") - cached0
        assert 0.9 * SIZE <= grown <= 1.25 * SIZE, grown
        m1 = mapped_stats(dev)
        assert m1["mapped_attaches"] - m0["mapped_attaches"] == len(names)
        assert m1["mapped_aliases"] == 1
        assert m1["mapped_pages"] == SIZE // PAGE
        assert fsutil.disk_read_bytes(dev) - disk0 < MiB  # metadata at most
        for n in names:
            # /proc/<pid>/maps names the file and its inode, not the alias.
            lines = maps_lines(mnt / n)
            assert lines and all(f" {os.stat(mnt / n).st_ino} " in line for line in lines)
    finally:
        for m in maps:
            m.close()
    m2 = mapped_stats(dev)
    assert (m2["mapped_aliases"], m2["mapped_pages"]) == (0, 0)
    assert m2["mapped_detaches"] == m0["mapped_detaches"]


def dedupe_from_copy(mnt, path, offset, length):
    """Dedupe PATH's range against an identical copy, through a read-only
    descriptor of PATH: its extent changes, its data does not."""
    with open(path, "rb") as f:
        f.seek(offset)
        chunk = f.read(length)
    fsutil.write_file(mnt / "copy", chunk)
    with open(mnt / "copy", "rb") as s, open(path, "rb") as d:
        assert fsutil.fideduperange(s.fileno(), 0, length, [(d.fileno(), offset)]) == \
            [(length, fsutil.FILE_DEDUPE_RANGE_SAME)]


CHANGES = ["write", "direct", "punch", "zero", "clone", "truncate", "dedupe"]


@pytest.mark.parametrize("change", CHANGES)
def test_a_change_to_a_mapped_file_is_seen_as_on_stock(scm, change):
    """DST is mapped shared and private beside SRC (one alias); the private
    mapping has copied its first page.  After the change DST's mappings show
    DST's new data, except the copied page; SRC's mapping shows SRC's."""
    mnt, dev = scm
    data = clones(mnt, dev, ["src", "dst"], change)
    other = fsutil.pattern(SIZE, "other")
    fsutil.write_file(mnt / "other", other)
    m0 = mapped_stats(dev)
    src, shared, private = Mapped(mnt / "src"), Mapped(mnt / "dst"), Mapped(mnt / "dst", True)
    try:
        for m in (src, shared, private):
            assert m.sha() == sha256(data)
        assert mapped_stats(dev)["mapped_aliases"] == 1
        private.map[0:PAGE] = fsutil.pattern(PAGE, "copied")

        expected = bytearray(data)
        if change in ("write", "direct"):
            patch = fsutil.pattern(MiB, change)
            write_at(mnt / "dst", MiB, patch, "buffered" if change == "write" else "direct")
            expected[MiB:2 * MiB] = patch
        elif change in ("punch", "zero"):
            fsutil.run("fallocate", "--punch-hole" if change == "punch" else "--zero-range",
                       "-o", str(MiB), "-l", str(MiB), str(mnt / "dst"))
            expected[MiB:2 * MiB] = bytes(MiB)
        elif change == "clone":
            with open(mnt / "other", "rb") as o, open(mnt / "dst", "r+b") as d:
                fsutil.ficlonerange(o.fileno(), d.fileno(), MiB, MiB, MiB)
            expected[MiB:2 * MiB] = other[MiB:2 * MiB]
        elif change == "truncate":
            os.truncate(mnt / "dst", SIZE // 2 + 100)  # by path: no descriptor
            expected = expected[:SIZE // 2 + 100]
        else:
            dedupe_from_copy(mnt, mnt / "dst", MiB, MiB)

        m1 = mapped_stats(dev)
        assert m1["mapped_detaches"] - m0["mapped_detaches"] == (change != "dedupe")
        end = len(expected)
        assert shared.sha(0, end) == sha256(expected)
        assert private.sha(PAGE, end) == sha256(expected[PAGE:])
        assert private.map[:PAGE] == fsutil.pattern(PAGE, "copied")
        assert src.sha() == sha256(data)
        assert sha256_file(mnt / "dst") == sha256(expected)
    finally:
        for m in (src, shared, private):
            m.close()
    assert mapped_stats(dev)["mapped_aliases"] == 0


def test_truncated_mapping_faults_sigbus_past_the_new_end(scm):
    mnt, dev = scm
    data = clones(mnt, dev, ["src", "dst"], "sigbus")
    script = ("import mmap, os, sys\n"
              "f = open(sys.argv[1], 'rb')\n"
              "m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)\n"
              "m[0:4096]\n"
              "print('mapped', flush=True)\n"
              "sys.stdin.readline()\n"
              "print(m[4096:8192].hex(), flush=True)\n"
              "m[3 * 1024 * 1024]\n")
    child = subprocess.Popen(["python3", "-c", script, str(mnt / "dst")], text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdout.readline() == "mapped\n"
    assert mapped_stats(dev)["mapped_aliases"] == 1
    os.truncate(mnt / "dst", 2 * MiB)
    out, _ = child.communicate("go\n")
    assert out == data[PAGE:2 * PAGE].hex() + "\n"
    assert child.returncode == -signal.SIGBUS


def test_mappings_in_a_forked_child_move_back_too(scm):
    """The child's copy of the VMA lives in another mm: a write opened by the
    parent must move it as well."""
    mnt, dev = scm
    data = clones(mnt, dev, ["src", "dst"], "fork")
    patch = fsutil.pattern(PAGE, "fork")
    m = Mapped(mnt / "dst")
    try:
        assert m.sha() == sha256(data)
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: wait for the write, then check what it maps
            os.close(go_w)
            os.read(go_r, 1)
            os._exit(0 if m.map[MiB:MiB + PAGE] == patch else 1)
        os.close(go_r)
        write_at(mnt / "dst", MiB, patch, "buffered")
        os.write(go_w, b"x")
        os.close(go_w)
        assert os.waitpid(pid, 0)[1] == 0
        assert m.map[MiB:MiB + PAGE] == patch
    finally:
        m.close()
    assert mapped_stats(dev)["mapped_aliases"] == 0


def test_balance_moves_extents_under_shared_mappings(scm):
    """Balance frees the extents an alias was found by: mappings keep their
    data, a new mapping of a clone finds a new alias, and a write still
    moves the old ones back."""
    mnt, dev = scm
    data = clones(mnt, dev, ["src", "dst"], "balance")
    before = fsutil.physical_map(mnt / "src")
    a, b = Mapped(mnt / "src"), Mapped(mnt / "dst")
    try:
        assert a.sha() == sha256(data) and b.sha() == sha256(data)
        fsutil.run("btrfs", "balance", "start", "--full-balance", "-d", str(mnt))
        assert fsutil.physical_map(mnt / "src") != before
        clone(mnt / "src", mnt / "late")
        c = Mapped(mnt / "late")
        try:
            assert c.sha() == sha256(data)
            assert mapped_stats(dev)["mapped_aliases"] == 2
        finally:
            c.close()
        assert a.sha() == sha256(data) and b.sha() == sha256(data)
        patch = fsutil.pattern(PAGE, "after-balance")
        write_at(mnt / "dst", 0, patch, "buffered")
        assert b.map[:PAGE] == patch
        assert a.map[:PAGE] == data[:PAGE]
    finally:
        a.close()
        b.close()


def test_executed_clones_share_their_text(scm):
    mnt, dev = scm
    cloned_python(mnt, dev, "python-a", "python-b")
    procs = [subprocess.Popen([str(mnt / n), "-S", "-c",
                               "import sys; print('up', flush=True); sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for n in ("python-a", "python-b")]
    try:
        for p in procs:
            assert p.stdout.readline() == "up\n"
        stats = mapped_stats(dev)
        assert stats["mapped_aliases"] == 1
        shared_pages = stats["mapped_pages"]
        assert shared_pages > 0
        for p, n in zip(procs, ("python-a", "python-b")):
            text = Path(f"/proc/{p.pid}/maps").read_text()
            assert str(mnt / n) in text
        # The writer is refused as on stock: the binary is running.
        with pytest.raises(OSError) as err:
            open(mnt / "python-b", "r+b")
        assert err.value.errno == 26  # ETXTBSY
    finally:
        for p in procs:
            p.communicate("")
    assert [p.returncode for p in procs] == [0, 0]
    assert mapped_stats(dev)["mapped_aliases"] == 0


def test_sharing_mappings_is_opt_in(sc):
    """shared_cache alone leaves mappings private; shared_cache_map, set by
    remount, shares the next ones, and turning it off keeps shared_cache."""
    mnt, dev = sc
    data = clones(mnt, dev, ["a", "b"], "optin")
    assert "shared_cache_map" not in fsutil.mount_options(mnt)

    def map_both():
        before = mapped_stats(dev)
        maps = [Mapped(mnt / n) for n in "ab"]
        try:
            assert [m.sha() for m in maps] == [sha256(data)] * 2
            during = mapped_stats(dev)
        finally:
            for m in maps:
                m.close()
        return during["mapped_attaches"] - before["mapped_attaches"], during["mapped_aliases"]

    assert map_both() == (0, 0)
    fsutil.run("mount", "-o", "remount,shared_cache_map", str(mnt))
    assert {"shared_cache", "shared_cache_map"} <= set(fsutil.mount_options(mnt))
    assert map_both() == (2, 1)
    fsutil.run("mount", "-o", "remount,noshared_cache_map", str(mnt))
    options = fsutil.mount_options(mnt)
    assert "shared_cache" in options and "shared_cache_map" not in options
    assert map_both() == (0, 0)


def test_mlocked_mapping_stays_resident_when_its_file_is_opened_for_writing(scm):
    """mlock() keeps pages present; moving the mapping back to its file
    must fault them in again, not leave the range to major faults."""
    mnt, dev = scm
    data = clones(mnt, dev, ["a", "b"], "mlock")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    m = Mapped(mnt / "b", private=True)  # writable buffer: its address for mlock
    anchor = ctypes.c_char.from_buffer(m.map)
    try:
        addr = ctypes.addressof(anchor)
        assert libc.mlock(addr, SIZE) == 0, os.strerror(ctypes.get_errno())
        m0 = mapped_stats(dev)
        assert m0["mapped_aliases"] == 1 and m0["mapped_pages"] == SIZE // PAGE
        with open(mnt / "b", "r+b"):
            pass
        assert mapped_stats(dev)["mapped_detaches"] - m0["mapped_detaches"] == 1
        resident = (ctypes.c_ubyte * (SIZE // PAGE))()
        assert libc.mincore(addr, SIZE, resident) == 0, os.strerror(ctypes.get_errno())
        assert sum(v & 1 for v in resident) == SIZE // PAGE
        assert m.sha() == sha256(data)
    finally:
        del anchor  # the mapping cannot close while ctypes points into it
        m.close()
