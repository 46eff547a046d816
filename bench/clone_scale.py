#!/usr/bin/env python3
"""`make bench-clone-scale`: how cloning grows with the extents of an image.

Boots each kernel once; the guest (bench/clone_scale_guest.py) makes a
btrfs file of each --extents count of one-block extents and clones it
while fio's 4 KiB readers (buffered, O_DIRECT, mmap) and one writer work
on it: FICLONE on every kernel, FICLONERANGE2 with `pcshare clone`'s
default budget (100 ms) where the kernel has it. Writes
runs/clone-scale.json

    {"runs": [{"kernel", "extents", "method", "clone_seconds", "calls",
               "longest_call_ms", "latency_ms": {JOB: {"max", "p999", "ios"}},
               "memory": {"slab_mib", "dirty_mib", "used_mib"}, ...}],
     "fits": [{"kernel", "method", "metric", "exponent", "at_1e8"}]}

where each fit is a least-squares line through log(metric) against
log(extents) (metric = clone_seconds, reader_max_ms: the longest read of
any reader, writer_max_ms) and at_1e8 what it predicts for the
FICLONERANGE2 proposal's 10^8-extent images; and runs/clone-scale.png
(log axes). A million one-block extents is 4 GiB of data in an 8 GiB
sparse file: the guest's scratch disk is sized for the largest count.
"""
import math

from bench import guestbench
from harness import vm

METRICS = ("clone_seconds", "reader_max_ms", "writer_max_ms")
READERS = ("buffered", "direct", "mmap")
TARGET = 10 ** 8


def metric(run, name):
    if name == "clone_seconds":
        return run["clone_seconds"]
    if name == "writer_max_ms":
        return run["latency_ms"]["writer"]["max"]
    return max(run["latency_ms"][job]["max"] for job in READERS)


def fit(points):
    """Least squares of log10(y) on log10(x): (exponent, prediction at TARGET),
    or None with fewer than two sizes."""
    if len({x for x, _ in points}) < 2:
        return None
    xs = [math.log10(x) for x, _ in points]
    ys = [math.log10(max(y, 1e-3)) for _, y in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = (sum((x - mx) * (y - my) for x, y in zip(xs, ys))
             / sum((x - mx) ** 2 for x in xs))
    return round(slope, 3), round(10 ** (my + slope * (math.log10(TARGET) - mx)), 1)


def fits(runs):
    out = []
    for key in dict.fromkeys((r["kernel"], r["method"]) for r in runs):
        same = [r for r in runs if (r["kernel"], r["method"]) == key]
        for name in METRICS:
            got = fit([(r["extents"], metric(r, name)) for r in same])
            if got:
                out.append({"kernel": key[0], "method": key[1], "metric": name,
                            "exponent": got[0], "at_1e8": got[1]})
    return out


def table(runs):
    lines = ["kernel   method               extents  clone s  calls  longest call ms  "
             "reader max ms  writer max ms  slab MiB  dirty MiB"]
    for r in runs:
        lines.append(f"{r['kernel']:8} {r['method']:20} {r['extents']:>8} "
                     f"{r['clone_seconds']:8.2f} {r['calls']:6} {r['longest_call_ms']:16.0f} "
                     f"{metric(r, 'reader_max_ms'):14.0f} {metric(r, 'writer_max_ms'):14.0f} "
                     f"{r['memory']['slab_mib']:9.1f} {r['memory']['dirty_mib']:10.1f}")
    return lines


def main():
    ap = guestbench.arg_parser(__doc__, "clone-scale")
    ap.add_argument("--extents", default="10000,100000,1000000",
                    help="extent counts of the cloned file")
    args = ap.parse_args()
    counts = guestbench.positive_list(ap, "--extents", args.extents)
    kernels = guestbench.built_kernels(args)
    # 8 KiB of file and 4 KiB of data per extent, the clone's metadata, room.
    disk = max(counts) * 4096 * 3 + (2 << 30)
    runs, releases = [], {}
    for kernel in kernels:
        methods = ["ficlone"] + (["ficlonerange2_100ms"]
                                 if vm.has_clone2(kernel) else [])
        print(f"== {kernel}: {', '.join(methods)} at {args.extents} extents", flush=True)
        got = guestbench.run("clone_scale", kernel,
                             ["--extents", ",".join(map(str, counts)),
                              "--methods", ",".join(methods)],
                             disk=str(disk), mem="3G", timeout=3 * 3600)
        releases[kernel] = got["kernel_release"]
        runs += [{"kernel": kernel, **r} for r in got["runs"]]
    result = {"kernel_release": releases, **guestbench.provenance(), "runs": runs,
              "fits": fits(runs)}
    lines = table(runs) + [""] + [
        f"{f['kernel']} {f['method']} {f['metric']}: grows as extents^{f['exponent']}, "
        f"{f['at_1e8']} at 10^8 extents" for f in result["fits"]]
    return guestbench.finish("clone_scale", result, "\n".join(lines), args.out, args.plot)


if __name__ == "__main__":
    raise SystemExit(main())
