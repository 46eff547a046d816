#!/usr/bin/env python3
"""Reads of data nobody shares, inside a guest: fio on one non-cloned file.

Makes a btrfs on DEVICE, writes a SIZE file once, then for each sample drops
caches and runs a cold sequential read (MB/s) and 4 KiB random reads (IOPS)
with synchronous buffered I/O. Writes a JSON list of samples.
"""
import json
import subprocess
from pathlib import Path

from harness import fsutil

WORKLOADS = {
    # name: (fio arguments, result field, unit)
    "seqread": (["--rw=read", "--bs=1M"], "bw_bytes", "MB/s"),
    "randread4k": (["--rw=randread", "--bs=4k", "--time_based", "--runtime=10",
                    "--randrepeat=1"], "iops", "IOPS"),
}


def fio(path, size, args):
    out = subprocess.run(["fio", "--name=r", f"--filename={path}", f"--size={size}",
                          "--ioengine=psync", "--invalidate=0", "--output-format=json",
                          *args], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["jobs"][0]["read"]


def main():
    ap = fsutil.bench_arg_parser(__doc__)
    ap.add_argument("--samples", type=int, default=3)
    args = ap.parse_args()

    fsutil.mkfs("btrfs", args.device)
    samples = []
    with fsutil.mounted(args.device, "/run/pcshare-bench", args.mount_options) as mnt:
        path = mnt / "data"
        fsutil.write_file(path, fsutil.pattern(args.size, "unshared"))
        for i in range(args.samples):
            for name, (fio_args, field, unit) in WORKLOADS.items():
                fsutil.drop_caches()
                value = fio(path, args.size, fio_args)[field]
                if unit == "MB/s":
                    value /= 1e6
                samples.append({"workload": name, "value": value, "unit": unit})
                print(f"unshared: sample {i + 1}/{args.samples} {name}: {value:.1f} {unit}",
                      flush=True)
    Path(args.json).write_text(json.dumps(samples, indent=2))


if __name__ == "__main__":
    main()
