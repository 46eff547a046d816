#!/usr/bin/env python3
"""Guest side of `make bench-clone`: clone a file of many extents while fio
readers (buffered, O_DIRECT, mmap; 4 KiB random reads) and one 4 KiB random
writer work on it, once per clone method; report clone time and each job's
max and p99.9 latency. Runs inside a pcshare VM on a scratch disk."""
import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness import fsutil

TOP = Path(__file__).resolve().parent.parent
TOOL = TOP / "tools/pcshare/pcshare"
BS = 4096
METHODS = {
    "ficlone": ["--budget-ms", "0"],
    "ficlonerange_1m": ["--method", "ficlonerange", "--chunk", "1M"],
    "ficlonerange2_10ms": ["--method", "ficlonerange2", "--budget-ms", "10"],
    "ficlonerange2_100ms": ["--method", "ficlonerange2", "--budget-ms", "100"],
}
# The jobs alone, no clone: what the emulated guest's latency is without any
# lock wait, to read the clone rows against.
BASELINE_SECONDS = 10
# Light, fixed rates: latency should show lock waits, not a CPU saturated
# by the readers themselves (the guest is emulated).
JOBS = {
    "buffered": "--rw=randread --ioengine=psync --direct=0 --rate_iops=50",
    "direct": "--rw=randread --ioengine=psync --direct=1 --rate_iops=50",
    "mmap": "--rw=randread --ioengine=mmap --rate_iops=50",
    "writer": "--rw=randwrite --ioengine=psync --direct=0 --rate_iops=20",
}


def log(msg):
    print(f"clone_guest: {msg}", file=sys.stderr, flush=True)


def make_fragmented(path, extents):
    """One-block extents with a hole after each, written back to front so no
    EOF preallocation merges them."""
    with open(path, "wb") as f:
        for i in reversed(range(extents)):
            os.pwrite(f.fileno(), i.to_bytes(8, "little") * (BS // 8), 2 * i * BS)
            if i % 20000 == 0:
                log(f"writing extents: {extents - i}/{extents}")
        os.fsync(f.fileno())


def count_extents(path):
    """FIEMAP in batches: the file has too many extents for one call."""
    count, start = 0, 0
    with open(path, "rb") as f:
        while True:
            batch = fsutil.fiemap(f.fileno(), start=start, max_extents=4096)
            if not batch:
                return count
            count += len(batch)
            last = batch[-1]
            if last[3] & fsutil.FIEMAP_EXTENT_LAST:
                return count
            start = last[0] + last[2]


def fio_command(path, size, out_json):
    cmd = ["fio", "--output-format=json", f"--output={out_json}", "--time_based",
           "--runtime=3600", "--bs=4k", f"--size={size}", f"--filename={path}",
           "--invalidate=1", "--percentile_list=99.9", "--group_reporting=0"]
    for name, opts in JOBS.items():
        cmd += [f"--name={name}", *opts.split()]
    return cmd


def latencies(fio_json):
    text = Path(fio_json).read_text()
    data = json.loads(text[text.index("{"):])  # after "fio: terminating on signal 2"
    out = {}
    for job in data["jobs"]:
        side = job["write"] if job["jobname"] == "writer" else job["read"]
        clat = side["clat_ns"]
        pct = clat.get("percentile", {})
        p999 = next((v for k, v in pct.items() if k.startswith("99.9")), clat["max"])
        # fio's percentiles are bucket bounds and can exceed the true max.
        out[job["jobname"]] = {"max": round(clat["max"] / 1e6, 3),
                               "p999": round(min(p999, clat["max"]) / 1e6, 3),
                               "ios": side["total_ios"]}
    return out


def commit_stats(path):
    """btrfs's transaction commit counters (sysfs commit_stats at path); a
    long commit stalls everyone who starts a transaction, so it is reported
    beside the latencies."""
    return dict((k, int(v)) for k, v in (line.split() for line in path.read_text().splitlines()))


def run_method(mnt, device, method, size, lead, around=contextlib.nullcontext):
    """Clone mnt/src to mnt/dst with METHOD while the fio jobs run; the
    clone call runs inside AROUND(), a context manager (a memory sampler)."""
    dst = mnt / "dst"
    if dst.exists():
        dst.unlink()
    os.sync()
    fsutil.drop_caches()
    stats_path = fsutil.btrfs_sysfs_dir(device) / "commit_stats"
    stats_path.write_text("0\n")  # resets the max
    commits_before = commit_stats(stats_path)["commits"]
    fio_json = mnt.parent / f"fio-{method}.json"
    fio = subprocess.Popen(fio_command(mnt / "src", size, fio_json),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(lead)
    if method == "baseline":
        res = None
        time.sleep(BASELINE_SECONDS)
    else:
        with around():
            res = subprocess.run([str(TOOL), "clone", "--quiet", "--json", *METHODS[method],
                                  str(mnt / "src"), str(dst)], capture_output=True, text=True)
    time.sleep(0.5)
    fio.send_signal(signal.SIGINT)
    _, fio_err = fio.communicate(timeout=600)
    if res and res.returncode:
        raise SystemExit(f"clone_guest: {method}: pcshare clone failed: {res.stderr.strip()}")
    # Stopped by SIGINT, fio exits 128 after writing a complete report.
    if fio.returncode not in (0, 128) or not fio_json.exists():
        raise SystemExit(f"clone_guest: fio failed ({fio.returncode}): {fio_err[-500:]}")
    lat = latencies(fio_json)
    stats = commit_stats(stats_path)
    commits = {"count": stats["commits"] - commits_before, "max_ms": stats["max_commit_ms"]}
    if res is None:
        log("baseline (no clone): " + ", ".join(f"{k} max {v['max']:.0f} ms"
                                                for k, v in lat.items()))
        return {"latency_ms": lat, "commits": commits}
    summary = json.loads(res.stdout)
    log(f"{method}: {summary['seconds']:.2f} s, {summary['calls']} calls, "
        f"longest {summary['longest_call_ms']:.0f} ms, {commits['count']} commits "
        f"(longest {commits['max_ms']} ms); "
        + ", ".join(f"{k} max {v['max']:.0f} ms" for k, v in lat.items()))
    return {"method": method, "clone_seconds": round(summary["seconds"], 3),
            "calls": summary["calls"], "longest_call_ms": summary["longest_call_ms"],
            "commits": commits, "latency_ms": lat}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", required=True)
    ap.add_argument("--extents", type=int, default=100000)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--lead", type=float, default=2.0,
                    help="seconds the fio jobs run before the clone starts")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each method")
    ap.add_argument("--json", required=True, help="where to write the results")
    args = ap.parse_args()

    mnt = Path("/run/pcshare/bench-clone")
    fsutil.mkfs("btrfs", args.device)
    with fsutil.mounted(args.device, mnt) as mnt:
        log(f"making a file of {args.extents} extents")
        make_fragmented(mnt / "src", args.extents)
        extents = count_extents(mnt / "src")
        size = os.path.getsize(mnt / "src")
        log(f"{extents} extents, {size} bytes")
        baseline = run_method(mnt, args.device, "baseline", size, args.lead)
        runs = [run_method(mnt, args.device, m, size, args.lead)
                for _ in range(args.repeat) for m in args.methods.split(",") if m]
    Path(args.json).write_text(json.dumps({"extents": extents, "file_size": size,
                                           "baseline": baseline, "runs": runs},
                                          indent=2) + "\n")


if __name__ == "__main__":
    main()
