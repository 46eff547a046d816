#!/usr/bin/env python3
"""The cost of a hit, inside a guest: fio on a clone whose data is all in
memory (bench/jobs/hot-read.fio, psync): 4 KiB and 64 KiB random reads and
1 MiB sequential reads, SAMPLES times each.

The clone is read through twice before the first sample. On stock its own
page cache then holds it; on pcshare (shared_cache) the shared extent cache
holds it and every read looks up the extent and copies from there. Checks
that the samples read no disk, and writes IOPS per sample as JSON.
"""
import os
from pathlib import Path

from harness import fsutil

JOB = Path(__file__).resolve().parent / "jobs/hot-read.fio"
WORKLOADS = {"rand_4k": ("randread", "4k"), "rand_64k": ("randread", "64k"),
             "seq_1m": ("read", "1m")}


def main():
    ap = fsutil.bench_arg_parser(__doc__)
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--runtime", type=int, default=5, help="seconds per sample")
    args = ap.parse_args()
    samples = []
    meter = fsutil.Meter(args.device)
    with fsutil.bench_btrfs(args) as mnt:
        fsutil.write_patterned(mnt / "file", args.size, "hit")
        fsutil.clone_file(mnt / "file", mnt / "clone")
        fsutil.drop_caches()
        for _ in range(2):
            fsutil.read_through(mnt / "clone")
        for _ in range(args.samples):
            for name, (rw, bs) in WORKLOADS.items():
                env = dict(os.environ, FILE=str(mnt / "clone"), RW=rw, BS=bs,
                           RUNTIME=str(args.runtime))
                jobs = []
                disk = meter.measure(lambda: jobs.extend(fsutil.run_fio(JOB, env)))[
                    "disk_read_bytes"]
                iops = jobs[0]["read"]["iops"]
                samples.append({"workload": name, "iops": round(iops, 1),
                                "disk_read_bytes": disk})
                print(f"hit: {name:8} {iops:10.0f} IOPS  disk {disk} bytes", flush=True)
        stats = meter.shared_cache()
    fsutil.write_bench_samples(args, stats, samples)


if __name__ == "__main__":
    main()
