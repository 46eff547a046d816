#!/usr/bin/env python3
"""Guest side of `make bench-cp`: the FICLONERANGE2 proposal's experiment.

On a fresh btrfs, make an "image" of --extents one-block extents; then, per
run, reflink it to src, start a fio 4 KiB random read/write job on src, and
after --lead seconds clone src to dst with `CP --reflink=always` (stock cp:
one FICLONE; patched cp: FICLONERANGE2 in budgeted steps), let fio run
--tail seconds more and report the clone time and fio's read and write
latency (max and mean, submission to completion). The baseline run is fio
alone for --baseline seconds. Runs inside a pcshare VM on a scratch disk."""
import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness import fsutil

TOP = Path(__file__).resolve().parent.parent


def log(msg):
    print(f"cp_guest: {msg}", file=sys.stderr, flush=True)


def fio_command(path, size, out_json, args):
    return ["fio", "--output-format=json", f"--output={out_json}", "--name=randrw",
            "--rw=randrw", "--bs=4k", f"--size={size}", f"--filename={path}",
            "--ioengine=psync", f"--direct={args.direct}", f"--rate_iops={args.rate_iops}",
            "--time_based", "--runtime=36000"]


def fio_latencies(fio_json):
    text = Path(fio_json).read_text()
    job = json.loads(text[text.index("{"):])["jobs"][0]  # after fio's signal notice
    return {side: {"max_ms": round(job[side]["lat_ns"]["max"] / 1e6, 3),
                   "mean_ms": round(job[side]["lat_ns"]["mean"] / 1e6, 3),
                   "ios": job[side]["total_ios"]} for side in ("read", "write")}


def wait_for_jobs(fio, timeout=120):
    """Until fio has forked its job process (it handles SIGINT from then
    on, with a report; before, SIGINT kills it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and fio.poll() is None:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == fio.pid:
                return
        time.sleep(0.05)
    raise SystemExit(f"cp_guest: fio did not start its job (exit {fio.poll()})")


def run_one(mnt, name, argv, args):
    """One run: fio on a fresh reflink of the image, cp ARGV (None: no
    clone) in its middle. Returns the run's record."""
    src, dst = mnt / "src", mnt / "dst"
    for f in (src, dst):
        f.unlink(missing_ok=True)
    fsutil.clone_file(mnt / "image", src)
    os.sync()
    fsutil.drop_caches()
    size = src.stat().st_size
    fio_json = Path("/run") / f"fio-{name}.json"
    fio = subprocess.Popen(fio_command(src, size, fio_json, args),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_for_jobs(fio)
    time.sleep(args.lead)
    seconds = None
    if argv is None:
        time.sleep(args.baseline)
    else:
        t0 = time.monotonic()
        res = subprocess.run([*argv, "--reflink=always", str(src), str(dst)],
                             capture_output=True, text=True)
        seconds = round(time.monotonic() - t0, 3)
    time.sleep(args.tail)
    fio.send_signal(signal.SIGINT)
    _, fio_err = fio.communicate(timeout=600)
    if argv is not None and (res.returncode or dst.stat().st_size != size):
        raise SystemExit(f"cp_guest: {name}: {argv[0]} failed ({res.returncode}): "
                         f"{res.stderr.strip()}")
    # Stopped by SIGINT, fio exits 128 after writing a complete report.
    if fio.returncode not in (0, 128) or not fio_json.exists():
        raise SystemExit(f"cp_guest: fio failed ({fio.returncode}): {fio_err[-500:]}")
    lat = fio_latencies(fio_json)
    log(f"{name}: " + (f"clone {seconds} s; " if argv else "fio alone; ") + ", ".join(
        f"{side} max {v['max_ms']:.1f} mean {v['mean_ms']:.1f} ms" for side, v in lat.items()))
    return {"cp": name, "clone_seconds": seconds, "latency_ms": lat}


def main():
    ap = fsutil.bench_arg_parser(__doc__, size=False)
    ap.formatter_class = argparse.RawDescriptionHelpFormatter
    ap.add_argument("--extents", type=int, default=100000)
    ap.add_argument("--stock-cp", default="/bin/cp")
    ap.add_argument("--patched-cp", help="the patched cp (runs only where the kernel has "
                    "FICLONERANGE2); omit for stock cp alone")
    ap.add_argument("--budget-ms", type=int, help="patched cp's --reflink-budget "
                    "(default: cp's own, 100)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each cp")
    ap.add_argument("--lead", type=float, default=2.0, help="seconds of fio before the clone")
    ap.add_argument("--tail", type=float, default=1.0, help="seconds of fio after it")
    ap.add_argument("--baseline", type=float, default=10.0, help="seconds of fio alone")
    ap.add_argument("--direct", type=int, choices=(0, 1), default=1, help="fio's O_DIRECT")
    ap.add_argument("--rate-iops", type=int, default=100, help="fio's rate per direction")
    args = ap.parse_args()

    cps = {"stock": [args.stock_cp]}
    if args.patched_cp:
        budget = [] if args.budget_ms is None else [f"--reflink-budget={args.budget_ms}"]
        cps["patched"] = [args.patched_cp, *budget]
    with fsutil.bench_btrfs(args) as mnt:
        log(f"making an image of {args.extents} extents")
        size = fsutil.write_extents(mnt / "image", args.extents)
        extents = len(fsutil.fiemap_all(mnt / "image"))
        log(f"{extents} extents, {size} bytes")
        runs = [run_one(mnt, "baseline", None, args)]
        runs += [run_one(mnt, name, argv, args)
                 for _ in range(args.repeat) for name, argv in cps.items()]
    Path(args.json).write_text(json.dumps({"extents": extents, "file_size": size,
                                           "budget_ms": args.budget_ms, "runs": runs},
                                          indent=2) + "\n")


if __name__ == "__main__":
    main()
