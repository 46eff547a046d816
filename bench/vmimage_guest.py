#!/usr/bin/env python3
"""VM disk images cloned with `cp --reflink`, inside a guest.

Writes a raw disk image of --size bytes on a fresh btrfs, every byte of it,
holding an ext4 filesystem filled from --fill-from (`mkfs.ext4 -d`), and
clones it
max(--clones) times with `cp --reflink=always`. Then, per fio engine
(psync and io_uring buffered, libaio on O_DIRECT, mmap) and access
(sequential 1 MiB, random 64 KiB: bench/jobs/vm-disk-read.fio reads every
block once), caches are dropped and the clones are read one after the
other the way a VM's disk backend reads its disk; page cache growth and
disk bytes are recorded cumulatively after each N in --clones.

The images live in a subvolume of their own. After the engines above, it
is made read-only (a golden image's snapshot) and the --readonly-engines
read the clones again, sequentially: with shared_cache_map their mappings
are bound to one shared copy, and the first clone's time is a cold mapped
read of a bound file. Each row says which ("subvolume": "writable" or
"read-only").
"""
import json
import os
from pathlib import Path

from harness import fsutil

JOB = Path(__file__).resolve().parent / "jobs/vm-disk-read.fio"
ENGINES = {  # name: (fio ioengine, direct, iodepth)
    "psync": ("psync", 0, 1),
    "io_uring": ("io_uring", 0, 8),
    "libaio_direct": ("libaio", 1, 8),
    "mmap": ("mmap", 0, 1),
}
ACCESS = {"seq": ("read", "1m"), "rand": ("randread", "64k")}
MiB = 1 << 20


def make_image(path, size, fill_from):
    with open(path, "wb") as f:
        for _ in range(size // MiB):
            f.write(bytes(MiB))
        os.fsync(f.fileno())
    # mkfs.ext4 discards an image file by punching holes in it and zeroes
    # its journal with fallocate(); a VM image that was written has data in
    # every block, and a hole or an unwritten extent would be read without
    # the disk.
    fsutil.run("mkfs.ext4", "-q", "-F", "-E", "nodiscard", "-d", fill_from, str(path),
               env=dict(os.environ, UNIX_IO_NOZEROOUT="1"))
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


def fio_read(path, engine, access):
    ioengine, direct, depth = ENGINES[engine]
    rw, bs = ACCESS[access]
    env = dict(os.environ, FILE=str(path), ENGINE=ioengine, RW=rw, BS=bs,
               DIRECT=str(direct), DEPTH=str(depth))
    fsutil.run_fio(JOB, env)


def main():
    ap = fsutil.bench_arg_parser(__doc__)
    ap.add_argument("--clones", default="1,4,8", help="values of N")
    ap.add_argument("--engines", default=",".join(ENGINES),
                    help=f"fio engines (default {','.join(ENGINES)})")
    ap.add_argument("--readonly-engines", default="mmap",
                    help="fio engines run again, sequential access only, once the images' "
                    "subvolume is read-only (default mmap; empty: none)")
    ap.add_argument("--fill-from", default=None,
                    help="host directory copied into the image's ext4 (default: the "
                    "standard library of /usr/bin/python3, about 60 MiB)")
    args = ap.parse_args()
    for option, value in (("--engines", args.engines),
                          ("--readonly-engines", args.readonly_engines)):
        unknown = set(filter(None, value.split(","))) - set(ENGINES)
        if unknown:
            ap.error(f"{option}: unknown {', '.join(sorted(unknown))}; known: "
                     f"{', '.join(ENGINES)}")
    if args.fill_from is None:
        args.fill_from = str(fsutil.system_python_stdlib())
    counts = sorted(int(n) for n in args.clones.split(","))
    steps = [("writable", engine, access)
             for engine in filter(None, args.engines.split(",")) for access in ACCESS]
    steps += [("read-only", engine, "seq")
              for engine in filter(None, args.readonly_engines.split(","))]
    meter = fsutil.Meter(args.device)
    runs = []
    with fsutil.bench_btrfs(args) as mnt:
        images = mnt / "images"
        fsutil.run("btrfs", "subvolume", "create", str(images))
        make_image(images / "base.img", args.size, args.fill_from)
        clones = [images / f"vm{i}.img" for i in range(counts[-1])]
        for clone in clones:
            fsutil.run("cp", "--reflink=always", str(images / "base.img"), str(clone))
        fsutil.run("btrfs", "filesystem", "sync", str(mnt))
        for subvolume, engine, access in steps:
            if subvolume == "read-only":
                fsutil.run("btrfs", "property", "set", "-ts", str(images), "ro", "true")
            fsutil.drop_caches()
            fsutil.load_fio(mnt)
            start = meter.snapshot()
            for i, clone in enumerate(clones, 1):
                fio_read(clone, engine, access)
                if i in counts:
                    row = {"subvolume": subvolume, "engine": engine, "access": access,
                           "clones": i, **meter.since(start)}
                    runs.append(row)
                    print(f"vm: {subvolume:9} {engine:14} {access:4} N={i}  cache +"
                          f"{row['cache_growth_bytes'] >> 20:5} MiB  disk "
                          f"{row['disk_read_bytes'] >> 20:5} MiB  {row['seconds']:7.2f} s",
                          flush=True)
    Path(args.json).write_text(json.dumps(
        {"image_bytes": args.size, "kernel_release": os.uname().release,
         "mount_options": args.mount_options, "runs": runs}, indent=2) + "\n")


if __name__ == "__main__":
    main()
