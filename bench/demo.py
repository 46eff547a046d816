#!/usr/bin/env python3
"""`make demo`: the seed experiment on the stock and pcshare kernels.

For each kernel: boot a guest, make a btrfs on a scratch disk, write a file,
drop caches, read it cold and hot, clone it and read the clone twice, then
read N more clones of the cached file. Prints a side-by-side table and
writes runs/demo.json (format in docs/benchmarks.md). With --compress ALG the
btrfs is mounted with compress-force=ALG on both kernels (compress=ALG's
heuristic stored the demo's data uncompressed), and the results go to
runs/demo-ALG.json.
"""
import argparse
import json
import sys
from pathlib import Path

from bench import guestbench
from harness import vm
from harness.results import run_file

STEPS = ["read_source_cold", "read_source_hot", "read_clone_first",
         "read_clone_again", "read_n_clones"]


def run_kernel(kernel, size, clones, mem, compress):
    vm.build_kernel(kernel)
    out_dir = vm.CACHE / "demo" / kernel
    command = [sys.executable, "-m", "bench.demo_guest", "--device", "/dev/vda",
               "--size", str(size), "--clones", str(clones),
               "--json", "/run/pcshare/out/demo.json"]
    options = [o for o in ("shared_cache" if vm.has_shared_cache(kernel) else "",
                           f"compress-force={compress}" if compress else "") if o]
    if options:
        command += ["--mount-options", ",".join(options)]
    disk = 2 * size + (2 << 30)
    result = vm.run_vm(command, kernel=kernel, mem=mem, disks=[str(disk)],
                       timeout=1800 + size * (clones + 4) / (10 << 20), out_dir=out_dir)
    if not result.ok:
        raise SystemExit(f"demo: {kernel} guest failed: {result.summary()}")
    rows = json.loads((out_dir / "demo.json").read_text())
    return [{"kernel": kernel, **row} for row in rows]


def table(runs, kernels):
    by = {(r["kernel"], r["step"]): r for r in runs}
    head = f"{'step':18} {'n':>3}" + "".join(
        f" | {k + ' s':>11} {'disk MiB':>9} {'cache MiB':>10} {'shared MiB':>10}"
        for k in kernels)
    lines = [head, "-" * len(head)]
    for step in STEPS:
        cells = ""
        n = 1
        for k in kernels:
            r = by.get((k, step))
            if r is None:
                cells += f" | {'-':>11} {'-':>9} {'-':>10} {'-':>10}"
                continue
            n = r["n"]
            shared = r.get("shared_cache")
            shared = f"{shared['resident_bytes'] / 2**20:10.0f}" if shared else f"{'-':>10}"
            cells += (f" | {r['seconds']:11.3f} {r['disk_read_bytes'] / 2**20:9.0f}"
                      f" {r['cache_growth_bytes'] / 2**20:10.0f} {shared}")
        lines.append(f"{step:18} {n:>3}{cells}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1G", help="file size (default 1G; e.g. 256M)")
    ap.add_argument("--clones", type=int, default=8, help="N for read_n_clones (default 8)")
    ap.add_argument("--kernels", default="stock,pcshare", help="comma-separated (default stock,pcshare)")
    ap.add_argument("--mem", help="guest memory (default: enough to cache every clone)")
    ap.add_argument("--compress", choices=["zlib", "lzo", "zstd"],
                    help="mount with compress-force=ALG (default: no compression)")
    ap.add_argument("--out", help="results file (default runs/demo.json, "
                    "or runs/demo-ALG.json with --compress)")
    args = ap.parse_args()
    args.out = args.out or run_file(f"demo-{args.compress}.json" if args.compress
                                   else "demo.json")

    size = vm.parse_size(args.size)
    if size <= 0 or size % 4096:
        ap.error("--size must be a positive multiple of 4 KiB")
    if args.clones < 1:
        ap.error("--clones must be at least 1")
    kernels = [k for k in args.kernels.split(",") if k]
    mem = args.mem or str(min(size * (args.clones + 3) + (1 << 30), 20 << 30))

    runs = []
    for kernel in kernels:
        print(f"== demo on {kernel}: {size >> 20} MiB file, {args.clones} clones"
              f"{', compress=' + args.compress if args.compress else ''}", flush=True)
        runs += run_kernel(kernel, size, args.clones, mem, args.compress)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"file_size": size, "clones": args.clones,
                               "compress": args.compress, **guestbench.provenance(),
                               "runs": runs}, indent=2) + "\n")
    print()
    print(table(runs, kernels))
    print(f"\nwritten: {out}")


if __name__ == "__main__":
    main()
