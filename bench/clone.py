#!/usr/bin/env python3
"""`make bench-clone`: the FICLONERANGE2 proposal's table, reproduced.

Boots the stock and the pcshare kernel; each makes a btrfs file of
--extents one-block extents, measures fio's 4 KiB random readers (buffered,
O_DIRECT, mmap) and one writer on it with no clone (the baseline), then
clones it --repeat times per method while the same jobs run: FICLONE, a
1 MiB FICLONERANGE loop, and (pcshare only) FICLONERANGE2 with 10 ms and
100 ms budgets, all through `pcshare clone`. Writes runs/clone.json
(format in docs/benchmarks.md), runs/clone.md (its table there) and
runs/clone.png.
"""
import argparse
import json
import sys
from pathlib import Path

from bench import guestbench
from bench.clone_results import markdown
from harness import vm
from harness.results import run_file

STOCK_METHODS = ["ficlone", "ficlonerange_1m"]
CLONE2_METHODS = ["ficlonerange2_10ms", "ficlonerange2_100ms"]


def run_kernel(kernel, extents, repeat, out_dir):
    methods = STOCK_METHODS + (CLONE2_METHODS if vm.has_clone2(kernel) else [])
    command = [sys.executable, "-m", "bench.clone_guest", "--device", "/dev/vda",
               "--extents", str(extents), "--methods", ",".join(methods),
               "--repeat", str(repeat),
               "--json", "/run/pcshare/out/clone.json"]
    result = vm.run_vm(command, kernel=kernel, mem="3G", disks=["4G"], timeout=5400,
                       out_dir=out_dir)
    if not result.ok:
        raise SystemExit(f"bench-clone: {kernel} guest failed: {result.summary()}")
    return json.loads((out_dir / "clone.json").read_text())


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--extents", type=int, default=100000,
                    help="extents in the cloned file (default 100000)")
    ap.add_argument("--repeat", type=int, default=5,
                    help="runs of each method per kernel (default 5)")
    ap.add_argument("--kernels", default="stock,pcshare")
    ap.add_argument("--out", default=run_file("clone.json"))
    ap.add_argument("--plot", default=run_file("clone.png"))
    args = ap.parse_args()
    if args.extents < 1 or args.repeat < 1:
        ap.error("--extents and --repeat must be positive")
    kernels = [k for k in args.kernels.split(",") if k]
    for kernel in kernels:
        vm.build_kernel(kernel)

    results = {"extents": None, "file_size": None, "baseline": {}, "runs": []}
    for kernel in kernels:
        print(f"== {kernel}", flush=True)
        got = run_kernel(kernel, args.extents, args.repeat, vm.CACHE / "bench-clone" / kernel)
        results["extents"] = results["extents"] or got["extents"]
        results["file_size"] = got["file_size"]
        if got["extents"] != results["extents"]:
            print(f"note: {kernel}'s file has {got['extents']} extents", flush=True)
            results.setdefault("extents_per_kernel", {})[kernel] = got["extents"]
        results["baseline"][kernel] = got["baseline"]
        results["runs"] += [{"kernel": kernel, **run} for run in got["runs"]]

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    table = out.with_suffix(".md")
    text = markdown(results)
    table.write_text(text + "\n")
    print(text)
    print(f"\nwritten: {out}, {table}")
    if guestbench.plot("clone", out, args.plot):
        print(f"written: {args.plot}")
    else:
        print("bench-clone: plot failed (results are in the JSON)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
