#!/usr/bin/env python3
"""Parallel cold readers, inside a guest: N fio jobs (psync, 1 MiB
sequential reads) at once, each reading its own file, for each N; the
files are N distinct files or N clones of one file, dropped from memory
before every sample.

With shared_cache every buffered read of every file on the mount goes
through one cache inode per filesystem, whose XArray all fills share, where
stock has one per file: this measures what that costs as readers are
added. Writes MiB/s per sample as JSON.
"""
import json

from harness import fsutil

MiB = 1 << 20


def read_parallel(directory, readers, size):
    """fio: READERS jobs at once, job i reading DIRECTORY/r.i.0 (fio's
    default file name for job i) sequentially; returns MiB/s over all."""
    out = fsutil.run("fio", "--output-format=json", "--name=r", f"--directory={directory}",
                     f"--numjobs={readers}", f"--size={size}", "--rw=read", "--bs=1M",
                     "--ioengine=psync", "--invalidate=1", "--group_reporting")
    job = json.loads(out[out.index("{"):])["jobs"][0]
    return job["read"]["bw_bytes"] / MiB


def make_files(mnt, readers, size):
    """MNT/distinct: READERS files of SIZE bytes, each its own data;
    MNT/clones: one file and READERS - 1 clones of it. Named as
    read_parallel()'s jobs read them, and synced to disk."""
    for kind in ("distinct", "clones"):
        (mnt / kind).mkdir()
    for i in range(readers):
        fsutil.write_patterned(mnt / "distinct" / f"r.{i}.0", size, f"scale{i}")
        if i == 0:
            fsutil.write_patterned(mnt / "clones" / "r.0.0", size, "scale")
        else:
            fsutil.clone_file(mnt / "clones" / "r.0.0", mnt / "clones" / f"r.{i}.0")
    fsutil.run("sync")


def main():
    ap = fsutil.bench_arg_parser(__doc__)
    ap.add_argument("--readers", default="1,2,4,8")
    ap.add_argument("--samples", type=int, default=2)
    args = ap.parse_args()
    counts = [int(n) for n in args.readers.split(",")]
    samples = []
    meter = fsutil.Meter(args.device)
    with fsutil.bench_btrfs(args) as mnt:
        make_files(mnt, max(counts), args.size)
        for _ in range(args.samples):
            for kind in ("distinct", "clones"):
                for n in counts:
                    fsutil.drop_caches()
                    fsutil.bench_sample(meter, samples, {"files": kind, "readers": n},
                                        "mib_per_s", "MiB/s",
                                        lambda: read_parallel(mnt / kind, n, args.size))
        stats = meter.shared_cache()
    fsutil.write_bench_samples(args, stats, samples)


if __name__ == "__main__":
    main()
