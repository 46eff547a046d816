#!/usr/bin/env python3
"""`make bench-mix`: the seed report's Figures 2-8, stock against pcshare.

Boots the stock and the pcshare kernel (shared_cache) in turn, ROUNDS times
each (interleaved); each boot runs bench/mix_guest.py: fio (libaio on the
page cache, 4 KiB random, four jobs per file) on a parent and a clone
reading and writing in the report's combinations (Figures 2-6), then 1-16
clones each read and written at once (Figures 7 and 8), with the page cache
growth and disk bytes of each run. Writes runs/mix.json

    {"runs": [{"kernel", "figure", "children", "job", "role", "kind",
     "lat_ms": {"mean", "p99", "max"}, "cache_growth_bytes",
     "disk_read_bytes"}], "samples": [every round's rows]}

with medians over rounds in "runs", and runs/mix.png drawn as the report
drew them, plus cache growth and disk bytes against the number of children.
Compare times only within one run: the guests may run under TCG
(the results file says which).
"""
import statistics
import sys

from bench import guestbench
from harness import vm

KEY = ("kernel", "figure", "children", "job", "kind")


def medians(samples):
    groups = {}
    for s in samples:
        groups.setdefault(tuple(s[k] for k in KEY), []).append(s)
    runs = []
    for rows in groups.values():
        first = rows[0]
        runs.append({**{k: first[k] for k in KEY}, "role": first["role"],
                     "lat_ms": {f: statistics.median(r["lat_ms"][f] for r in rows)
                                for f in ("mean", "p99", "max")},
                     **{f: int(statistics.median(r[f] for r in rows))
                        for f in ("cache_growth_bytes", "disk_read_bytes")},
                     "rounds": len(rows)})
    return runs


def table(runs):
    mib = [(title, lambda r, f=field: f"{r[f] / 2**20:.0f}")
           for title, field in (("cache MiB", "cache_growth_bytes"),
                                ("disk MiB", "disk_read_bytes"))]
    return guestbench.side_by_side(
        sorted(runs, key=lambda r: (r["figure"], r["children"], r["job"], r["kind"])),
        ("figure", "children", "job", "kind"),
        [("mean ms", lambda r: f"{r['lat_ms']['mean']:.3f}"), *mib])


def main():
    ap = guestbench.arg_parser(__doc__, "mix")
    ap.add_argument("--size", default="64M", help="parent file size")
    ap.add_argument("--io", default="8M", help="bytes of I/O per fio job")
    ap.add_argument("--children", default="1,2,4,8,16", help="N for Figures 7-8")
    ap.add_argument("--rounds", type=int, default=2, help="boots per kernel")
    ap.add_argument("--engine", default="libaio",
                    help="fio engine: libaio as the report did, or psync (synchronous "
                    "reads, which the shared cache serves today)")
    args = ap.parse_args()
    size, io = vm.parse_size(args.size), vm.parse_size(args.io)
    if size < (16 << 20) or size % (1 << 20) or io <= 0 or io % 4096 or args.rounds < 1:
        ap.error("--size: whole MiB, at least 16M; --io: a positive multiple of 4K; "
                 "--rounds: positive")
    children = max(guestbench.positive_list(ap, "--children", args.children))
    kernels = [k for k in args.kernels.split(",") if k]
    for kernel in kernels:
        vm.build_kernel(kernel)

    samples, releases = [], {}
    for r in range(args.rounds):
        for kernel in kernels:
            print(f"== round {r + 1}/{args.rounds}: {kernel}", flush=True)
            got = guestbench.run("mix", kernel, ["--size", str(size), "--io", str(io),
                                                 "--children", args.children,
                                                 "--engine", args.engine],
                                 disk=str(size * (children + 4) + (1 << 30)), mem="4G")
            samples += [{"kernel": kernel, "round": r, **row} for row in got["runs"]]
            releases[kernel] = got["kernel_release"]
    result = {"file_size": size, "io_per_job": io, "rounds": args.rounds,
              "engine": args.engine,
              "kernel_release": releases, **guestbench.provenance(),
              "runs": medians(samples), "samples": samples}
    return guestbench.finish("mix", result, table(result["runs"]), args.out, args.plot)


if __name__ == "__main__":
    sys.exit(main())
