#!/usr/bin/env python3
"""`make bench-lockstat`: which locks cold readers contend on, stock
against pcshare, from /proc/lock_stat.

Builds a third variant of each kernel, lockstat (the default config plus
CONFIG_LOCK_STAT, kernel/config/lockstat.config: a full build of each, no
KASAN, no lockdep proofs), boots each ROUNDS times with CPUS vCPUs and runs
bench/lockstat_guest.py: READERS fio jobs reading at once READERS distinct
cold files, then READERS clones of one cold file (bench-scaling's files),
with /proc/lock_stat cleared before each and read after. Writes
runs/lockstat.json

    {"file_size", "rounds", "cpus", "variant", "kernel_release": {kernel: release},
     "series_sha256", "accel",
     "runs": [{"kernel", "round", "files": "distinct" | "clones", "readers",
               "mib_per_s", "disk_read_bytes", "shared_cache": {counter deltas} | null,
               "contentions", "acquisitions" (of all classes),
               "locks": [the TOP classes with the most contentions:
                         {"class", "contentions", "con_bounces", "wait_total_us",
                          "wait_max_us", "acquisitions", "hold_total_us",
                          "waited_in": {symbol: count}, "holder_in": {symbol: count}}]}]}

What it can and cannot show:
- Statistics are per lock class, not per lock: every address_space's
  i_pages lock is one class, so without a class of its own the cache
  inode's lock and each file's show as one line (the pcshare series gives
  the cache inode's its own).
- Only locks lockdep tracks: waits on a folio's lock (readers of clones
  waiting for one fill) are not in /proc/lock_stat.
- waited_in and holder_in keep at most 4 call sites a class (lockdep's
  LOCKSTAT_POINTS), so they need not add up to its contentions; for a
  lock taken both ways they are on its -R line.
- Lockdep still tracks every lock (without its proofs), and under TCG a
  wait includes the preemption of a vCPU: count contentions more than
  microseconds. With 2 vCPUs at most two readers run at once; the
  throughput here is not bench-scaling's.
"""
import sys

from bench import guestbench
from harness import vm

VARIANT = "lockstat"


def table(runs, top=5):
    """Per boot, kernel and layout, the TOP classes with the most
    contentions: contentions, total wait, acquisitions, where it waited."""
    lines = []
    for r in runs:
        lines.append(f"round {r['round'] + 1}, {r['kernel']}, {r['readers']} readers of "
                     f"{r['files']} files: {r['mib_per_s']} MiB/s, {r['contentions']:,} "
                     f"contentions in {r['acquisitions']:,} acquisitions")
        for lock in r["locks"][:top]:
            points = ", ".join(f"{s} {n}" for s, n in sorted(lock["waited_in"].items(),
                                                             key=lambda p: -p[1])[:3])
            lines.append(f"  {lock['class']:<40} {lock['contentions']:>9,} "
                         f"{lock['wait_total_us'] / 1000:>9.2f} ms {lock['acquisitions']:>11,}"
                         f"  {points}")
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
    kernels = guestbench.built_kernels(args, VARIANT)
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
