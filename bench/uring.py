#!/usr/bin/env python3
"""`make bench-uring`: cold io_uring 4 KiB reads, stock against pcshare.

Boots the stock and the pcshare kernel (shared_cache) in turn, ROUNDS
times each (interleaved); each boot runs bench/uring_guest.py: fio
io_uring random and sequential 4 KiB reads of a file dropped from memory
before every sample, at each queue depth. Writes runs/uring.json

    {"runs": [{"kernel", "pattern", "iodepth", "iops", "samples": [...]}],
     "ratio": {"PATTERN IODEPTH": pcshare/stock},
     "shared_cache": [the guest's counters at the end of each pcshare boot]}

(iops is the median of the samples) and runs/uring.png, and prints the IOPS
ratio per pattern and depth. Compare only within one run: the guests may
run under TCG (the results file says which).
"""
from bench import guestbench


def main():
    ap = guestbench.arg_parser(__doc__, "uring")
    guestbench.sampling_args(ap, "512M", rounds=2, samples=2, runtime=8)
    ap.add_argument("--iodepths", default="1,8,32", help="queue depths")
    args, size = guestbench.parse_sampling(ap, 16 << 20)
    depths = guestbench.positive_list(ap, "--iodepths", args.iodepths)
    kernels = guestbench.built_kernels(args)

    fields, lines = guestbench.sampled(
        "uring", args, kernels,
        ["--size", str(size), "--samples", str(args.samples), "--runtime", str(args.runtime),
         "--iodepths", ",".join(map(str, depths))],
        ("pattern", "iodepth"), "iops", disk=str(size * 2 + (1 << 30)), mem="2G")
    result = {"file_size": size, "rounds": args.rounds, **fields}
    return guestbench.finish("uring", result, "\n".join(lines), args.out, args.plot)


if __name__ == "__main__":
    raise SystemExit(main())
