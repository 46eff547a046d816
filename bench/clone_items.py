#!/usr/bin/env python3
"""`make bench-clone-items`: file extent items a clone leaves behind.

Boots the pcshare kernel once; in the guest (bench/clone_items_guest.py) a
file of large extents is cloned with FICLONE and with FICLONERANGE2
(adaptive chunks, a 10 ms budget, fixed 1 MiB chunks), and the EXTENT_DATA
items of each destination are counted in the committed tree. Writes
runs/clone-items.json:

    {"file_size": bytes, "items": {"src" | method: N}, "calls": {method: N}}
"""
import argparse
import json
import sys
from pathlib import Path

from harness import vm
from harness.results import run_file


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="512M", help="source file size (default 512M)")
    ap.add_argument("--out", default=run_file("clone-items.json"))
    args = ap.parse_args()
    size = vm.parse_size(args.size)
    vm.build_kernel("pcshare")
    out_dir = vm.CACHE / "bench-clone-items"
    command = [sys.executable, "-m", "bench.clone_items_guest", "--device", "/dev/vda",
               "--size", str(size), "--json", "/run/pcshare/out/clone-items.json"]
    result = vm.run_vm(command, kernel="pcshare", mem="2G", disks=[str(6 * size + (1 << 30))],
                       timeout=1800, out_dir=out_dir)
    if not result.ok:
        raise SystemExit(f"bench-clone-items: guest failed: {result.summary()}")
    got = json.loads((out_dir / "clone-items.json").read_text())
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(got, indent=2) + "\n")
    base = got["items"]["ficlone"] or 1
    print(f"{'destination':20} {'items':>6} {'vs FICLONE':>10} {'calls':>6}")
    for name, items in got["items"].items():
        print(f"{name:20} {items:6} {items / base:10.1f} {got['calls'].get(name, ''):>6}")
    print(f"\nwritten: {out}")


if __name__ == "__main__":
    main()
