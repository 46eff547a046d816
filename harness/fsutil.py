"""Guest-side helpers: reflink ioctls, extent maps, data and checksums.

Used by the guest test suites and the benchmarks; runs inside a pcshare guest
(or on any Linux host for the parts that need no scratch disk).
"""
import argparse
import contextlib
import ctypes
import errno
import fcntl
import hashlib
import json
import mmap
import os
import re
import struct
import subprocess
import time
from pathlib import Path

from harness import features, uapi
from harness.clone2 import CloneRange2, has_ficlonerange2  # noqa: F401 (used by the suites)
from harness.kernel_log import KernelLog  # noqa: F401 (used by the suites)

# include/uapi/linux/fs.h
FICLONE = 0x40049409
FICLONERANGE = 0x4020940D
FIDEDUPERANGE = 0xC0189436
# The pcshare series' FICLONERANGE2, read from its header (harness.uapi).
FICLONERANGE2 = uapi.ioctl_number()
FICLONERANGE2_PARTIAL = int(uapi.defines()["FICLONERANGE2_PARTIAL"])
FS_IOC_FIEMAP = 0xC020660B
FIEMAP_FLAG_SYNC = 0x1
FIEMAP_EXTENT_LAST = 0x1
FIEMAP_EXTENT_ENCODED = 0x8
FIEMAP_EXTENT_SHARED = 0x2000
FILE_DEDUPE_RANGE_SAME = 0
FILE_DEDUPE_RANGE_DIFFERS = 1


def ficlone(src_fd, dst_fd):
    fcntl.ioctl(dst_fd, FICLONE, src_fd)


def ficlonerange(src_fd, dst_fd, src_offset, length, dest_offset):
    arg = struct.pack("=qQQQ", src_fd, src_offset, length, dest_offset)
    fcntl.ioctl(dst_fd, FICLONERANGE, arg)


_libc = ctypes.CDLL(None, use_errno=True)


def fideduperange(src_fd, src_offset, length, dests):
    """dests: [(fd, offset)]; returns [(bytes_deduped, status)] per dest."""
    buf = bytearray(struct.pack("=QQHHI", src_offset, length, len(dests), 0, 0))
    for fd, offset in dests:
        buf += struct.pack("=qQQiI", fd, offset, 0, 0, 0)
    fcntl.ioctl(src_fd, FIDEDUPERANGE, buf)
    return [struct.unpack_from("=qQQiI", buf, 24 + 32 * i)[2:4] for i in range(len(dests))]


