#!/usr/bin/env python3
"""Randomized differential tester ("soak") for btrfs and the pcshare series.

Runs random operations on a few dozen files of one small, fresh btrfs and
keeps a model of every file's bytes in memory: writes (write, pwrite, a
shared writable mmap, O_DIRECT), fallocate (allocate, keep size, punch
hole), truncate, FICLONE, FICLONERANGE, FICLONERANGE2 (when the kernel has
it), copy_file_range, FIDEDUPERANGE, unlink and create, read-only and
writable snapshots and their deletion, balance, scrub, sync, drop_caches,
POSIX_FADV_DONTNEED, remount (between shared_cache and noshared_cache when
the kernel has the cache). Every read (read, pread, preadv, mmap, sendfile
through a pipe or a memfd, O_DIRECT) is compared with the model. Meanwhile
--readers threads keep reading the files of read-only snapshots, whose bytes
cannot change, and check them by SHA-256 while space is freed and reused
around them.

The first difference stops the run: it prints the seed, the file, offset and
lengths, and the last 30 operations, and exits 1. So does an unexpected
error (EIO, ENOSPC, ...), a non-zero `btrfs device stats` counter at the end,
or a "csum failed" / "csum hole" kernel message about this filesystem. The
main thread's operations depend only on --seed (the readers' timing does
not change them), so a seed and --ops reproduce a run's operations.
"""
import argparse
import collections
import errno
import hashlib
import json
import mmap
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import traceback
from pathlib import Path

from harness import fsutil

BLOCK = 4096
MiB = fsutil.MiB
RO_MAX, RW_MAX = 4, 2  # read-only and writable snapshots alive at once
READ_KINDS = ["read", "pread", "preadv", "mmap_read", "sendfile", "direct_read"]
WEIGHTS = {
    "write": 4, "pwrite": 4, "mmap_write": 3, "direct_write": 3,
    "fallocate": 1, "fallocate_keep_size": 1, "punch_hole": 2, "truncate": 2,
    "ficlone": 1, "ficlonerange": 3, "ficlonerange2": 2, "copy_file_range": 3, "dedupe": 2,
    "unlink": 1, "create": 1.5,
    "snapshot_ro": 0.7, "snapshot_rw": 0.4, "delete_snapshot": 1,
    "balance": 0.15, "scrub": 0.1, "sync": 1, "drop_caches": 0.2, "fadvise": 1,
    "remount": 0.2, "verify_all": 0.2,
    **{kind: 3 for kind in READ_KINDS},
}
PLANTED = {
    "pwrite": "the model applies every pwrite one byte after where it went",
    "punch_hole": "the model forgets every punched hole",
    "truncate": "the model keeps one byte too many when a file shrinks",
    "ficlonerange": "the model clones from one block after the source offset",
    "copy_file_range": "the model copies one byte less than copy_file_range did",
    "snapshot_ro": "the readers' checksum of one file per read-only snapshot is over the "
                   "wrong bytes (only the concurrent readers can catch it)",
    "kernel_log": "a marked, fake 'csum failed' message about this filesystem goes to "
                  "/dev/kmsg at the start (the end-of-run check must catch it)",
}


class Failure(Exception):
    """Stops the run: an unexpected error, kernel message or counter."""
    label = "FAILED"


class Mismatch(Failure):
    """What the filesystem returned differs from the model."""
    label = "MISMATCH"


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def first_difference(a, b):
    """Index of the first byte where a and b differ (the shorter length if one
    is a prefix of the other)."""
    n = min(len(a), len(b))
    step = 4096
    for i in range(0, n, step):
        if a[i:i + step] != b[i:i + step]:
            return next(j for j in range(i, min(i + step, n)) if a[j] != b[j])
    return n


def describe_difference(rel, how, off, length, got, want):
    i = first_difference(got, want)
    return (f"{rel}: {how} of [{off}, +{length}) differs from the model at file offset "
            f"{off + i}: read {len(got)} bytes, the model has {len(want)}; "
            f"read {bytes(got[i:i + 16]).hex() or '(nothing)'}, "
            f"model {bytes(want[i:i + 16]).hex() or '(nothing)'}")


# Reads: each returns the bytes of [off, off + length) up to EOF.

def _read_loop(fd, off, length, rng, positional):
    out = bytearray()
    if not positional:
        os.lseek(fd, off, os.SEEK_SET)
    while len(out) < length:
        want = min(length - len(out), rng.choice([BLOCK, 65536, MiB]))
        chunk = os.pread(fd, want, off + len(out)) if positional else os.read(fd, want)
        if not chunk:
            break
        out += chunk
    return out


def _preadv(fd, off, length, rng):
    out = bytearray()
    while len(out) < length:
        left = length - len(out)
        cuts = sorted(rng.randint(0, left) for _ in range(rng.randint(0, 3)))
        bufs = [bytearray(b - a) for a, b in zip([0] + cuts, cuts + [left])]
        n = os.preadv(fd, bufs, off + len(out))
        if n == 0:
            break
        out += b"".join(bufs)[:n]
    return out


def _mmap_read(fd, off, length, rng):
    size = os.fstat(fd).st_size
    if off >= size:
        return b""
    with mmap.mmap(fd, size, prot=mmap.PROT_READ) as m:
        return m[off:min(off + length, size)]


