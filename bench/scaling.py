#!/usr/bin/env python3
"""`make bench-scaling`: N cold readers at once, stock against pcshare.

Boots the stock and the pcshare kernel (shared_cache) in turn, ROUNDS
times each (interleaved), with CPUS vCPUs; each boot runs
bench/scaling_guest.py: N = 1, 2, 4, 8 fio jobs reading at once, each its
own file, the files N distinct files or N clones of one file, dropped
from memory before every sample. Writes runs/scaling.json

    {"runs": [{"kernel", "files": "distinct" | "clones", "readers",
               "mib_per_s", "samples": [...]}],
     "ratio": {"FILES READERS": pcshare/stock}, "cpus": CPUS,
     "shared_cache": [the guest's counters at the end of each pcshare boot]}

(mib_per_s is the median of the samples) and runs/scaling.png. This
machine gives a guest 2 vCPUs on 2 host cores under TCG: it shows whether
readers of one filesystem slow each other through the cache's one inode,
not how that scales to 64 cores (docs/design.md has that analysis).
"""
from bench import guestbench


def main():
    ap = guestbench.arg_parser(__doc__, "scaling")
    guestbench.sampling_args(ap, "64M", rounds=2, samples=2)
    ap.add_argument("--readers", default="1,2,4,8", help="reader counts")
    ap.add_argument("--cpus", type=int, default=2, help="guest vCPUs")
    args, size = guestbench.parse_sampling(ap, 1 << 20)
    readers = guestbench.positive_list(ap, "--readers", args.readers)
    if args.cpus < 1:
        ap.error("--cpus: positive")
    kernels = guestbench.built_kernels(args)
    disk = size * max(readers) * 2 + (1 << 30)
    fields, lines = guestbench.sampled(
        "scaling", args, kernels,
        ["--size", str(size), "--samples", str(args.samples),
         "--readers", ",".join(map(str, readers))],
        ("files", "readers"), "mib_per_s", disk=str(disk), mem="3G", cpus=args.cpus)
    result = {"file_size": size, "rounds": args.rounds, "cpus": args.cpus, **fields}
    return guestbench.finish("scaling", result, "\n".join(lines), args.out, args.plot)


if __name__ == "__main__":
    raise SystemExit(main())