def readahead(fd, offset, count):
    """readahead(2), which Python's os module does not wrap."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.readahead.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_size_t]
    if libc.readahead(fd, offset, count) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def fiemap(fd, start=0, length=(1 << 64) - 1, max_extents=512):
    """Return [(logical, physical, length, flags)] for the range."""
    header = struct.pack("=QQIIII", start, length, FIEMAP_FLAG_SYNC, 0, max_extents, 0)
    buf = bytearray(header + bytes(56 * max_extents))
    fcntl.ioctl(fd, FS_IOC_FIEMAP, buf)
    mapped = struct.unpack_from("=I", buf, 20)[0]
    extents = []
    for i in range(mapped):
        logical, physical, length_, _, _, flags = struct.unpack_from("=QQQQQI", buf, 32 + 56 * i)
        extents.append((logical, physical, length_, flags))
    return extents


def fiemap_all(path, batch=4096):
    """Every extent of PATH as (logical, physical, length, flags), read in
    batches of BATCH: a fragmented file has too many for one call."""
    extents, start = [], 0
    with open(path, "rb") as f:
        while True:
            got = fiemap(f.fileno(), start=start, max_extents=batch)
            extents += got
            if not got or got[-1][3] & FIEMAP_EXTENT_LAST:
                return extents
            start = got[-1][0] + got[-1][2]


def write_extents(path, extents, bs=4096):
    """A file of EXTENTS one-block extents with a hole after each but the
    last, written back to front (so XFS's EOF preallocation cannot merge
    them) and fsynced; each block holds its index. Returns the size."""
    with open(path, "wb") as f:
        for i in reversed(range(extents)):
            os.pwrite(f.fileno(), i.to_bytes(8, "little") * (bs // 8), 2 * i * bs)
        os.fsync(f.fileno())
    return (2 * extents - 1) * bs


def physical_map(path):
    with open(path, "rb") as f:
        return [(lo, ph, ln) for lo, ph, ln, _ in fiemap(f.fileno())]


def pattern(size, seed):
    """Deterministic data, no two 4 KiB blocks alike; each block repeats one
    64-byte digest, so it compresses well (compress=... stores it compressed)."""
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha512(f"{seed}:{counter}".encode()).digest() * 64
        counter += 1
    return bytes(out[:size])


def write_file(path, data, sync=True):
    with open(path, "wb") as f:
        f.write(data)
        if sync:
            os.fsync(f.fileno())


def write_patterned(path, size, tag):
    """Write a SIZE-byte file of distinct data, one MiB at a time (so any
    size fits in memory), and fsync it."""
    with open(path, "wb") as f:
        for i in range(0, size, 1 << 20):
            f.write(pattern(min(1 << 20, size - i), f"{tag}:{i}"))
        os.fsync(f.fileno())


def read_through(path):
    """Read all of a file with read(2), 1 MiB at a time, and drop the data."""
    fd = os.open(path, os.O_RDONLY)
    try:
        while os.read(fd, 1 << 20):
            pass
    finally:
        os.close(fd)


def clone_file(src, dst):
    """FICLONE all of src into a new (or emptied) dst."""
    with open(src, "rb") as s, open(dst, "wb") as d:
        ficlone(s.fileno(), d.fileno())


def sha256_file(path, offset=0, length=None, direct=False):
    h = hashlib.sha256()
    flags = os.O_RDONLY | (os.O_DIRECT if direct else 0)
    fd = os.open(path, flags)
    try:
        remaining = os.fstat(fd).st_size - offset if length is None else length
        pos = offset
        if direct:
            buf = mmap.mmap(-1, 1 << 20)
            while remaining > 0:
                n = os.preadv(fd, [buf], pos)
                if n == 0:
                    break
                h.update(buf[:min(n, remaining)])
                pos += n
                remaining -= n
        else:
            while remaining > 0:
                chunk = os.pread(fd, min(1 << 20, remaining), pos)
                if not chunk:
                    break
                h.update(chunk)
                pos += len(chunk)
                remaining -= len(chunk)
    finally:
        os.close(fd)
    return h.hexdigest()


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def drop_caches():
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


class CommandFailed(subprocess.CalledProcessError):
    """A command run() ran failed; its message ends with the command's
    stderr, which is what says why."""

    def __str__(self):
        return f"{super().__str__()}: {(self.stderr or '').strip()[-2000:]}"


def run(*argv, env=None):
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    if done.returncode:
        raise CommandFailed(done.returncode, argv, done.stdout, done.stderr)
    return done.stdout


def mkfs(kind, device):
    if kind == "btrfs":
        run("mkfs.btrfs", "-q", "-f", device)
    elif kind == "xfs":
        run("mkfs.xfs", "-q", "-f", "-m", "reflink=1", device)
    else:
        raise ValueError(kind)


@contextlib.contextmanager
def mounted(device, mountpoint, options=""):
    Path(mountpoint).mkdir(parents=True, exist_ok=True)
    argv = ["mount"] + (["-o", options] if options else []) + [device, str(mountpoint)]
    run(*argv)
    try:
        yield Path(mountpoint)
    finally:
        run("umount", str(mountpoint))


def disk_read_bytes(device):
    """Bytes read from a block device since boot (/sys/block/<dev>/stat)."""
    name = os.path.basename(device)
    fields = Path(f"/sys/block/{name}/stat").read_text().split()
    return int(fields[2]) * 512


def meminfo(field="Cached"):
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, value = line.split(":", 1)
        if key == field:
            return int(value.split()[0]) * 1024
    raise KeyError(field)


MiB = 1 << 20


def mount_options(mountpoint):
    """The options /proc/mounts shows for a mount point, as a list."""
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if fields[1] == str(mountpoint):
            return fields[3].split(",")
    raise KeyError(mountpoint)


def btrfs_sysfs_dir(device):
    """/sys/fs/btrfs/<fsid> of the mounted btrfs on device."""
    name = os.path.basename(os.path.realpath(device))
    for fsid in Path("/sys/fs/btrfs").iterdir():
        if (fsid / "devices" / name).exists():
            return fsid
    raise FileNotFoundError(f"no mounted btrfs on {device}")


def shared_cache_stats(device):
    """The shared extent cache counters of the btrfs on device, as ints."""
    directory = btrfs_sysfs_dir(device) / "shared_cache"
    return {p.name: int(p.read_text()) for p in directory.iterdir()}


def run_fio(job, env):
    """Run fio job file `job` with `env` (its ${VARIABLES}); returns the
    "jobs" list of its JSON output."""
    out = run("fio", "--output-format=json", str(job), env=env)
    # fio may print notes before the JSON.
    return json.loads(out[out.index("{"):])["jobs"]


# Debian's interpreter (scripts/deps.sh), which the benchmarks build images from.
SYSTEM_PYTHON = "/usr/bin/python3"


def system_python_stdlib():
    """The standard library directory of SYSTEM_PYTHON."""
    return Path(run(SYSTEM_PYTHON, "-c", "import sysconfig; "
                    "print(sysconfig.get_paths()['stdlib'])").strip())


def load_fio(directory):
    """Run fio once on a small file in `directory`: after caches are dropped
    its binary and libraries (tens of MiB on Debian, which links it with
    ceph and gluster) come back into the page cache, and a benchmark must
    not count them as its files' growth."""
    warm = Path(directory) / "fio-warm"
    warm.write_bytes(bytes(1 << 16))
    run("fio", "--name=warm", f"--filename={warm}", "--rw=read", "--bs=4k",
        "--output=/dev/null")


