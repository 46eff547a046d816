#!/usr/bin/env python3
"""`make bench-uring`: cold io_uring 4 KiB reads, stock against pcshare.

Boots the stock and the pcshare kernel (shared_cache) in turn, ROUNDS
times each (interleaved); each boot runs bench/uring_guest.py: fio
io_uring random and sequential 4 KiB reads of a file dropped from memory
before every sample, at each queue depth. Writes runs/uring.json

    {"runs": [{"kernel", "pattern", "iodepth", "iops", "samples": [...]}],
     "ratio": {"PATTERN qdN": pcshare/stock},
     "shared_cache": [the guest's counters at the end of each pcshare boot]}

(iops is the median of the samples) and runs/uring.png, and prints the IOPS
ratio per pattern and depth. Compare only within one run: the guests may
run under TCG (the results file says which).
"""
import statistics

import guestbench


def main():
    ap = guestbench.arg_parser(__doc__, "uring")
    guestbench.sampling_args(ap, "512M", rounds=2, samples=2, runtime=8)
    ap.add_argument("--iodepths", default="1,8,32", help="queue depths")
    args = ap.parse_args()
    size = guestbench.vm.parse_size(args.size)
    depths = guestbench.positive_list(ap, "--iodepths", args.iodepths)
    if size < (16 << 20) or min(args.rounds, args.samples, args.runtime) < 1:
        ap.error("--size: at least 16M; --rounds, --samples, --runtime: positive")
    kernels = [k for k in args.kernels.split(",") if k]
    for kernel in kernels:
        guestbench.vm.build_kernel(kernel)

    collected, releases, counters = {}, {}, []
    for r in range(args.rounds):
        for kernel in kernels:
            print(f"== round {r + 1}/{args.rounds}: {kernel}", flush=True)
            got = guestbench.run("uring", kernel,
                                 ["--size", str(size), "--samples", str(args.samples),
                                  "--runtime", str(args.runtime),
                                  "--iodepths", ",".join(map(str, depths))],
                                 disk=str(size * 2 + (1 << 30)), mem="2G")
            for s in got["samples"]:
                collected.setdefault((kernel, s["pattern"], s["iodepth"]), []).append(s["iops"])
            releases[kernel] = got["kernel_release"]
            if got["shared_cache"] is not None:
                counters.append({"kernel": kernel, "round": r, **got["shared_cache"]})
    runs = [{"kernel": k, "pattern": p, "iodepth": d, "iops": statistics.median(v),
             "samples": v} for (k, p, d), v in collected.items()]
    ratio, lines = {}, [f"{'pattern':9} {'qd':>3}" + "".join(f" {k + ' IOPS':>14}"
                                                            for k in kernels) + "  ratio"]
    for p, d in dict.fromkeys((p, d) for _, p, d in collected):
        medians = {k: statistics.median(collected[k, p, d]) for k in kernels
                   if (k, p, d) in collected}
        if {"stock", "pcshare"} <= medians.keys():
            ratio[f"{p} qd{d}"] = round(medians["pcshare"] / medians["stock"], 3)
        lines.append(f"{p:9} {d:3}" + "".join(f" {m:14.0f}" for m in medians.values())
                     + (f"  {ratio[f'{p} qd{d}']:.3f}" if f"{p} qd{d}" in ratio else ""))
    result = {"file_size": size, "rounds": args.rounds, "kernel_release": releases,
              **guestbench.provenance(), "runs": runs, "ratio": ratio,
              "shared_cache": counters}
    return guestbench.finish("uring", result, "\n".join(lines), args.out, args.plot)


if __name__ == "__main__":
    raise SystemExit(main())
