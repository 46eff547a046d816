#!/usr/bin/env python3
"""`make bench-unshared`: reads of unshared data, stock vs pcshare.

Boots the stock and the pcshare kernel in turn, ROUNDS times each
(interleaved, so drift of this machine hits both alike); each boot measures
cold sequential reads (MB/s) and 4 KiB random reads (IOPS) of one non-cloned
file. pcshare mounts with shared_cache, so every read goes through the
cache's code. Writes runs/unshared.json with the medians (format in
docs/benchmarks.md) and prints pcshare/stock ratios.
"""
import argparse
import json
import statistics
import sys
from pathlib import Path

from harness import vm
from harness.results import run_file


def run_boot(kernel, size, samples, out_dir):
    command = [sys.executable, "-m", "bench.unshared_guest", "--device", "/dev/vda",
               "--size", str(size), "--samples", str(samples),
               "--json", "/run/pcshare/out/unshared.json"]
    shared = vm.has_shared_cache(kernel)
    if shared:
        command += ["--mount-options", "shared_cache"]
    result = vm.run_vm(command, kernel=kernel, mem="2G", disks=[str(size + (1 << 30))],
                       timeout=1800, out_dir=out_dir)
    if not result.ok:
        raise SystemExit(f"bench-unshared: {kernel} guest failed: {result.summary()}")
    return shared, json.loads((out_dir / "unshared.json").read_text())


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="256M", help="file size (default 256M)")
    ap.add_argument("--rounds", type=int, default=3, help="boots per kernel (default 3)")
    ap.add_argument("--samples", type=int, default=3, help="samples per boot (default 3)")
    ap.add_argument("--kernels", default="stock,pcshare")
    ap.add_argument("--out", default=run_file("unshared.json"))
    args = ap.parse_args()
    size = vm.parse_size(args.size)
    if size <= 0 or args.rounds < 1 or args.samples < 1:
        ap.error("--size, --rounds and --samples must be positive")
    kernels = [k for k in args.kernels.split(",") if k]
    for kernel in kernels:
        vm.build_kernel(kernel)

    collected = {}  # (kernel, workload) -> {"shared_cache", "unit", "samples"}
    for r in range(args.rounds):
        for kernel in kernels:
            print(f"== round {r + 1}/{args.rounds}: {kernel}", flush=True)
            out_dir = vm.CACHE / "bench-unshared" / f"{kernel}-{r}"
            shared, samples = run_boot(kernel, size, args.samples, out_dir)
            for s in samples:
                entry = collected.setdefault((kernel, s["workload"]), {
                    "shared_cache": shared, "unit": s["unit"], "samples": []})
                entry["samples"].append(round(s["value"], 2))

    runs = [{"kernel": k, "shared_cache": e["shared_cache"], "workload": w,
             "median": statistics.median(e["samples"]), "unit": e["unit"],
             "samples": e["samples"]} for (k, w), e in collected.items()]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"file_size": size, "rounds": args.rounds, "runs": runs},
                              indent=2) + "\n")

    print(f"\n{'workload':12} {'unit':5}" + "".join(f" {k:>10}" for k in kernels) + "   ratio")
    for workload in sorted({w for _, w in collected}):
        medians = [collected[(k, workload)] for k in kernels if (k, workload) in collected]
        cells = "".join(f" {statistics.median(e['samples']):10.1f}" for e in medians)
        ratio = ""
        if len(medians) == 2:
            ratio = f"   {statistics.median(medians[1]['samples']) / statistics.median(medians[0]['samples']):.3f}"
        print(f"{workload:12} {medians[0]['unit']:5}{cells}{ratio}")
    print(f"\nwritten: {out}")


if __name__ == "__main__":
    main()
