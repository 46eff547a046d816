#!/usr/bin/env python3
"""Which locks cold readers contend on, inside a guest of a kernel built
with CONFIG_LOCK_STAT (the lockstat variant): the files of
bench/scaling_guest.py, READERS fio jobs reading at once N distinct files
and then N clones of one file, each run dropped from memory first, with
/proc/lock_stat cleared before the run and read after it. Writes, per
layout, the lock classes with the most contentions and where they were
contended, as JSON.
"""
import json
import os
import re
from pathlib import Path

from bench.scaling_guest import make_files, read_parallel
from harness import fsutil

LOCK_STAT = Path("/proc/lock_stat")
_TIME = r"([\d.]+)"
# kernel/locking/lockdep_proc.c, seq_stats(): a class name, -W or -R for a
# lock taken both ways, then con-bounces, contentions, wait min, max, total,
# avg (us), acq-bounces, acquisitions, hold min, max, total, avg (us).
_STATS = re.compile(r"^\s*(\S.*?):\s+(\d+)\s+(\d+)\s+" + r"\s+".join([_TIME] * 4)
                    + r"\s+(\d+)\s+(\d+)\s+" + r"\s+".join([_TIME] * 4) + r"\s*$")
# After a class line, up to two lists each opened by a line of dashes: the
# call sites that waited for the lock (contention points), then those that
# held it meanwhile (contending points); each line: name, count,
# [<address>] symbol+off/len.
_POINT = re.compile(r"^\s*(\S.*?)\s+(\d+)\s+\[<[^>]*>\]\s+([^+\s]+)")
_DASHES = re.compile(r"^\s*-+\s*$")
_LISTS = ("waited_in", "holder_in")


def parse_lock_stat(text):
    """/proc/lock_stat as a list of {class, con_bounces, contentions,
    wait_total_us, wait_max_us, acquisitions, hold_total_us, waited_in,
    holder_in}: the last two map the call sites (symbols) that waited for
    the lock, and those that held it while others waited, to counts."""
    classes, last, lists = [], None, 0
    for line in text.splitlines():
        m = _STATS.match(line)
        if m:
            last = {"class": m.group(1), "con_bounces": int(m.group(2)),
                    "contentions": int(m.group(3)), "wait_max_us": float(m.group(5)),
                    "wait_total_us": float(m.group(6)), "acquisitions": int(m.group(9)),
                    "hold_total_us": float(m.group(12)), "waited_in": {}, "holder_in": {}}
            classes.append(last)
            lists = 0
        elif last is not None and _DASHES.match(line):
            lists += 1
        elif ((m := _POINT.match(line)) and last is not None and 0 < lists <= len(_LISTS)
              and m.group(1) == re.sub(r"-[WR]$", "", last["class"])):
            # A class that waited but was never released yet prints its
            # lists without a class line: its names do not match the last.
            points = last[_LISTS[lists - 1]]
            points[m.group(3)] = points.get(m.group(3), 0) + int(m.group(2))
    return classes


def most_contended(classes, limit):
    """The LIMIT classes with the most contentions, of those with any."""
    contended = [c for c in classes if c["contentions"]]
    return sorted(contended, key=lambda c: (-c["contentions"], -c["wait_total_us"]))[:limit]


def main():
    ap = fsutil.bench_arg_parser(__doc__)
    ap.add_argument("--readers", type=int, default=8)
    ap.add_argument("--top", type=int, default=10, help="lock classes kept per layout")
    args = ap.parse_args()
    if not LOCK_STAT.exists():
        raise SystemExit(f"{LOCK_STAT} is missing: this kernel ({os.uname().release}) was "
                         "built without CONFIG_LOCK_STAT (scripts/kernel.sh build KERNEL lockstat)")
    if "lock debugging disabled" in LOCK_STAT.read_text():
        raise SystemExit(f"{LOCK_STAT}: lock debugging was turned off (a lockdep report "
                         "before the run?): its statistics are not being kept")
    runs = []
    with fsutil.bench_btrfs(args) as mnt:
        make_files(mnt, args.readers, args.size)
        meter = fsutil.Meter(args.device)
        for kind in ("distinct", "clones"):
            fsutil.drop_caches()
            LOCK_STAT.write_text("0\n")
            got = []
            step = meter.measure(lambda: got.append(read_parallel(mnt / kind, args.readers,
                                                                  args.size)))
            classes = parse_lock_stat(LOCK_STAT.read_text())
            mib_per_s = got[0]
            top = most_contended(classes, args.top)
            print(f"{kind}, {args.readers} readers: {mib_per_s:.1f} MiB/s; most contended: "
                  + ", ".join(f"{c['class']} {c['contentions']}" for c in top[:3]), flush=True)
            runs.append({"files": kind, "readers": args.readers,
                         "mib_per_s": round(mib_per_s, 1),
                         "disk_read_bytes": step["disk_read_bytes"],
                         # None on stock; on pcshare, proof the reads went
                         # through the cache.
                         "shared_cache": step.get("shared_cache"),
                         "contentions": sum(c["contentions"] for c in classes),
                         "acquisitions": sum(c["acquisitions"] for c in classes),
                         "locks": top})
    Path(args.json).write_text(json.dumps(
        {"file_size": args.size, "kernel_release": os.uname().release,
         "mount_options": args.mount_options, "runs": runs}, indent=2) + "\n")


if __name__ == "__main__":
    main()
