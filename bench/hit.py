#!/usr/bin/env python3
"""`make bench-hit`: the per-read price of finding shared cached data.

Boots the stock and the pcshare kernel (shared_cache) in turn, ROUNDS times
each (interleaved); each boot runs bench/hit_guest.py: fio psync reads of a
clone whose data is all in memory (stock: the clone's own page cache;
pcshare: the shared extent cache), 4 KiB and 64 KiB random and 1 MiB
sequential, each sample paired with one of a NOCOW file that takes the
page cache path on both kernels. Writes runs/hit.json

    {"clock": "icount shift=3" | "host" (--clock),
     "runs": [{"kernel", "workload", "iops_median", "samples": [...] (the clone's),
               "plain_iops_median", "plain_samples": [...]}],
     "ratio": {workload: pcshare/stock},
     "paired": {workload: {kernel: {"median", "ci95": [low, high],
                                    "ratios": [clone/plain IOPS per pair]}}},
     "shared_cache": [the guest's counters at the end of each pcshare boot],
     "cold_samples": [samples that read the disk: the run fails if any],
     "misrouted": [pairs whose reads took the wrong path: fails if any]}

and runs/hit.png, and prints the IOPS ratio per workload. Under TCG the
guest's clock counts instructions by default (--clock), so IOPS are per
instruction, not host time: repeatable to a few tenths of a percent,
blind to what an instruction costs (cache misses, atomics). "ratio"
compares medians across boots of the two kernels; "paired" compares a
clone's reads with the plain file's in the same boot (on pcshare: a cache
hit against a page cache hit; on stock: two page cache hits, the
control), with a bootstrap 95% interval of the median. Compare times only
within one run (the results file says which clock and accelerator it
had).
"""
import random
import shutil
import statistics
import sys
from pathlib import Path

from bench import guestbench
from harness import vm

ICOUNT_SHIFT = 3  # 8 ns an instruction: about the speed TCG runs here


def median_interval(values, resamples=10000):
    """A percentile bootstrap 95% interval of the median of VALUES (seeded,
    so a results file can be recomputed)."""
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(values, k=len(values)))
                     for _ in range(resamples))
    return [round(medians[int(resamples * 0.025)], 3),
            round(medians[int(resamples * 0.975) - 1], 3)]


def pair_up(kernel, round_, samples, ratios, misrouted):
    """Add the clone/plain IOPS ratio of each pair in one boot's SAMPLES to
    RATIOS[workload][kernel]; note in MISROUTED any pair that lacks a side,
    and on the cache's kernel any whose clone was not served by the cache or
    whose plain file was."""
    pairs = {}
    for s in samples:
        pairs.setdefault((s["workload"], s["pair"]), {})[s["file"]] = s
    for (workload, _), pair in pairs.items():
        if set(pair) != {"clone", "plain"}:
            misrouted.append(f"{kernel} round {round_} {workload}: a sample of "
                             f"{', '.join(sorted(pair))} alone")
            continue
        clone, plain = pair["clone"], pair["plain"]
        served = clone["cache_bytes_served"], plain["cache_bytes_served"]
        if served != (None, None) and not (served[0] and not served[1]):
            misrouted.append(f"{kernel} round {round_} {workload}: the cache served "
                             f"{served[0]} bytes of the clone, {served[1]} of the plain file")
        ratios.setdefault(workload, {}).setdefault(kernel, []).append(
            round(clone["iops"] / plain["iops"], 4))


