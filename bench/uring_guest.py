#!/usr/bin/env python3
"""Cold io_uring reads, inside a guest: fio (bench/jobs/cold-uring.fio)
4 KiB random and sequential reads of a file just dropped from memory, at
each queue depth, SAMPLES times each.

On pcshare (shared_cache) every buffered read of the file goes through the
shared extent cache, where a miss under io_uring must either wait on the
cache folio (IOCB_WAITQ) or be punted to an io-wq worker: this measures
what that costs against stock's page cache. Writes IOPS and disk bytes per
sample as JSON.
"""
import os
from pathlib import Path

from harness import fsutil

JOB = Path(__file__).resolve().parent / "jobs/cold-uring.fio"
PATTERNS = ("randread", "read")


def main():
    ap = fsutil.bench_arg_parser(__doc__)
    ap.add_argument("--iodepths", default="1,8,32")
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--runtime", type=int, default=8, help="seconds per sample")
    args = ap.parse_args()
    depths = [int(d) for d in args.iodepths.split(",")]
    samples = []
    meter = fsutil.Meter(args.device)
    with fsutil.bench_btrfs(args) as mnt:
        fsutil.write_patterned(mnt / "file", args.size, "uring")
        for _ in range(args.samples):
            for pattern in PATTERNS:
                for depth in depths:
                    fsutil.drop_caches()
                    env = dict(os.environ, FILE=str(mnt / "file"), RW=pattern,
                               IODEPTH=str(depth), RUNTIME=str(args.runtime))
                    fsutil.bench_sample(meter, samples, {"pattern": pattern, "iodepth": depth},
                                        "iops", "IOPS",
                                        lambda: fsutil.run_fio(JOB, env)[0]["read"]["iops"])
        stats = meter.shared_cache()
    fsutil.write_bench_samples(args, stats, samples)


if __name__ == "__main__":
    main()
