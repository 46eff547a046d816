#!/usr/bin/env python3
"""`make bench-hit`: the per-read price of finding shared cached data.

Boots the stock and the pcshare kernel (shared_cache) in turn, ROUNDS times
each (interleaved); each boot runs bench/hit_guest.py: fio psync reads of a
clone whose data is all in memory (stock: the clone's own page cache;
pcshare: the shared extent cache), 4 KiB and 64 KiB random and 1 MiB
sequential. Writes results/hit.json

    {"runs": [{"kernel", "workload", "iops_median", "samples": [...]}],
     "ratio": {workload: pcshare/stock}}

and prints the IOPS ratio per workload. TCG times: compare within one run.
"""
import argparse
import statistics
import sys

import guestbench

TOP = guestbench.TOP


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="256M", help="file size (default 256M)")
    ap.add_argument("--rounds", type=int, default=3, help="boots per kernel (default 3)")
    ap.add_argument("--samples", type=int, default=3, help="samples per boot (default 3)")
    ap.add_argument("--runtime", type=int, default=5, help="seconds per sample (default 5)")
    ap.add_argument("--kernels", default="stock,pcshare")
    ap.add_argument("--out", default=str(TOP / "results/hit.json"))
    args = ap.parse_args()
    size = guestbench.vm.parse_size(args.size)
    if size < (16 << 20) or size % (1 << 20) or min(args.rounds, args.samples,
                                                     args.runtime) < 1:
        ap.error("--size: whole MiB, at least 16M; --rounds, --samples, --runtime: positive")
    kernels = [k for k in args.kernels.split(",") if k]
    for kernel in kernels:
        guestbench.vm.build_kernel(kernel)

    collected, extra = {}, {}
    for r in range(args.rounds):
        for kernel in kernels:
            print(f"== round {r + 1}/{args.rounds}: {kernel}", flush=True)
            got = guestbench.run("hit", kernel, ["--size", str(size), "--samples",
                                                 str(args.samples), "--runtime",
                                                 str(args.runtime)],
                                 disk=str(size * 2 + (1 << 30)), mem="2G")
            for s in got["samples"]:
                if s["disk_read_bytes"]:
                    raise SystemExit(f"bench-hit: {kernel} read {s['disk_read_bytes']} bytes "
                                     f"from disk during {s['workload']}: not a hot cache")
                collected.setdefault((kernel, s["workload"]), []).append(s["iops"])
            extra[kernel] = got["kernel_release"]
    runs = [{"kernel": k, "workload": w, "iops_median": statistics.median(v), "samples": v}
            for (k, w), v in collected.items()]
    ratio = {}
    for w in dict.fromkeys(w for _, w in collected):
        if ("stock", w) in collected and ("pcshare", w) in collected:
            ratio[w] = round(statistics.median(collected["pcshare", w])
                             / statistics.median(collected["stock", w]), 3)
    lines = [f"{'workload':10}" + "".join(f" {k + ' IOPS':>14}" for k in kernels) + "  ratio"]
    for w in dict.fromkeys(w for _, w in collected):
        lines.append(f"{w:10}" + "".join(f" {statistics.median(collected[k, w]):14.0f}"
                                         for k in kernels if (k, w) in collected)
                     + (f"  {ratio[w]:.3f}" if w in ratio else ""))
    result = {"file_size": size, "rounds": args.rounds, "kernel_release": extra,
              **guestbench.provenance(), "runs": runs, "ratio": ratio}
    return guestbench.finish("hit", result, "\n".join(lines), args.out, None)


if __name__ == "__main__":
    sys.exit(main())