def _sendfile(fd, off, length, rng):
    out = bytearray()
    if length <= 65536 and rng.random() < 0.5:  # into a pipe, which holds 64 KiB
        r, w = os.pipe()
        try:
            while len(out) < length:
                n = os.sendfile(w, fd, off + len(out), length - len(out))
                if n == 0:
                    break
                end = len(out) + n
                while len(out) < end:
                    out += os.read(r, end - len(out))
        finally:
            os.close(r)
            os.close(w)
        return out
    tmp = os.memfd_create("soak-sendfile")  # a file on tmpfs
    try:
        total = 0
        while total < length:
            n = os.sendfile(tmp, fd, off + total, length - total)
            if n == 0:
                break
            total += n
        return os.pread(tmp, total, 0)
    finally:
        os.close(tmp)


def _direct_read(fd, off, length, rng):
    buf = mmap.mmap(-1, length)  # page-aligned, as O_DIRECT wants
    try:
        got = 0
        while got < length:
            with memoryview(buf)[got:] as view:
                n = os.preadv(fd, [view], off + got)
            got += n
            if n == 0 or n % BLOCK:
                break
        return buf[:got]
    finally:
        buf.close()


READERS = {
    "read": lambda fd, off, length, rng: _read_loop(fd, off, length, rng, False),
    "pread": lambda fd, off, length, rng: _read_loop(fd, off, length, rng, True),
    "preadv": _preadv, "mmap_read": _mmap_read, "sendfile": _sendfile,
    "direct_read": _direct_read,
}


