#!/usr/bin/env python3
"""`make bench-lockhold`: 4 KiB writers during one 1 GiB cold pread.

Boots the stock and the pcshare kernel in turn, ROUNDS times each
(interleaved); each boot reads a cold 1 GiB range of a file with one pread
while one writer writes elsewhere in the file and another inside the range
being read (bench/lockhold_guest.py). pcshare mounts with shared_cache, so
the read goes through the cache's slow path, which must not hold the extent
lock while it waits for the disk. Writes runs/lockhold.json:

    {"size": bytes, "rounds": N,
     "runs": [{"kernel": str, "round": i, "read_seconds": float,
               "writer": "other_region" | "read_range",
               "writes": N, "max_ms": float, "p99_ms": float, "median_ms": float}]}

and prints each writer's median over rounds of its max latency, with the
pcshare/stock ratio. Times are TCG times: compare within one run.
"""
import argparse
import json
import statistics
import sys
from pathlib import Path

from bench import guestbench
from harness import vm
from harness.results import run_file


def run_boot(kernel, size, out_dir):
    command = [sys.executable, "-m", "bench.lockhold_guest", "--device", "/dev/vda",
               "--size", str(size), "--json", "/run/pcshare/out/lockhold.json"]
    if vm.has_shared_cache(kernel):
        command += ["--mount-options", "shared_cache"]
    result = vm.run_vm(command, kernel=kernel, mem="4G", disks=[str(size + (1 << 30))],
                       timeout=1800, out_dir=out_dir)
    if not result.ok:
        raise SystemExit(f"bench-lockhold: {kernel} guest failed: {result.summary()}")
    return json.loads((out_dir / "lockhold.json").read_text())


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1G", help="bytes read by the one pread (default 1G)")
    ap.add_argument("--rounds", type=int, default=2, help="boots per kernel (default 2)")
    ap.add_argument("--kernels", default="stock,pcshare")
    ap.add_argument("--out", default=run_file("lockhold.json"))
    args = ap.parse_args()
    size = vm.parse_size(args.size)
    if size < (128 << 20) or size % (64 << 20) or args.rounds < 1:
        ap.error("--size must be a multiple of 64M, at least 128M; --rounds positive")
    kernels = [k for k in args.kernels.split(",") if k]
    for kernel in kernels:
        vm.build_kernel(kernel)

    runs = []
    for r in range(args.rounds):
        for kernel in kernels:
            print(f"== round {r + 1}/{args.rounds}: {kernel}", flush=True)
            got = run_boot(kernel, size, vm.CACHE / "bench-lockhold" / f"{kernel}-{r}")
            for writer, s in got["writers"].items():
                runs.append({"kernel": kernel, "round": r, "read_seconds": got["read_seconds"],
                             "writer": writer, **s})
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"size": size, "rounds": args.rounds,
                               **guestbench.provenance(), "runs": runs}, indent=2) + "\n")

    print(f"\n{'writer':14}" + "".join(f" {k + ' max ms':>16}" for k in kernels) + "   ratio")
    for writer in ("other_region", "read_range"):
        maxima = [statistics.median(x["max_ms"] for x in runs
                                    if x["kernel"] == k and x["writer"] == writer)
                  for k in kernels]
        ratio = f"   {maxima[1] / maxima[0]:.2f}" if len(maxima) == 2 and maxima[0] else ""
        print(f"{writer:14}" + "".join(f" {m:16.1f}" for m in maxima) + ratio)
    print(f"\nwritten: {out}")


if __name__ == "__main__":
    main()
