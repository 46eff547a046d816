#!/usr/bin/env python3
"""The seed experiment, inside a guest: read a file, clone it, read the clone.

Makes a btrfs on DEVICE, writes a SIZE file, drops caches, then measures
each step's wall time, bytes read from DEVICE and growth of the page cache
('Cached' in /proc/meminfo). Writes a JSON list of step records.
"""
import json
import os
import platform
from pathlib import Path

from harness import fsutil


def main():
    ap = fsutil.bench_arg_parser(__doc__)
    ap.add_argument("--clones", type=int, default=8)
    args = ap.parse_args()

    fsutil.mkfs("btrfs", args.device)
    meter = fsutil.Meter(args.device)
    kernel = platform.release()
    with fsutil.mounted(args.device, "/run/pcshare-demo", args.mount_options) as mnt:
        src = mnt / "source"
        print(f"demo: writing {args.size >> 20} MiB", flush=True)
        fsutil.write_patterned(src, args.size, "demo")
        with open(src, "rb") as f:
            extents = fsutil.fiemap(f.fileno(), max_extents=1 << 16)
        # Under compress=ALG: how much of the file is stored compressed.
        encoded = sum(n for _, _, n, flags in extents if flags & fsutil.FIEMAP_EXTENT_ENCODED)
        fsutil.drop_caches()
        runs = []

        def record(step, fn, n=1):
            row = {"step": step, "n": n, **meter.measure(fn)}
            runs.append(row)
            print(f"demo: {step:18} n={n:<3} {row['seconds']:8.3f} s  "
                  f"disk {row['disk_read_bytes'] >> 20:6} MiB  "
                  f"cache +{row['cache_growth_bytes'] >> 20} MiB", flush=True)

        record("read_source_cold", lambda: fsutil.read_through(src))
        record("read_source_hot", lambda: fsutil.read_through(src))
        fsutil.clone_file(src, mnt / "clone")
        os.sync()
        record("read_clone_first", lambda: fsutil.read_through(mnt / "clone"))
        record("read_clone_again", lambda: fsutil.read_through(mnt / "clone"))
        clones = [mnt / f"clone{i}" for i in range(args.clones)]
        for c in clones:
            fsutil.clone_file(src, c)
        os.sync()
        record("read_n_clones", lambda: [fsutil.read_through(c) for c in clones], n=args.clones)
    for row in runs:
        row["kernel_release"] = kernel
        row["mount_options"] = args.mount_options
        row["compressed_bytes_of_file"] = encoded
    Path(args.json).write_text(json.dumps(runs, indent=2))


if __name__ == "__main__":
    main()
