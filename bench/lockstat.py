#!/usr/bin/env python3
"""`make bench-lockstat`: which locks cold readers contend on, stock
against pcshare, from /proc/lock_stat.

Builds the lockstat variant of each kernel (the default config plus
CONFIG_LOCK_STAT, kernel/config/lockstat.config; no KASAN, no lockdep
proofs), boots each ROUNDS times with CPUS vCPUs and runs
bench/lockstat_guest.py: READERS fio jobs reading at once READERS
distinct cold files, then READERS clones of one cold file (bench-scaling's
files), with /proc/lock_stat cleared before each and read after. Writes
runs/lockstat.json

    {"runs": [{"kernel", "round", "files": "distinct" | "clones", "readers",
               "mib_per_s", "contentions", "acquisitions",
               "locks": [{"class", "contentions", "con_bounces",
                          "wait_total_us", "wait_max_us", "acquisitions",
                          "hold_total_us", "waited_in": {symbol: count},
                          "holder_in": {symbol: count}}]}]}

Lock statistics are per lock class: every address_space's i_pages lock is
one class (&xa->xa_lock#N), so the cache inode's lock and every file's own
show as one line; what tells them apart is the kernel (pcshare's reads
insert into the cache inode, stock's into each file) and the call sites
that waited (waited_in) and held the lock meanwhile (holder_in). Lock statistics slow every lock operation: the throughput here is
not bench-scaling's. With 2 vCPUs at most two readers run at once.
"""
import sys

from bench import guestbench
from harness import vm

VARIANT = "lockstat"


def table(runs, top=5):
    """Per kernel and layout, the TOP classes with the most contentions."""
    lines = ["kernel  files  readers  class  contentions  wait ms  acquisitions  waited in"]
    for r in runs:
        lines.append(f"{r['kernel']}  {r['files']}  {r['readers']}  (all classes)  "
                     f"{r['contentions']}  -  {r['acquisitions']}")
        for lock in r["locks"][:top]:
            points = ", ".join(f"{s} {n}" for s, n in sorted(lock["waited_in"].items(),
                                                             key=lambda p: -p[1])[:3])
            lines.append(f"    {lock['class']}  {lock['contentions']}  "
                         f"{lock['wait_total_us'] / 1000:.2f}  {lock['acquisitions']}  {points}")
    return lines


def main():
    ap = guestbench.arg_parser(__doc__, "lockstat", plot=False)
    ap.add_argument("--size", default="64M", help="size of each file")
    ap.add_argument("--rounds", type=int, default=1, help="boots per kernel")
    ap.add_argument("--readers", type=int, default=8, help="readers at once")
    ap.add_argument("--cpus", type=int, default=2, help="guest vCPUs")
    ap.add_argument("--top", type=int, default=10, help="lock classes kept per run")
    args = ap.parse_args()
    size = vm.parse_size(args.size)
    if size < (1 << 20) or min(args.rounds, args.readers, args.cpus, args.top) < 1:
        ap.error("--size: at least 1 MiB; --rounds, --readers, --cpus, --top: positive")
    kernels = [k for k in args.kernels.split(",") if k]
    for kernel in kernels:
        vm.build_kernel(kernel, VARIANT)
    runs, releases = [], {}
    for r in range(args.rounds):
        for kernel in kernels:
            print(f"== round {r + 1}/{args.rounds}: {kernel}/{VARIANT}", flush=True)
            got = guestbench.run("lockstat", kernel,
                                 ["--size", str(size), "--readers", str(args.readers),
                                  "--top", str(args.top)],
                                 disk=str(size * args.readers * 2 + (1 << 30)), mem="3G",
                                 cpus=args.cpus, variant=VARIANT)
            releases[kernel] = got["kernel_release"]
            runs += [{"kernel": kernel, "round": r, **run} for run in got["runs"]]
    result = {"file_size": size, "rounds": args.rounds, "cpus": args.cpus,
              "variant": VARIANT, "kernel_release": releases, **guestbench.provenance(),
              "runs": runs}
    return guestbench.finish("lockstat", result, "\n".join(table(runs)), args.out, None)


if __name__ == "__main__":
    sys.exit(main())
