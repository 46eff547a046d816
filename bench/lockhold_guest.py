#!/usr/bin/env python3
"""Writers during one huge cold read, inside a guest.

Makes a btrfs on DEVICE and a file of SIZE bytes plus a 64 MiB tail, drops
caches, then reads the first SIZE bytes with ONE pread while two writer
processes issue 4 KiB buffered pwrites: one into the tail (a region the
read never touches) and one into the last 64 MiB of the range being read.
(Threads would share Python's interpreter lock with the reader, and their
latencies would measure that lock.) A reader that holds the file's extent
lock while it waits for the disk makes the second writer (and truncate,
hole punch) wait for the read. Writes the writers' latencies as JSON.
"""
import json
import os
import random
import signal
import time
from pathlib import Path

from harness import fsutil

MiB = 1 << 20
TAIL = 64 * MiB


def writer(path, lo, hi, out):
    """A process of its own, so no interpreter lock couples it to the reader:
    4 KiB pwrites at random blocks of [lo, hi) until SIGTERM, then the
    latencies in ms as JSON to out."""
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    fd = os.open(path, os.O_WRONLY)
    block = os.urandom(4096)
    rnd = random.Random(lo)
    latencies = []
    while not stop:
        offset = rnd.randrange(lo // 4096, hi // 4096) * 4096
        t0 = time.perf_counter()
        os.pwrite(fd, block, offset)
        latencies.append((time.perf_counter() - t0) * 1000)
        time.sleep(0.002)
    os.close(fd)
    Path(out).write_text(json.dumps(latencies))


def summary(latencies):
    ordered = sorted(latencies)
    return {"writes": len(ordered), "max_ms": round(ordered[-1], 2),
            "p99_ms": round(ordered[int(len(ordered) * 0.99) - 1], 2),
            "median_ms": round(ordered[len(ordered) // 2], 2)}


def main():
    ap = fsutil.bench_arg_parser(__doc__)
    args = ap.parse_args()
    with fsutil.bench_btrfs(args) as mnt:
        path = mnt / "data"
        with open(path, "wb") as f:
            chunk = fsutil.pattern(64 * MiB, "lockhold")
            for _ in range((args.size + TAIL) // len(chunk)):
                f.write(chunk)
            os.fsync(f.fileno())
        fsutil.drop_caches()
        regions = {"other_region": (args.size, args.size + TAIL),
                   "read_range": (args.size - TAIL, args.size)}
        writers = {}
        for name, (lo, hi) in regions.items():
            pid = os.fork()
            if pid == 0:
                try:
                    writer(path, lo, hi, f"/run/lockhold-{name}.json")
                finally:
                    os._exit(0)
            writers[name] = pid
        time.sleep(1)  # the writers' baseline before the read starts
        fd = os.open(path, os.O_RDONLY)
        buf = bytearray(args.size)
        t0 = time.perf_counter()
        got = os.preadv(fd, [buf], 0)
        read_seconds = time.perf_counter() - t0
        os.close(fd)
        latencies = {}
        for name, pid in writers.items():
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
            latencies[name] = json.loads(Path(f"/run/lockhold-{name}.json").read_text())
        if got != args.size:
            raise SystemExit(f"lockhold: short read, {got} of {args.size}")
    result = {"read_bytes": got, "read_seconds": round(read_seconds, 2),
              "writers": {name: summary(lat) for name, lat in latencies.items()}}
    print(f"lockhold: read {got >> 20} MiB in {read_seconds:.1f} s; " +
          "; ".join(f"{n}: max {s['max_ms']} ms over {s['writes']} writes"
                    for n, s in result["writers"].items()), flush=True)
    Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
