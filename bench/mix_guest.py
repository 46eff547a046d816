#!/usr/bin/env python3
"""The seed report's Figures 2-8, inside a guest: fio on a parent file and
its reflink clones ("children") at once.

For each figure a fresh parent is cloned from a written base file (so all
start sharing every extent on disk), its children are cloned from it,
caches are dropped, and one fio run (bench/jobs/mix-*.fio: libaio on the
page cache, 4 KiB random, IO bytes per job) measures completion latency per
job, with the page cache growth and disk bytes of the whole run:
  2 parent read,  child read       5 parent write, child write
  3 parent write, child read       6 parent read+write, child read+write
  4 parent read,  child write      7/8 N children, each read and written
"""
import json
import os
from pathlib import Path

from harness import fsutil

JOBS = Path(__file__).resolve().parent / "jobs"
PAIRS = {2: ("randread", "randread"), 3: ("randwrite", "randread"),
         4: ("randread", "randwrite"), 5: ("randwrite", "randwrite"),
         6: ("randrw", "randrw")}
MiB = 1 << 20


def latency(jobs, kind):
    """Mean of the jobs' mean completion latencies, and the worst p99 and max,
    in ms; None when no job did that kind of I/O."""
    stats = [j[kind]["clat_ns"] for j in jobs if j[kind]["io_bytes"]]
    if not stats:
        return None
    return {"mean": round(sum(s["mean"] for s in stats) / len(stats) / 1e6, 4),
            "p99": round(max(s.get("percentile", {}).get("99.000000", 0) for s in stats) / 1e6, 4),
            "max": round(max(s["max"] for s in stats) / 1e6, 4)}


def prepare(mnt, children):
    """A fresh parent cloned from the base and `children` clones of it."""
    for old in mnt.glob("run"):
        fsutil.run("rm", "-rf", str(old))
    run = mnt / "run"
    run.mkdir()
    fsutil.run("cp", "--reflink=always", str(mnt / "base"), str(run / "parent"))
    for i in range(children):
        fsutil.run("cp", "--reflink=always", str(run / "parent"), str(run / f"child.{i}"))
    fsutil.run("btrfs", "filesystem", "sync", str(mnt))
    fsutil.drop_caches()
    fsutil.load_fio(mnt)
    return run


def main():
    ap = fsutil.bench_arg_parser(__doc__)
    ap.add_argument("--io", type=int, default=8 * MiB, help="bytes of I/O per job")
    ap.add_argument("--children", default="1,2,4,8,16", help="N for Figures 7 and 8")
    ap.add_argument("--figures", default="2,3,4,5,6,7",
                    help="figures to run, of 2-7 (7 also gives Figure 8: its writes)")
    ap.add_argument("--engine", default="libaio",
                    help="fio engine; the report used libaio on the page cache")
    args = ap.parse_args()
    figures = [int(f) for f in args.figures.split(",")]
    if not set(figures) <= set(PAIRS) | {7}:
        ap.error(f"--figures: choose from 2-7, got {args.figures!r}")
    meter = fsutil.Meter(args.device)
    runs = []
    with fsutil.bench_btrfs(args) as mnt:
        fsutil.write_patterned(mnt / "base", args.size, "mix")
        base_env = dict(os.environ, SIZE=str(args.size), IO=str(args.io),
                        ENGINE=args.engine)

        def measure(figure, job, children, env, roles):
            run = prepare(mnt, children)
            jobs = []
            row = meter.measure(lambda: jobs.extend(fsutil.run_fio(JOBS / job, dict(env, DIR=str(run)))))
            for jobname, role in roles.items():
                mine = [j for j in jobs if j["jobname"] == jobname]
                for kind in ("read", "write"):
                    lat = latency(mine, kind)
                    if lat:
                        fig = 8 if figure == 7 and kind == "write" else figure
                        runs.append({"figure": fig, "children": children, "job": jobname,
                                     "role": role, "kind": kind, "lat_ms": lat, **row})
                        print(f"mix: fig {fig} N={children:2} {jobname:11} {kind:5} "
                              f"mean {lat['mean']:8.3f} ms  p99 {lat['p99']:8.3f}  "
                              f"cache +{row['cache_growth_bytes'] >> 20} MiB  "
                              f"disk {row['disk_read_bytes'] >> 20} MiB", flush=True)

        for figure in figures:
            if figure in PAIRS:
                parent_rw, child_rw = PAIRS[figure]
                measure(figure, "mix-pair.fio", 1,
                        dict(base_env, PARENT_RW=parent_rw, CHILD_RW=child_rw),
                        {"parent": "parent", "child": "child"})
            elif figure == 7:   # Figure 8 is the same runs' writes
                for n in (int(c) for c in args.children.split(",")):
                    measure(7, "mix-children.fio", n, dict(base_env, CHILDREN=str(n)),
                            {"child-read": "child", "child-write": "child"})
    Path(args.json).write_text(json.dumps(
        {"file_size": args.size, "io_per_job": args.io, "engine": args.engine,
         "kernel_release": os.uname().release,
         "mount_options": args.mount_options, "runs": runs}, indent=2) + "\n")


if __name__ == "__main__":
    main()
