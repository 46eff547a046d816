#!/usr/bin/env python3
"""The cost of a hit, inside a guest: fio on a clone whose data is all in
memory (bench/jobs/hot-read.fio, psync): 4 KiB and 64 KiB random reads and
1 MiB sequential reads, SAMPLES times each.

The clone is read through twice before the first sample. On stock its own
page cache then holds it; on pcshare (shared_cache) the shared extent cache
holds it and every read looks up the extent and copies from there. Each
clone sample is paired with one of a "plain" file of the same size written
NOCOW (chattr +C, so no checksums), which takes the page cache path of
stock on either kernel: the pair's ratio compares a cache hit with a page
cache hit in the same boot, free of what differs between boots (on stock
it is the control, two page cache reads). The pair's order alternates.
Checks that the samples read no disk, and writes IOPS per sample as JSON.
"""
import os
from pathlib import Path

from harness import fsutil

JOB = Path(__file__).resolve().parent / "jobs/hot-read.fio"
WORKLOADS = {"rand_4k": ("randread", "4k"), "rand_64k": ("randread", "64k"),
             "seq_1m": ("read", "1m")}


def fio_env(path, rw, bs, runtime):
    """The environment bench/jobs/hot-read.fio reads its settings from."""
    return dict(os.environ, FILE=str(path), RW=rw, BS=bs, RUNTIME=str(runtime))


def sample(meter, path, name, rw, bs, runtime, pair):
    env = fio_env(path, rw, bs, runtime)
    jobs = []
    step = meter.measure(lambda: jobs.extend(fsutil.run_fio(JOB, env)))
    iops, disk = jobs[0]["read"]["iops"], step["disk_read_bytes"]
    # None on stock; the host checks that only the clone's reads were served.
    served = step.get("shared_cache", {}).get("bytes_served")
    print(f"hit: {name:8} {path.name:5} {iops:10.0f} IOPS  disk {disk} bytes", flush=True)
    return {"workload": name, "file": path.name, "pair": pair, "iops": round(iops, 1),
            "disk_read_bytes": disk, "cache_bytes_served": served}


def profile(path, runtime, out):
    """perf's symbols (kernel and fio's) of RUNTIME seconds of 4 KiB random
    reads of PATH, sampled on the cpu-clock (under -icount: every so many
    instructions), as a text report at OUT."""
    env = fio_env(path, "randread", "4k", runtime)
    data = out.with_suffix(".data")
    fsutil.run("perf", "record", "-q", "-N", "-e", "cpu-clock", "-F", "2000", "-o", str(data),
               "--", "fio", "--output-format=json", str(JOB), env=env)
    report = fsutil.run("perf", "report", "-i", str(data), "--stdio", "--sort", "sym",
                        "--percent-limit", "0.05")
    out.write_text(report)
    data.unlink()


def main():
    ap = fsutil.bench_arg_parser(__doc__)
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--runtime", type=int, default=5, help="seconds per sample")
    ap.add_argument("--profile", action="store_true",
                    help="also profile 4 KiB reads of each file with perf: "
                         "hit-profile-FILE.txt beside the JSON")
    args = ap.parse_args()
    samples = []
    meter = fsutil.Meter(args.device)
    with fsutil.bench_btrfs(args) as mnt:
        fsutil.write_patterned(mnt / "file", args.size, "hit")
        fsutil.clone_file(mnt / "file", mnt / "clone")
        (mnt / "plain").touch()
        fsutil.run("chattr", "+C", str(mnt / "plain"))
        fsutil.write_patterned(mnt / "plain", args.size, "plain")
        fsutil.drop_caches()
        for _ in range(2):
            fsutil.read_through(mnt / "clone")
            fsutil.read_through(mnt / "plain")
        for i in range(args.samples):
            for name, (rw, bs) in WORKLOADS.items():
                for file in ("clone", "plain") if i % 2 == 0 else ("plain", "clone"):
                    samples.append(sample(meter, mnt / file, name, rw, bs, args.runtime, i))
        if args.profile:
            for file in ("clone", "plain"):
                profile(mnt / file, args.runtime,
                        Path(args.json).parent / f"hit-profile-{file}.txt")
        stats = meter.shared_cache()
    fsutil.write_bench_samples(args, stats, samples)


if __name__ == "__main__":
    main()