def main():
    ap = guestbench.arg_parser(__doc__, "hit")
    guestbench.sampling_args(ap, "256M", rounds=2, samples=3, runtime=3)
    ap.add_argument("--clock", choices=("auto", "icount", "host"), default="auto",
                    help="icount (TCG only): the guest's clock counts instructions, 8 ns "
                         "each (QEMU -icount shift=3), so samples do not vary with what "
                         "else the host runs; host: real time, which under TCG varies by "
                         "a quarter between boots and samples (then use more rounds); "
                         "auto: icount under TCG, host under KVM; --runtime is in the "
                         "guest's seconds either way")
    ap.add_argument("--profile", action="store_true",
                    help="also profile each boot's 4 KiB reads of the clone and the plain "
                         "file with perf (cpu-clock samples, kernel and user symbols): "
                         "runs/hit-profile-KERNEL-FILE.txt, the last boot's")
    args = ap.parse_args()
    if args.clock == "auto":
        args.clock = "host" if vm.kvm_usable() else "icount"
    if args.clock == "icount" and vm.kvm_usable():
        ap.error("--clock icount: QEMU counts instructions only under TCG, and this "
                 "machine uses KVM: use --clock host")
    icount = ICOUNT_SHIFT if args.clock == "icount" else None
    if args.profile and not shutil.which("perf"):
        ap.error("--profile: no perf here, and the guests run this machine's programs: "
                 "apt-get install linux-perf")
    size = vm.parse_size(args.size)
    if size < (16 << 20) or size % (1 << 20) or min(args.rounds, args.samples,
                                                     args.runtime) < 1:
        ap.error("--size: whole MiB, at least 16M; --rounds, --samples, --runtime: positive")
    kernels = [k for k in args.kernels.split(",") if k]
    for kernel in kernels:
        vm.build_kernel(kernel)

    iops = {"clone": {}, "plain": {}}  # file -> (kernel, workload) -> samples
    extra, counters, cold, pair_ratios, misrouted = {}, [], [], {}, []
    for r in range(args.rounds):
        for kernel in kernels:
            print(f"== round {r + 1}/{args.rounds}: {kernel}", flush=True)
            got = guestbench.run("hit", kernel, ["--size", str(size), "--samples",
                                                 str(args.samples), "--runtime",
                                                 str(args.runtime)]
                                 + ["--profile"] * args.profile,
                                 disk=str(size * 3 + (1 << 30)), mem="2G",
                                 icount=icount)
            for s in got["samples"]:
                if s["disk_read_bytes"]:
                    cold.append(f"{kernel} round {r + 1} read {s['disk_read_bytes']} bytes "
                                f"from disk during {s['workload']} of {s['file']}")
                iops[s["file"]].setdefault((kernel, s["workload"]), []).append(s["iops"])
            pair_up(kernel, r + 1, got["samples"], pair_ratios, misrouted)
            if args.profile:
                for file in ("clone", "plain"):
                    report = guestbench.out_dir("hit", kernel) / f"hit-profile-{file}.txt"
                    target = Path(args.out).parent / f"hit-profile-{kernel}-{file}.txt"
                    shutil.copyfile(report, target)
                    print(f"written: {target}")
            extra[kernel] = got["kernel_release"]
            if got["shared_cache"] is not None:
                counters.append({"kernel": kernel, "round": r, **got["shared_cache"]})
    clone, plain = iops["clone"], iops["plain"]
    runs = [{"kernel": k, "workload": w, "iops_median": statistics.median(v), "samples": v,
             "plain_iops_median": statistics.median(plain[k, w]) if (k, w) in plain else None,
             "plain_samples": plain.get((k, w), [])}
            for (k, w), v in clone.items()]
    ratio = {}
    for w in dict.fromkeys(w for _, w in clone):
        if ("stock", w) in clone and ("pcshare", w) in clone:
            ratio[w] = round(statistics.median(clone["pcshare", w])
                             / statistics.median(clone["stock", w]), 3)
    paired = {w: {k: {"median": round(statistics.median(v), 3), "ci95": median_interval(v),
                      "ratios": v} for k, v in per_kernel.items()}
              for w, per_kernel in pair_ratios.items()}
    lines = [f"{'workload':10}" + "".join(f" {k + ' IOPS':>14}" for k in kernels) + "  ratio"
             + "".join(f"  {k + ' clone/plain (95%)':>28}" for k in kernels)]
    for w in dict.fromkeys(w for _, w in clone):
        lines.append(f"{w:10}" + "".join(f" {statistics.median(clone[k, w]):14.0f}"
                                         for k in kernels if (k, w) in clone)
                     + (f"  {ratio[w]:.3f}" if w in ratio else "")
                     + "".join(f"  {p['median']:>14.3f} ({p['ci95'][0]:.3f}-{p['ci95'][1]:.3f})"
                               for p in paired.get(w, {}).values()))
    clock = "host" if icount is None else f"icount shift={icount}"
    result = {"file_size": size, "rounds": args.rounds, "kernel_release": extra,
              **guestbench.provenance(), "clock": clock, "runs": runs, "ratio": ratio,
              "paired": paired, "shared_cache": counters, "cold_samples": cold,
              "misrouted": misrouted}
    status = guestbench.finish("hit", result, "\n".join(lines), args.out, args.plot)
    for problem, what in (("not a hot cache", cold), ("pairs on the wrong path", misrouted)):
        if what:
            print(f"bench-hit: {problem}, the ratios do not hold:\n  " + "\n  ".join(what),
                  file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