def read_range(path, how, off, length, rng):
    """Read [off, off + length) of path the way `how` says; O_DIRECT widens
    the range to whole blocks. Returns (offset, length, data)."""
    direct = how == "direct_read"
    if direct:
        end = -(-(off + length) // BLOCK) * BLOCK
        off -= off % BLOCK
        length = end - off
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
    try:
        return off, length, bytes(READERS[how](fd, off, length, rng))
    finally:
        os.close(fd)


def write_all(fd, data, off=None):
    """write(2) at the file position, or pwrite(2) at off, until all is written."""
    view, done = memoryview(data), 0
    while done < len(view):
        done += (os.write(fd, view[done:]) if off is None
                 else os.pwrite(fd, view[done:], off + done))


def model_write(model, off, data):
    """What a write of data at off does to a file's bytes."""
    if not data:
        return
    if off > len(model):
        model.extend(bytes(off - len(model)))
    model[off:off + len(data)] = data


class Soak:
    def __init__(self, args, mnt, device):
        self.args, self.mnt, self.device = args, Path(mnt), device
        self.planted = args.plant_bug
        self.rng = random.Random(args.seed)
        self.files = {}          # writable file (path under mnt) -> bytearray
        self.subvols = ["work"]  # writable subvolumes: work and writable snapshots
        self.frozen = {}         # read-only snapshot -> its files
        self.frozen_data = {}    # file of a read-only snapshot -> (bytes, sha256)
        self.pins = collections.Counter()  # readers inside each read-only snapshot
        self.retired = set()     # read-only snapshots being deleted
        self.cond = threading.Condition()
        self.stop = threading.Event()
        self.failures = []
        self.history = collections.deque(maxlen=30)
        self.sequence = hashlib.sha256()  # of every operation's description
        self.ops = collections.Counter()
        self.tallies = {"main": collections.Counter()}  # per thread: reads, bytes, per kind
        self.n = self.snapshots_made = 0
        self.remount_state = 0
        fd = os.open(self.mnt, os.O_RDONLY)
        try:
            self.clone2 = fsutil.has_ficlonerange2(fd)
        finally:
            os.close(fd)
        try:
            self.shared_cache = (fsutil.btrfs_sysfs_dir(device) / "shared_cache").is_dir()
        except FileNotFoundError:
            self.shared_cache = False
        if args.remount_options is not None:
            self.remount_cycle = args.remount_options.split(";")
        elif self.shared_cache:
            on = "shared_cache" in fsutil.mount_options(self.mnt)
            self.remount_cycle = ["shared_cache", "noshared_cache"][::1 if on else -1]
        else:
            self.remount_cycle = [""]
        skip = set(args.skip)
        if not self.clone2:
            skip.add("ficlonerange2")
        self.kinds = [k for k in WEIGHTS if k not in skip]
        methods = {self.write: ["write", "pwrite", "mmap_write", "direct_write"],
                   self.fallocate: ["fallocate", "fallocate_keep_size", "punch_hole"],
                   self.clone: ["ficlone", "ficlonerange", "ficlonerange2"],
                   self.snapshot: ["snapshot_ro", "snapshot_rw"], self.read: READ_KINDS}
        self.method = {k: m for m, kinds in methods.items() for k in kinds}
        self.weights = [WEIGHTS[k] for k in self.kinds]

    # -- bookkeeping ----------------------------------------------------------

    def log(self, kind, desc):
        entry = f"#{self.n} {kind} {desc}"
        self.history.append(entry)
        self.sequence.update(entry.encode() + b"\n")

    def fail(self, failure):
        with self.cond:
            self.failures.append(failure)
        self.stop.set()

    def content(self, rel):
        return self.files[rel] if rel in self.files else self.frozen_data[rel][0]

    def all_files(self):
        return list(self.files) + list(self.frozen_data)

    def pick(self, items):
        items = list(items)
        return self.rng.choice(items) if items else None

    def btrfs(self, *argv):
        res = subprocess.run(["btrfs", *map(str, argv)], capture_output=True, text=True)
        if res.returncode:
            raise Failure(f"`btrfs {' '.join(map(str, argv))}` exited {res.returncode}: "
                          f"{(res.stderr or res.stdout).strip()}")
        return res.stdout

    # -- random parameters ----------------------------------------------------

    def rand_off(self, size, aligned=False):
        r = self.rng.random()
        if r < 0.1:
            off = size
        elif r < 0.25:
            off = size + self.rng.randint(1, 8 * BLOCK)
        else:
            off = self.rng.randint(0, max(size - 1, 0))
        off = min(off, self.args.max_size - 1)
        return off - off % BLOCK if aligned else off

    def rand_len(self, limit, aligned=False):
        r = self.rng.random()
        if r < 0.3:
            n = self.rng.randint(1, 300)
        elif r < 0.8:
            n = self.rng.randint(1, 16) * BLOCK
            n += self.rng.choice([0, 0, self.rng.randint(-300, 300)])  # blocks, or nearly
        else:
            n = self.rng.randint(16, 128) * BLOCK + self.rng.randint(0, BLOCK)
        if aligned:
            n, limit = max(n // BLOCK, 1) * BLOCK, limit // BLOCK * BLOCK
        return min(n, limit)

    def new_data(self, n):
        r = self.rng.random()
        if r < 0.08:
            return bytes(n)
        other = self.pick(self.all_files())
        if r < 0.2 and other is not None:  # bytes another file has, at another place
            src = self.content(other)
            if len(src) >= n:
                off = self.rng.randint(0, len(src) - n)
                return bytes(src[off:off + n])
        return self.rng.randbytes(n)

    # -- verification ---------------------------------------------------------

    def verify(self, rel, off, length, how):
        want_all = self.content(rel)
        path = self.mnt / rel
        size = os.stat(path).st_size
        if size != len(want_all):
            raise Mismatch(f"{rel}: size {size}, the model has {len(want_all)} "
                           f"(before a {how} of [{off}, +{length}))")
        off, length, data = read_range(path, how, off, length, self.rng)
        want = bytes(want_all[off:off + length])
        if data != want:
            raise Mismatch(describe_difference(rel, how, off, length, data, want))
        t = self.tallies["main"]
        t["reads"] += 1
        t["bytes"] += len(data)
        t[how] += 1

    def check(self, rel, off, length):
        """After a change, read around it half the time, by any read kind."""
        if self.rng.random() < 0.5:
            off = max(0, off - self.rng.randint(0, 300))
            self.verify(rel, off, length + self.rng.randint(1, 600), self.rng.choice(READ_KINDS))

    def verify_tree(self):
        """Every file read whole, and the directories hold what the model does."""
        expect = {"": set(self.subvols) | set(self.frozen)}
        for rel in self.all_files():
            sub, name = rel.split("/")
            expect.setdefault(sub, set()).add(name)
        for sub in ["", *self.subvols, *self.frozen]:
            found = set(os.listdir(self.mnt / sub))
            if found != expect.get(sub, set()):
                raise Mismatch(f"/{sub}: the directory holds {sorted(found)}, the model "
                               f"{sorted(expect.get(sub, set()))}")
        for rel in self.all_files():
            self.verify(rel, 0, len(self.content(rel)) + 1, self.rng.choice(READ_KINDS))

    # -- operations: writes -----------------------------------------------------

    def write(self, kind):
        rel = self.pick(self.files)
        if rel is None:
            return False
        model = self.files[rel]
        direct = kind == "direct_write"
        off = self.rand_off(len(model), aligned=direct)
        n = self.rand_len(self.args.max_size - off, aligned=direct)
        if n <= 0:
            return False
        data = self.new_data(n)
        msync = kind == "mmap_write" and self.rng.random() < 0.75
        self.log(kind, f"{rel} off={off} len={n}" + (" msync" if msync else ""))
        path = self.mnt / rel
        fd = os.open(path, (os.O_RDWR if kind == "mmap_write" else os.O_WRONLY)
                     | (os.O_DIRECT if direct else 0))
        try:
            if kind == "write":
                os.lseek(fd, off, os.SEEK_SET)
                write_all(fd, data)
            elif kind == "pwrite":
                write_all(fd, data, off)
            elif kind == "mmap_write":
                size = os.fstat(fd).st_size
                if off + n > size:
                    os.ftruncate(fd, off + n)
                with mmap.mmap(fd, max(size, off + n)) as m:
                    m[off:off + n] = data
                    if msync:
                        m.flush()
            else:
                with mmap.mmap(-1, n) as buf:  # page-aligned, as O_DIRECT wants
                    buf[:] = data
                    done = os.pwrite(fd, buf, off)
                if done != n:
                    raise Failure(f"O_DIRECT pwrite of {n} bytes wrote {done}")
        finally:
            os.close(fd)
        model_write(model, off + (self.planted == kind), data)
        self.check(rel, off, n)

    def fallocate(self, kind):
        rel = self.pick(self.files)
        if rel is None:
            return False
        model = self.files[rel]
        off = self.rand_off(len(model))
        n = self.rand_len(self.args.max_size - off)
        mode = {"fallocate": 0, "fallocate_keep_size": fsutil.FALLOC_FL_KEEP_SIZE,
                "punch_hole": fsutil.FALLOC_FL_PUNCH_HOLE | fsutil.FALLOC_FL_KEEP_SIZE}[kind]
        self.log(kind, f"{rel} off={off} len={n}")
        fd = os.open(self.mnt / rel, os.O_RDWR)
        try:
            fsutil.fallocate(fd, mode, off, n)
        finally:
            os.close(fd)
        if mode == 0 and off + n > len(model):
            model.extend(bytes(off + n - len(model)))
        end = min(off + n, len(model))
        if kind == "punch_hole" and end > off and self.planted != kind:
            model[off:end] = bytes(end - off)
        self.check(rel, off, n)

    def truncate(self, kind):
        rel = self.pick(self.files)
        if rel is None:
            return False
        model = self.files[rel]
        size = len(model)
        if size and self.rng.random() < 0.5:
            new = self.rng.randint(0, size - 1)
        else:
            new = self.rng.randint(size, min(self.args.max_size, size + 64 * BLOCK))
        if self.rng.random() < 0.3:
            new -= new % BLOCK
        self.log(kind, f"{rel} {size} -> {new}")
        os.truncate(self.mnt / rel, new)
        if new < size:
            del model[new + (self.planted == kind):]
        else:
            model.extend(bytes(new - size))
        self.check(rel, max(0, min(new, size) - 200), abs(new - size) + 400)

    # -- operations: sharing ----------------------------------------------------

    def clone_args(self):
        """Source, destination and range of a FICLONERANGE the kernel takes, or
        None; also whether the model expects EINVAL (a partial EOF block
        cloned to below the destination's EOF)."""
        src = self.pick(r for r in self.all_files() if self.content(r))
        dst = self.pick(self.files)
        if src is None or dst is None:
            return None
        ssize, dsize = len(self.content(src)), len(self.files[dst])
        soff = self.rng.randint(0, (ssize - 1) // BLOCK) * BLOCK
        n = ssize - soff
        if self.rng.random() < 0.7 and n > BLOCK:
            n = min(n // BLOCK, self.rng.randint(1, 64)) * BLOCK
        room = self.args.max_size - n
        if room < 0:
            return None
        doff = self.rng.randint(0, min(dsize + 4 * BLOCK, room)) // BLOCK * BLOCK
        span = -(-n // BLOCK) * BLOCK
        if src == dst and doff < soff + span and soff < doff + span:
            return None
        return src, dst, soff, n, doff, n % BLOCK != 0 and doff + n < dsize

    def apply_clone(self, kind, src, dst, soff, n, doff, call, einval=False):
        """call(src_fd, dst_fd) copies [soff, +n) of src to doff in dst, or
        must fail with EINVAL if einval (the model says the kernel refuses
        a partial EOF block cloned to below the destination's EOF)."""
        src_fd = os.open(self.mnt / src, os.O_RDONLY)
        dst_fd = os.open(self.mnt / dst, os.O_WRONLY)
        try:
            call(src_fd, dst_fd)
        except OSError as e:
            if einval and e.errno == errno.EINVAL:
                return
            raise
        finally:
            os.close(src_fd)
            os.close(dst_fd)
        if einval:
            raise Mismatch(f"{kind} succeeded where the model expects EINVAL (a partial "
                           f"EOF block cloned to below the destination's EOF)")
        skew = BLOCK if self.planted == kind else 0
        # n may reach past the source's EOF (a whole last block, see clone()).
        data = bytes(self.content(src)[soff + skew:soff + skew + n]).ljust(n, b"\0")
        model_write(self.files[dst], doff, data)
        self.check(dst, doff, n)

    def clone(self, kind):
        if kind == "ficlone":
            src = self.pick(self.all_files())
            dst = self.pick(r for r in self.files if r != src)
            if src is None or dst is None:
                return False
            n, dsize = len(self.content(src)), len(self.files[dst])
            args, einval = (src, dst, 0, n, 0), n % BLOCK != 0 and n < dsize
        else:
            picked = self.clone_args()
            if picked is None:
                return False
            *args, einval = picked
        src, dst, soff, n, doff = args
        if kind == "ficlone":
            def call(s, d):
                fsutil.ficlone(s, d)
        elif kind == "ficlonerange":
            def call(s, d):
                fsutil.ficlonerange(s, d, soff, n, doff)
        else:
            to_eof = n == len(self.content(src)) - soff and self.rng.random() < 0.5
            budget = self.rng.choice([0, 1, 10])
            chunk = self.rng.choice([0, BLOCK, 16 * BLOCK, MiB])
            # A clone onto its own end grows its source after the first chunk,
            # so the partial last block is no longer at EOF when its turn
            # comes: the kernel clones it whole (zeroes past the old EOF).
            length = n
            if src == dst and n % BLOCK and n > (chunk or MiB):
                n = -(-n // BLOCK) * BLOCK

            def call(s, d):
                arg = fsutil.CloneRange2(s, soff, 0 if to_eof else length, doff,
                                         budget_ms=budget, chunk_size=chunk)
                try:
                    while arg.call(d) == fsutil.FICLONERANGE2_PARTIAL:
                        pass
                except OSError as e:
                    if arg.done:
                        raise Mismatch(f"FICLONERANGE2 failed ({e}) after cloning {arg.done} "
                                       f"bytes; FICLONERANGE refuses such a range whole")
                    raise
                if (arg.done, arg.src_length) != (n, n):
                    raise Mismatch(f"FICLONERANGE2 ended with done={arg.done} "
                                   f"src_length={arg.src_length}, the model expects {n}")
        self.log(kind, f"{src} [{soff}, +{n}) -> {dst} @{doff}"
                 + (" (expect EINVAL)" if einval else ""))
        self.apply_clone(kind, src, dst, soff, n, doff, call, einval)

    def copy_file_range(self, kind):
        src = self.pick(self.all_files())
        dst = self.pick(self.files)
        if src is None or dst is None:
            return False
        ssize, dsize = len(self.content(src)), len(self.files[dst])
        soff = self.rand_off(ssize)
        doff = self.rand_off(dsize)
        n = self.rand_len(self.args.max_size - doff)
        if n <= 0 or (src == dst and doff < soff + n and soff < doff + n):
            return False
        expect = max(0, min(n, ssize - soff))
        self.log(kind, f"{src} [{soff}, +{n}) -> {dst} @{doff}")
        done = 0

        def call(s, d):
            nonlocal done
            while done < n:
                got = os.copy_file_range(s, d, n - done, soff + done, doff + done)
                if got == 0:
                    break
                done += got
            if done != expect:
                raise Mismatch(f"copy_file_range copied {done} bytes, the model expects {expect}")
        self.apply_clone(kind, src, dst, soff, expect - (self.planted == kind and expect > 0),
                         doff, call)

    def dedupe(self, kind):
        dst = self.pick(r for r in self.all_files() if len(self.content(r)) >= BLOCK)
        if dst is None:
            return False
        dsize = len(self.content(dst))
        doff = self.rng.randint(0, dsize // BLOCK - 1) * BLOCK
        n = self.rng.randint(1, min(32, (dsize - doff) // BLOCK)) * BLOCK
        want = bytes(self.content(dst)[doff:doff + n])
        if dst in self.files:
            src = self.pick(r for r in self.all_files() if len(self.content(r)) >= n)
            soff = self.rng.randint(0, (len(self.content(src)) - n) // BLOCK) * BLOCK
            prewrite = self.rng.random() < 0.7
        else:  # a read-only snapshot's file: a source with the same bytes there, if any
            src = self.pick(r for r in self.all_files()
                            if r != dst and self.content(r)[doff:doff + n] == want)
            soff, prewrite = doff, False
        if src is None or (src == dst and doff < soff + n and soff < doff + n):
            return False
        self.log(kind, f"{src} [{soff}, +{n}) -> {dst} @{doff}"
                 + (" after writing the source's bytes there" if prewrite else ""))
        if prewrite:
            data = bytes(self.content(src)[soff:soff + n])
            fd = os.open(self.mnt / dst, os.O_WRONLY)
            try:
                write_all(fd, data, doff)
            finally:
                os.close(fd)
            model_write(self.files[dst], doff, data)
        same = self.content(src)[soff:soff + n] == self.content(dst)[doff:doff + n]
        src_fd = os.open(self.mnt / src, os.O_RDONLY)
        dst_fd = os.open(self.mnt / dst, os.O_RDWR if dst in self.files else os.O_RDONLY)
        try:
            [(deduped, status)] = fsutil.fideduperange(src_fd, soff, n, [(dst_fd, doff)])
        finally:
            os.close(src_fd)
            os.close(dst_fd)
        expect = (n, fsutil.FILE_DEDUPE_RANGE_SAME) if same else (
            0, fsutil.FILE_DEDUPE_RANGE_DIFFERS)
        if (deduped, status) != expect:
            raise Mismatch(f"FIDEDUPERANGE gave (bytes_deduped, status) = {(deduped, status)}, "
                           f"the model expects {expect} (the ranges are "
                           f"{'equal' if same else 'different'} in the model)")
        self.check(dst, doff, n)

    # -- operations: files and subvolumes -----------------------------------------

    def unlink(self, kind):
        sub = self.pick(self.subvols)
        rel = self.pick(r for r in self.files if r.startswith(sub + "/"))
        if rel is None or sum(r.startswith(sub + "/") for r in self.files) < 2:
            return False
        self.log(kind, rel)
        os.unlink(self.mnt / rel)
        del self.files[rel]

    def create(self, kind):
        rel = self.pick(f"{sub}/f{i:02d}" for sub in self.subvols for i in range(self.args.files)
                        if f"{sub}/f{i:02d}" not in self.files)
        if rel is None:
            return False
        other = self.pick(self.all_files())
        if other is not None and self.rng.random() < 0.3:  # same bytes, other extents
            data, how = bytes(self.content(other)), f"copy of {other}"
        else:
            size = self.rng.choice([0, self.rng.randint(1, 3 * BLOCK),
                                    self.rng.randint(0, self.args.max_size)])
            data, how = self.new_data(size), f"{size} bytes"
        fsync = self.rng.random() < 0.3
        self.log(kind, f"{rel}: {how}" + (" fsync" if fsync else ""))
        fd = os.open(self.mnt / rel, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            write_all(fd, data)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        self.files[rel] = bytearray(data)
        self.check(rel, 0, len(data))

    def snapshot(self, kind):
        ro = kind == "snapshot_ro"
        if (len(self.frozen) >= RO_MAX) if ro else (len(self.subvols) > RW_MAX):
            return False
        src = self.pick(self.subvols)
        self.snapshots_made += 1
        name = f"{'ro' if ro else 'rw'}{self.snapshots_made}"
        self.log(kind, f"{src} -> {name}")
        self.btrfs("subvolume", "snapshot", *["-r"][:ro], self.mnt / src, self.mnt / name)
        copies = {f"{name}/{r.split('/')[1]}": bytes(m) for r, m in self.files.items()
                  if r.startswith(src + "/")}
        if not ro:
            self.files.update((r, bytearray(m)) for r, m in copies.items())
            self.subvols.append(name)
            return
        data = {r: (m, sha256(m)) for r, m in copies.items()}
        if self.planted == kind and copies:
            r = next(iter(copies))
            data[r] = (copies[r], sha256(copies[r] + b"!"))
        with self.cond:
            self.frozen_data.update(data)
            self.frozen[name] = list(copies)

    def delete_snapshot(self, kind):
        name = self.pick(list(self.frozen) + self.subvols[1:])
        if name is None:
            return False
        wait = self.rng.random() < 0.5
        self.log(kind, name + (" and wait for the cleaner" if wait else ""))
        if name in self.frozen:
            with self.cond:
                self.retired.add(name)
                if not self.cond.wait_for(lambda: self.pins[name] == 0, timeout=120):
                    raise Failure(f"readers of {name} did not finish in 120 s")
        self.btrfs("subvolume", "delete", self.mnt / name)
        if name in self.frozen:
            with self.cond:
                for rel in self.frozen.pop(name):
                    del self.frozen_data[rel]
                self.retired.discard(name)
        else:
            self.subvols.remove(name)
            for rel in [r for r in self.files if r.startswith(name + "/")]:
                del self.files[rel]
        if wait:  # a commit wakes the cleaner, which else waits up to 30 s
            self.btrfs("filesystem", "sync", self.mnt)
            self.btrfs("subvolume", "sync", self.mnt)

    # -- operations: the filesystem as a whole ------------------------------------

    def balance(self, kind):
        how = (["--full-balance"] if self.rng.random() < 0.3
               else [f"-dusage={self.rng.randint(5, 95)}"])
        self.log(kind, " ".join(how))
        self.btrfs("balance", "start", *how, self.mnt)

    def scrub(self, kind):
        self.log(kind, "")
        self.btrfs("scrub", "start", "-B", self.mnt)

    def sync(self, kind):
        how = self.rng.choice(["sync", "fsync", "fdatasync", "btrfs filesystem sync"])
        rel = self.pick(self.files)
        if rel is None and how in ("fsync", "fdatasync"):
            return False
        self.log(kind, how + (f" {rel}" if how in ("fsync", "fdatasync") else ""))
        if how == "sync":
            os.sync()
        elif how == "btrfs filesystem sync":
            self.btrfs("filesystem", "sync", self.mnt)
        else:
            fd = os.open(self.mnt / rel, os.O_RDWR)
            try:
                (os.fsync if how == "fsync" else os.fdatasync)(fd)
            finally:
                os.close(fd)

    def drop_caches(self, kind):
        self.log(kind, "")
        fsutil.drop_caches()

    def fadvise(self, kind):
        rel = self.pick(self.all_files())
        self.log(kind, f"{rel} POSIX_FADV_DONTNEED")
        fd = os.open(self.mnt / rel, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)

    def remount(self, kind):
        """Back to the first option set from any other; from the first, to
        another one time in three, else a plain remount with the same options."""
        if self.remount_state == 0 and len(self.remount_cycle) > 1 and self.rng.random() < 0.3:
            self.remount_state = self.rng.randint(1, len(self.remount_cycle) - 1)
        else:
            self.remount_state = 0
        options = ",".join(o for o in ["remount", self.remount_cycle[self.remount_state]] if o)
        self.log(kind, options)
        fsutil.run("mount", "-o", options, str(self.mnt))

    def read(self, kind):
        rel = self.pick(self.all_files())
        size = len(self.content(rel))
        off = self.rand_off(size)
        n = max(1, self.rand_len(self.args.max_size + BLOCK - off))
        self.log(kind, f"{rel} off={off} len={n}")
        self.verify(rel, off, n, kind)

    def verify_all(self, kind):
        self.log(kind, "")
        self.verify_tree()

    # -- concurrent readers of read-only snapshots --------------------------------

    def reader(self, idx):
        rng = random.Random(f"{self.args.seed}/reader{idx}")
        tally = self.tallies[idx]
        while not self.stop.is_set():
            with self.cond:
                live = [s for s in self.frozen if s not in self.retired and self.frozen[s]]
                snap = rng.choice(live) if live else None
                if snap:
                    rel = rng.choice(self.frozen[snap])
                    want, digest = self.frozen_data[rel]
                    self.pins[snap] += 1
            if snap is None:
                self.stop.wait(0.05)
                continue
            how = rng.choice(READ_KINDS)
            try:
                _, _, data = read_range(self.mnt / rel, how, 0, len(want) + 1, rng)
                if sha256(data) != digest:
                    detail = (describe_difference(rel, how, 0, len(want) + 1, data, want)
                              if data != want else f"{rel}: read by {how}, its {len(data)} "
                              f"bytes equal the model's but not the readers' checksum")
                    self.fail(Mismatch(f"reader {idx}: SHA-256 {sha256(data)[:16]} is not "
                                       f"the model's {digest[:16]}; {detail}"))
                tally["reads"] += 1
                tally["bytes"] += len(data)
                tally[how] += 1
            except Exception as e:
                self.fail(Failure(f"reader {idx}: {how} of {rel}: {e!r}"))
            finally:
                with self.cond:
                    self.pins[snap] -= 1
                    self.cond.notify_all()

    # -- the run ------------------------------------------------------------------

    def totals(self):
        total = collections.Counter()
        for tally in list(self.tallies.values()):
            total.update(tally)
        return total

    def progress(self, elapsed):
        t = self.totals()
        readers = t["reads"] - self.tallies["main"]["reads"]
        print(f"soak: {elapsed:5.0f} s  {self.n} ops  {t['reads']} reads verified "
              f"({t['bytes'] / MiB:.0f} MiB; {readers} by the readers)  "
              f"{len(self.files)} files  snapshots ro {len(self.frozen)} "
              f"rw {len(self.subvols) - 1}", flush=True)

    def run(self):
        args = self.args
        start = time.monotonic()
        next_progress = 10
        self.btrfs("subvolume", "create", self.mnt / "work")
        for _ in range(args.files):
            self.create("create")
        readers = []
        for i in range(args.readers):
            self.tallies[i] = collections.Counter()
            readers.append(threading.Thread(target=self.reader, args=(i,), daemon=True))
        for t in readers:
            t.start()
        try:
            while not self.failures:
                elapsed = time.monotonic() - start
                if (args.ops and self.n >= args.ops) or (args.seconds and elapsed >= args.seconds):
                    break
                if elapsed >= next_progress:
                    self.progress(elapsed)
                    next_progress = elapsed + 10
                kind = self.rng.choices(self.kinds, self.weights)[0]
                method = self.method.get(kind) or getattr(self, kind)
                if method(kind) is False:
                    continue
                self.ops[kind] += 1
                self.n += 1
            if not self.failures:
                if self.remount_state:
                    self.remount("remount")  # back to the options it had
                self.log("final", "drop_caches, then every file read whole")
                fsutil.drop_caches()
                self.verify_tree()
        except Failure as e:
            self.fail(e)
        except Exception as e:  # an errno, a failed command, or a bug here
            traceback.print_exc()
            self.fail(Failure(f"unexpected error: {e!r}"))
        finally:
            self.stop.set()
            for t in readers:
                t.join()
        self.seconds = time.monotonic() - start
        self.progress(self.seconds)

    def end_checks(self, kernel_log):
        """btrfs device stats all zero; no csum failure about this fs in the log."""
        self.device_stats = fsutil.btrfs_device_stats(self.mnt)
        bad = {k: v for k, v in self.device_stats.items() if v}
        if bad:
            self.fail(Failure(f"btrfs device stats are not zero: {bad}"))
        name = f"(device {os.path.basename(os.path.realpath(self.device))})"
        self.csum_messages = [m for m in kernel_log.read()
                              if name in m and ("csum failed" in m or "csum hole" in m)]
        if self.csum_messages:
            self.fail(Failure(f"{len(self.csum_messages)} checksum messages in the kernel log, "
                              f"the first: {self.csum_messages[0]}"))

    def report(self):
        for failure in self.failures:
            print(f"soak: {failure.label}: {failure}", flush=True)
        if self.failures:
            print(f"soak: seed {self.args.seed}; the main thread's last "
                  f"{len(self.history)} operations:")
            for entry in self.history:
                print(f"  {entry}")
            sys.stdout.flush()

    def results(self):
        t = self.totals()
        readers = t - self.tallies["main"]
        return {
            "seed": self.args.seed, "seconds": round(self.seconds, 1), "ops_total": self.n,
            "ops": dict(sorted(self.ops.items())),
            "reads_verified": t["reads"], "bytes_verified": t["bytes"],
            "reader_reads_verified": readers["reads"], "reader_bytes_verified": readers["bytes"],
            "reads_by_kind": {k: t[k] for k in READ_KINDS},
            "mismatches": sum(isinstance(f, Mismatch) for f in self.failures),
            "failures": [f"{f.label}: {f}" for f in self.failures],
            "last_ops": list(self.history) if self.failures else [],
            "op_sequence_sha256": self.sequence.hexdigest(),
            "planted_bug": self.planted, "kernel": os.uname().release,
            "mount_options": fsutil.mount_options(self.mnt),
            "remount_options": self.remount_cycle,
            "shared_cache": self.shared_cache, "ficlonerange2": self.clone2,
            "files": self.args.files, "max_size": self.args.max_size,
            "readers": self.args.readers,
            "device_stats": getattr(self, "device_stats", {}),
            "csum_messages": getattr(self, "csum_messages", []),
        }


def mount_source(mnt):
    for line in Path("/proc/mounts").read_text().splitlines():
        source, target, fstype = line.split()[:3]
        if target == str(mnt):
            return source, fstype
    return None, None


def usage_error(message):
    print(f"soak: {message}", file=sys.stderr)
    sys.exit(2)


def soak(args, mnt):
    """Run on the fresh btrfs mounted at mnt; returns the exit status."""
    device, fstype = mount_source(mnt)
    st = os.statvfs(mnt)
    need = 3 * (1 + RO_MAX + RW_MAX) * args.files * args.max_size
    if fstype != "btrfs" or os.listdir(mnt):
        usage_error(f"{mnt} is not the mount point of a fresh, empty btrfs")
    if st.f_bsize != BLOCK or st.f_blocks * st.f_frsize < need:
        usage_error(f"needs a btrfs with {BLOCK}-byte blocks and at least {need / MiB:.0f} "
                    f"MiB for --files {args.files} --max-size {args.max_size}")
    kernel_log = fsutil.KernelLog()
    s = Soak(args, mnt, device)
    print(f"soak: seed {args.seed}, {args.files} files of up to {args.max_size} bytes, "
          f"{args.readers} readers, on {device} at {mnt} "
          f"({','.join(fsutil.mount_options(mnt))}); FICLONERANGE2 "
          f"{'yes' if s.clone2 else 'no'}, shared cache {'yes' if s.shared_cache else 'no'}"
          + (f"; PLANTED BUG {args.plant_bug}: {PLANTED[args.plant_bug]}"
             if args.plant_bug else ""), flush=True)
    if args.plant_bug == "kernel_log":
        Path("/dev/kmsg").write_text(
            f"soak.py planted bug, not from the kernel: BTRFS warning "
            f"(device {os.path.basename(os.path.realpath(device))}): csum failed root 5 "
            f"ino 257 off 0 (fake)\n")
    s.run()
    s.end_checks(kernel_log)
    kernel_log.close()
    s.report()
    results = s.results()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    print(f"soak: {'FAILED' if s.failures else 'ok'}: {s.n} ops in {s.seconds:.0f} s, "
          f"{results['reads_verified']} reads ({results['bytes_verified'] / MiB:.0f} MiB) "
          f"verified, {results['mismatches']} mismatches (seed {args.seed})", flush=True)
    return 1 if s.failures else 0


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=textwrap.fill("operation kinds: " + ", ".join(WEIGHTS), 79) + "\n\n"
               "--plant-bug kinds:\n"
               + "\n".join(f"  {k}: {v}" for k, v in PLANTED.items())
               + "\n\nexit status: 0 clean, 1 mismatch or failure, 2 usage")
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--dir", help="mount point of a fresh, empty btrfs to use")
    where.add_argument("--device", help="block device or image file: mkfs.btrfs it and "
                       "mount it (image files through a loop device)")
    ap.add_argument("--mount-options", default="", help="with --device: mount options")
    ap.add_argument("--remount-options", metavar="A;B",
                    help="option sets remount switches between, the first most of the time "
                         "(default: the current shared_cache/noshared_cache and the other one "
                         "when the kernel has the cache, else a plain remount)")
    ap.add_argument("--seed", type=int, help="random seed (default: a random one, printed)")
    ap.add_argument("--seconds", type=float, help="stop after this long (default 60 "
                    "unless --ops is given)")
    ap.add_argument("--ops", type=int, help="stop after this many operations")
    ap.add_argument("--files", type=int, default=16, help="files per subvolume (8-32; default 16)")
    ap.add_argument("--max-size", type=int, default=2 * MiB, help="largest file size in bytes "
                    "(default 2 MiB)")
    ap.add_argument("--readers", type=int, default=2,
                    help="threads reading read-only snapshots (default 2)")
    ap.add_argument("--skip", default="", help="comma-separated operation kinds not to run")
    ap.add_argument("--plant-bug", choices=sorted(PLANTED), metavar="KIND",
                    help="corrupt the model for one kind (below), to show the soak catches it")
    ap.add_argument("--json", metavar="FILE", help="write the results here")
    args = ap.parse_args()
    args.skip = [k for k in args.skip.split(",") if k]
    if unknown := set(args.skip) - set(WEIGHTS):
        ap.error(f"--skip: unknown operation kinds {sorted(unknown)}")
    if not 8 <= args.files <= 32 or args.max_size < 4 * BLOCK or args.readers < 0:
        ap.error("--files must be 8-32, --max-size at least 16 KiB, --readers 0 or more")
    if args.seconds is None and args.ops is None:
        args.seconds = 60
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 32)
    if args.dir:
        return soak(args, Path(os.path.realpath(args.dir)))
    fsutil.mkfs("btrfs", args.device)
    options = ",".join(o for o in [args.mount_options,
                                   "loop" if os.path.isfile(args.device) else ""] if o)
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        with fsutil.mounted(args.device, tmp, options) as mnt:
            return soak(args, Path(os.path.realpath(mnt)))


if __name__ == "__main__":
    sys.exit(main())
