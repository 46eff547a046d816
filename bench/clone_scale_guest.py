#!/usr/bin/env python3
"""Guest side of `make bench-clone-scale`: for each extent count, make a
btrfs file of that many one-block extents and clone it with each method
while fio's readers (buffered, O_DIRECT, mmap) and one writer work on it,
as bench/clone_guest.py does; report clone time, the calls it took, each
job's longest wait and the memory the clone used (peak growth of slab, of
dirty and writeback pages, and of all memory in use, sampled every 100 ms)."""
import contextlib
import json
import os
import threading
import time
from pathlib import Path

from bench import clone_guest  # the fragmented file, fio jobs and one clone run
from harness import fsutil

MiB = 1 << 20


def meminfo():
    """/proc/meminfo in bytes."""
    out = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, value = line.split(":")
        out[key] = int(value.split()[0]) * 1024
    return out


class MemoryPeak:
    """Samples /proc/meminfo in a thread while the clone runs; .result is
    the peak growth over the first sample, in MiB."""

    def __init__(self, interval=0.1):
        self.interval = interval
        self.result = None

    def _sample(self):
        m = meminfo()
        return {"slab": m["Slab"], "dirty": m["Dirty"] + m["Writeback"],
                "used": m["MemTotal"] - m["MemFree"]}

    def _loop(self, stop):
        while not stop.wait(self.interval):
            for key, value in self._sample().items():
                self.peak[key] = max(self.peak[key], value)

    @contextlib.contextmanager
    def __call__(self):
        self.base = self._sample()
        self.peak = dict(self.base)
        stop = threading.Event()
        thread = threading.Thread(target=self._loop, args=(stop,), daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            for key, value in self._sample().items():
                self.peak[key] = max(self.peak[key], value)
            self.result = {f"{k}_mib": round((self.peak[k] - self.base[k]) / MiB, 1)
                           for k in self.base}


def one_size(args, extents, methods):
    """Every method's run on a fresh file system holding one file of EXTENTS extents."""
    runs = []
    with fsutil.bench_btrfs(args) as mnt:
        clone_guest.log(f"making a file of {extents} extents")
        start = time.monotonic()
        clone_guest.make_fragmented(mnt / "src", extents)
        made = clone_guest.count_extents(mnt / "src")
        size = os.path.getsize(mnt / "src")
        clone_guest.log(f"{made} extents, {size} bytes, in {time.monotonic() - start:.0f} s")
        for method in methods:
            peak = MemoryPeak()
            run = clone_guest.run_method(mnt, args.device, method, size, args.lead, peak)
            runs.append({"extents": made, "file_size": size, **run, "memory": peak.result})
            clone_guest.log(f"{method} at {made} extents: memory {peak.result}")
    return runs


def main():
    ap = fsutil.bench_arg_parser(__doc__, size=False)
    ap.add_argument("--extents", default="10000,100000,1000000")
    ap.add_argument("--methods", default="ficlone,ficlonerange2_100ms")
    ap.add_argument("--lead", type=float, default=2.0,
                    help="seconds the fio jobs run before the clone starts")
    args = ap.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    unknown = set(methods) - set(clone_guest.METHODS)
    if unknown:
        ap.error(f"--methods: unknown {', '.join(sorted(unknown))}")
    runs = []
    for extents in (int(n) for n in args.extents.split(",")):
        runs += one_size(args, extents, methods)
    Path(args.json).write_text(json.dumps(
        {"kernel_release": os.uname().release, "mount_options": args.mount_options,
         "runs": runs}, indent=2) + "\n")


if __name__ == "__main__":
    main()