class Meter:
    """Measures a step on one btrfs device: wall time, bytes read from the
    device, page cache growth and, on a kernel with it, the shared extent
    cache counters' deltas."""

    def __init__(self, device):
        self.device = device

    @staticmethod
    def file_cache():
        """Page cache of files: 'Cached' counts shared memory too, which
        a tool such as fio allocates and frees around its run."""
        return meminfo("Cached") - meminfo("Shmem")

    def shared_cache(self):
        try:
            return shared_cache_stats(self.device)
        except FileNotFoundError:  # a kernel without the shared extent cache
            return None

    def snapshot(self):
        """The state since() measures from."""
        return {"disk": disk_read_bytes(self.device), "cache": self.file_cache(),
                "shared_cache": self.shared_cache(), "time": time.monotonic()}

    def since(self, start):
        """One row: what changed since snapshot `start`."""
        seconds = time.monotonic() - start["time"]
        row = {"seconds": round(seconds, 4),
               "disk_read_bytes": disk_read_bytes(self.device) - start["disk"],
               "cache_growth_bytes": self.file_cache() - start["cache"]}
        sc0, sc1 = start["shared_cache"], self.shared_cache()
        if sc0 is not None and sc1 is not None:
            # Counter deltas over the step; resident bytes at its end.
            row["shared_cache"] = {k: sc1[k] - sc0[k] for k in
                                   ("hits", "misses", "bytes_filled", "bytes_served")}
            row["shared_cache"]["resident_bytes"] = sc1["resident_pages"] * 4096
        return row

    def measure(self, fn):
        start = self.snapshot()
        fn()
        return self.since(start)


CSUM_MESSAGES = ("csum failed", "csum hole")


def btrfs_health_problems(mountpoint, log):
    """What says a btrfs lost or misread data since log (a KernelLog) was
    made: nonzero persistent device error counters (`btrfs device stats`)
    and checksum messages in the kernel log.  Empty when healthy."""
    problems = [f"device stats: {key} {value}"
                for key, value in btrfs_device_stats(mountpoint).items() if value]
    problems += [line for line in log.read() if any(m in line for m in CSUM_MESSAGES)]
    return problems


def btrfs_root_id(path):
    """The id of the subvolume (tree) PATH is in, as a string for dump-tree -t."""
    return run("btrfs", "inspect-internal", "rootid", str(path)).strip()


