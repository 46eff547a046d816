#!/usr/bin/env python3
"""How many file extent items a clone leaves in its destination, inside a
guest: FICLONE against FICLONERANGE2 (adaptive chunks, with and without a
budget, and fixed 1 MiB chunks) of one file of large extents.

Each chunk boundary inside a source extent splits it into two items in the
destination; more items slow later clones, send and backref walks. Counts
the EXTENT_DATA items of each destination in `btrfs inspect-internal
dump-tree` after a sync, and writes them as JSON.
"""
import json
import os
from pathlib import Path

from harness import fsutil
from harness.fsutil import CloneRange2

MiB = 1 << 20
METHODS = {
    "ficlone": None,
    "clone2_adaptive": dict(),
    "clone2_budget_10ms": dict(budget_ms=10),
    "clone2_chunk_1m": dict(chunk_size=MiB),
}


def clone(src, dst, kwargs):
    with open(src, "rb") as s, open(dst, "wb") as d:
        if kwargs is None:
            fsutil.ficlone(s.fileno(), d.fileno())
            return 1
        args = CloneRange2(s.fileno(), **kwargs)
        calls = 1
        while args.call(d.fileno()):
            calls += 1
        return calls


def main():
    ap = fsutil.bench_arg_parser(__doc__)
    args = ap.parse_args()
    with fsutil.bench_btrfs(args) as mnt:
        src = mnt / "src"
        fsutil.write_file(src, fsutil.pattern(args.size, "items"))
        calls = {name: clone(src, mnt / name, kw) for name, kw in METHODS.items()}
        os.sync()
        names = ["src", *METHODS]
        inodes = {name: os.stat(mnt / name).st_ino for name in names}
        fsutil.run("btrfs", "filesystem", "sync", str(mnt))
        counts = fsutil.btrfs_extent_items(args.device, inodes.values())
    result = {"file_size": args.size,
              "items": {name: counts[inodes[name]] for name in names},
              "calls": calls}
    for name in names:
        print(f"clone-items: {name:20} {result['items'][name]:6} items"
              + (f" ({calls[name]} calls)" if name in calls else ""), flush=True)
    Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
