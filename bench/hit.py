#!/usr/bin/env python3
"""`make bench-hit`: the per-read price of finding shared cached data.

Boots the stock and the pcshare kernel (shared_cache) in turn, ROUNDS times
each (interleaved); each boot runs bench/hit_guest.py: fio psync reads of a
clone whose data is all in memory (stock: the clone's own page cache;
pcshare: the shared extent cache), 4 KiB and 64 KiB random and 1 MiB
sequential. Writes runs/hit.json

    {"runs": [{"kernel", "workload", "iops_median", "samples": [...]}],
     "ratio": {workload: pcshare/stock},
     "shared_cache": [the guest's counters at the end of each pcshare boot],
     "cold_samples": [samples that read the disk: the run fails if any]}

and runs/hit.png, and prints the IOPS ratio per workload. Compare times only within one run: the guests may
run under TCG (the results file says which).
"""
import statistics
import sys

from bench import guestbench
from harness import vm


def main():
    ap = guestbench.arg_parser(__doc__, "hit")
    guestbench.sampling_args(ap, "256M", rounds=3, samples=3, runtime=5)
    args = ap.parse_args()
    size = vm.parse_size(args.size)
    if size < (16 << 20) or size % (1 << 20) or min(args.rounds, args.samples,
                                                     args.runtime) < 1:
        ap.error("--size: whole MiB, at least 16M; --rounds, --samples, --runtime: positive")
    kernels = [k for k in args.kernels.split(",") if k]
    for kernel in kernels:
        vm.build_kernel(kernel)

    collected, extra, counters, cold = {}, {}, [], []
    for r in range(args.rounds):
        for kernel in kernels:
            print(f"== round {r + 1}/{args.rounds}: {kernel}", flush=True)
            got = guestbench.run("hit", kernel, ["--size", str(size), "--samples",
                                                 str(args.samples), "--runtime",
                                                 str(args.runtime)],
                                 disk=str(size * 2 + (1 << 30)), mem="2G")
            for s in got["samples"]:
                if s["disk_read_bytes"]:
                    cold.append(f"{kernel} round {r + 1} read {s['disk_read_bytes']} bytes "
                                f"from disk during {s['workload']}")
                collected.setdefault((kernel, s["workload"]), []).append(s["iops"])
            extra[kernel] = got["kernel_release"]
            if got["shared_cache"] is not None:
                counters.append({"kernel": kernel, "round": r, **got["shared_cache"]})
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
              **guestbench.provenance(), "runs": runs, "ratio": ratio,
              "shared_cache": counters, "cold_samples": cold}
    status = guestbench.finish("hit", result, "\n".join(lines), args.out, args.plot)
    if cold:
        print("bench-hit: not a hot cache, the ratios do not hold:\n  " + "\n  ".join(cold),
              file=sys.stderr)
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