def btrfs_extent_items(device, inodes, tree="5"):
    """How many file extent (EXTENT_DATA) items each inode number has in one
    subvolume tree (default: the top level), from `btrfs inspect-internal
    dump-tree`; sync the filesystem first."""
    out = run("btrfs", "inspect-internal", "dump-tree", "-t", str(tree), device)
    counts = dict.fromkeys(inodes, 0)
    for ino in re.findall(r"key \((\d+) EXTENT_DATA \d+\)", out):
        if int(ino) in counts:
            counts[int(ino)] += 1
    return counts


def btrfs_physical(device, logical):
    """Byte offset on device of btrfs logical address (first mirror); unmounted fs."""
    out = run("btrfs-map-logical", "-l", str(logical), device)
    for line in out.splitlines():
        words = line.split()
        if words[:1] == ["mirror"] and "physical" in words:
            return int(words[words.index("physical") + 1])
    raise ValueError(f"btrfs-map-logical gave no physical address: {out!r}")


@contextlib.contextmanager
def memory_cgroup(name, limit):
    """A cgroup v2 with memory.max = limit; yields its cgroup.procs path."""
    root = Path("/sys/fs/cgroup")
    if "memory" not in (root / "cgroup.subtree_control").read_text().split():
        (root / "cgroup.subtree_control").write_text("+memory\n")
    group = root / name
    group.mkdir(exist_ok=True)
    (group / "memory.max").write_text(f"{limit}\n")
    try:
        yield group / "cgroup.procs"
    finally:
        for pid in (group / "cgroup.procs").read_text().split():
            (root / "cgroup.procs").write_text(pid + "\n")
        group.rmdir()


@contextlib.contextmanager
def bench_btrfs(args):
    """A fresh btrfs on args.device, mounted with args.mount_options, for a
    guest-side benchmark (bench_arg_parser's arguments); yields its mount."""
    mkfs("btrfs", args.device)
    with mounted(args.device, "/run/pcshare-bench", args.mount_options) as mnt:
        yield mnt


def bench_sample(meter, samples, fields, name, unit, measure):
    """Run MEASURE() (a number: IOPS, MiB/s) under METER (a Meter) and add
    FIELDS, {NAME: the number} and the disk bytes it read to SAMPLES, with a
    progress line."""
    got = []
    disk = meter.measure(lambda: got.append(measure()))["disk_read_bytes"]
    samples.append({**fields, name: round(got[0], 1), "disk_read_bytes": disk})
    print(" ".join(map(str, fields.values())) + f": {got[0]:.1f} {unit}"
          f"  disk {disk >> 20} MiB", flush=True)


def write_bench_samples(args, shared_cache, samples):
    """A sampling benchmark's guest JSON: the file size, kernel, mount
    options, the shared cache's counters (None without it), the samples."""
    Path(args.json).write_text(json.dumps(
        {"file_size": args.size, "kernel_release": os.uname().release,
         "mount_options": args.mount_options, "shared_cache": shared_cache,
         "samples": samples}, indent=2) + "\n")


class _BenchArgumentParser(argparse.ArgumentParser):
    """Keeps only the --mount-options the running kernel has
    (harness.features), so the results file records what was mounted."""

    def parse_args(self, *args, **kwargs):
        parsed = super().parse_args(*args, **kwargs)
        parsed.mount_options = features.usable_options(parsed.mount_options)
        return parsed


def bench_arg_parser(description, size=True):
    """Arguments every guest-side benchmark takes: a device to make a btrfs
    on, a file size, mount options and where to write its JSON."""
    ap = _BenchArgumentParser(description=description)
    ap.add_argument("--device", required=True)
    if size:
        ap.add_argument("--size", type=int, required=True, help="file size in bytes")
    ap.add_argument("--mount-options", default="")
    ap.add_argument("--json", required=True, help="output file")
    return ap


# include/uapi/linux/falloc.h
FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02


def fallocate(fd, mode, offset, length):
    """fallocate(2) with a mode (os.posix_fallocate has none)."""
    ret = _libc.fallocate(fd, mode, ctypes.c_int64(offset), ctypes.c_int64(length))
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def btrfs_device_stats(mountpoint):
    """`btrfs device stats` of a mounted btrfs: {"[/dev/vda].write_io_errs": 0, ...}."""
    stats = {}
    for line in run("btrfs", "device", "stats", str(mountpoint)).splitlines():
        key, _, value = line.rpartition(" ")
        if key.strip():
            stats[key.strip()] = int(value)
    return stats
