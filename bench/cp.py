#!/usr/bin/env python3
"""`make bench-cp`: the FICLONERANGE2 proposal's experiment, with cp.

fio 4 KiB random reads and writes (one randrw job, O_DIRECT by default) on
a btrfs image of --extents one-block extents while `cp --reflink=always`
clones it: Debian's /bin/cp (one FICLONE, both files locked throughout)
against cp with userspace/coreutils/'s patch (FICLONERANGE2 in steps of
--budget-ms, cp's default 100 ms), on the pcshare kernel; Debian's cp on
the stock kernel is the reference row. Every boot also runs fio alone (the
baseline). Reports clone time and fio's max and mean read and write
latency, as the proposal's table does. Writes runs/cp.json

    {"extents", "file_size", "budget_ms", "accel", "series_sha256",
     "runs": [{"kernel", "cp": "baseline"|"stock"|"patched",
               "clone_seconds", "latency_ms": {"read"|"write":
                                               {"max_ms", "mean_ms", "ios"}}}]}

runs/cp.md (the table) and runs/cp.png. Needs `make cp` (the patched cp);
boots the kernels already built (--build builds them first).
"""
import os
import subprocess
import sys
from pathlib import Path

from bench import guestbench
from bench.tables import cp_rows
from harness import vm

TOP = guestbench.TOP


def main():
    ap = guestbench.arg_parser(__doc__, "cp")
    ap.add_argument("--extents", type=int, default=100000, help="extents in the image")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each cp per kernel")
    ap.add_argument("--budget-ms", type=int, help="patched cp's --reflink-budget "
                    "(default: cp's own, 100)")
    ap.add_argument("--cp", help="the patched cp (default: scripts/coreutils.sh path)")
    ap.add_argument("--build", action="store_true", help="build the kernels first")
    ap.add_argument("--guest-args", default="", help="more bench/cp_guest.py options, "
                    "e.g. '--direct 0 --rate-iops 50 --baseline 5'")
    args = ap.parse_args()
    if args.extents < 1 or args.repeat < 1 or (args.budget_ms or 0) < 0:
        ap.error("--extents and --repeat must be positive, --budget-ms not negative")
    patched = args.cp or subprocess.run([str(TOP / "scripts/coreutils.sh"), "path"],
                                        check=True, capture_output=True,
                                        text=True).stdout.strip()
    kernels = [k for k in args.kernels.split(",") if k]
    if args.build:
        for kernel in kernels:
            vm.build_kernel(kernel)
    for kernel in kernels:
        if not vm.bzimage_for(kernel, "default").is_file():
            ap.error(f"no {kernel} kernel built: run with --build (or make kernels)")
    if any(map(vm.has_clone2, kernels)) and not os.access(patched, os.X_OK):
        ap.error(f"no patched cp at {patched}: run `make cp` first")

    result = {"extents": None, "file_size": None, "budget_ms": args.budget_ms,
              **guestbench.provenance(), "runs": []}
    for kernel in kernels:
        guest = ["--extents", str(args.extents), "--repeat", str(args.repeat),
                 *args.guest_args.split()]
        if vm.has_clone2(kernel):
            guest += ["--patched-cp", patched]
            if args.budget_ms is not None:
                guest += ["--budget-ms", str(args.budget_ms)]
        print(f"== {kernel}: {'stock and patched' if vm.has_clone2(kernel) else 'stock'} cp",
              flush=True)
        # A plain mount on both kernels: the clone, not the cache, is measured.
        got = guestbench.run("cp", kernel, guest, disk="8G", mem="3G", timeout=7200,
                             shared_cache="")
        result["extents"], result["file_size"] = got["extents"], got["file_size"]
        result["runs"] += [{"kernel": kernel, **run} for run in got["runs"]]
    table = "\n".join(cp_rows(result))
    status = guestbench.finish("cp", result, table, args.out, args.plot)
    md = Path(args.out).with_suffix(".md")
    md.write_text(table + "\n")
    print(f"written: {md}")
    return status


if __name__ == "__main__":
    sys.exit(main())
