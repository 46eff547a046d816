#!/usr/bin/env python3
"""Run fstests (built by scripts/fstests-build.sh) in guests: the tests the
project's fstests patches add, plus clone tests, on btrfs and XFS, on the
stock and pcshare kernels. Writes one row per test, filesystem and kernel to
runs/fstests.json (harness/results.py):

    {"test": "generic/788", "filesystem": "xfs", "kernel": "pcshare",
     "status": "pass" | "fail" | "notrun", "seconds": 3, "new": true}

What must hold, or the exit status is 1: nothing fails; on the stock kernel
(no FICLONERANGE2) the new tests do not run; on pcshare they pass.

The guest's root is this machine's / read-only, so the fstests tree and the
patched xfs_io under $PCSHARE_CACHE are what the guest runs; TEST_DEV and
SCRATCH_DEV are two scratch disks (scripts/fstests-guest.sh).
"""
import argparse
import json
import os
import re
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

if __name__ == "__main__":  # run by path: the checkout's packages (scripts/_bootstrap.py)
    import _bootstrap  # noqa: F401
from harness import vm  # noqa: E402
from harness.results import run_file  # noqa: E402

TOP = Path(__file__).resolve().parent.parent

CACHE = Path(os.environ.get("PCSHARE_CACHE", Path.home() / ".cache/pcshare"))
PATCHES = TOP / "userspace/fstests"

# The clone tests run besides the new ones: the quick clone tests
# (`-g clone` and quick) of fstests' basic reflink semantics. All of them
# (-g clone intersected with quick: 168 generic, 93 xfs, 38 btrfs) take
# hours in a TCG guest; --clone-quick runs them all.
CLONE_TESTS = [
    "generic/110",  # clone, then change the clone and the original
    "generic/111",  # clones in a directory tree
    "generic/115",  # move and delete cloned files
    "generic/116",  # clone parts of two identical files
    "generic/118",  # clone non-matching parts of files
    "generic/119",  # clone two sets of files together
    "generic/134",  # clone the last, partial, block of a file
    "generic/138",  # copy on write through the page cache
    "generic/157",  # invalid clone requests are refused
    "generic/181",  # clone with length 0 means to EOF
]


def new_tests(patch_dir=PATCHES):
    """Tests the patches create: 'create mode ... tests/generic/788'."""
    found = set()
    for patch in sorted(Path(patch_dir).glob("*.patch")):
        found.update(re.findall(r"^ create mode \d+ tests/(\w+/\d+)$",
                                patch.read_text(), re.M))
    return sorted(found)


def clone_quick(fstests, filesystems):
    """Every test in both the clone and the quick group, for these filesystems."""
    tests = []
    for d in ["generic", *filesystems]:
        group_list = Path(fstests) / "tests" / d / "group.list"
        if not group_list.exists():
            continue
        for line in group_list.read_text().splitlines():
            name, *groups = line.split() or ["#"]
            if not name.startswith("#") and "clone" in groups and "quick" in groups:
                tests.append(f"{d}/{name}")
    return tests


def parse_xunit(path):
    """(test, status, seconds) from an fstests xunit report (check -R xunit)."""
    rows = []
    for case in ET.parse(path).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            status = "fail"
        elif case.find("skipped") is not None:
            status = "notrun"
        else:
            status = "pass"
        rows.append((case.get("name"), status, float(case.get("time") or 0)))
    return rows


def applies_to(test, fs):
    """generic/ tests run everywhere, xfs/ and btrfs/ ones on that filesystem."""
    return test.split("/")[0] in ("generic", fs)


def expectation_problems(rows, new):
    """What breaks 'stock skips the new tests and passes the rest; pcshare
    passes all'."""
    problems = []
    for r in rows:
        what = f"{r['kernel']} {r['filesystem']} {r['test']}: {r['status']}"
        if r["status"] == "fail":
            problems.append(what)
        elif r["new"] and r["kernel"] == "stock" and r["status"] != "notrun":
            problems.append(what + " (the stock kernel has no FICLONERANGE2)")
        elif r["new"] and r["kernel"] == "pcshare" and r["status"] != "pass":
            problems.append(what)
    return problems


def run_kernel(kernel, args, tests, new):
    out = CACHE / "fstests" / "runs" / f"{time.strftime('%Y%m%d-%H%M%S')}-{kernel}"
    env = {"FSTESTS_DIR": str(args.fstests), "FSTESTS_XFS_IO": str(args.xfs_io),
           "FSTESTS_TESTS": " ".join(tests), "FSTESTS_FS": " ".join(args.fs),
           "FSTESTS_TIMEOUT": str(args.timeout)}
    print(f"fstests: {kernel}: {len(tests)} tests on {', '.join(args.fs)} ({out})",
          flush=True)
    result = vm.run_vm(["sh", str(TOP / "scripts/fstests-guest.sh")], kernel=kernel,
                       disks=[args.disk_size, args.disk_size], mem=args.mem,
                       timeout=args.timeout * len(args.fs) + 300, out_dir=out,
                       env=env, echo=args.verbose)
    print(f"fstests: {kernel}: {result.summary()}", flush=True)
    rows = []
    for fs in args.fs:
        report = out / "results" / fs / "result.xml"
        got = {}
        if report.exists():
            got = {t: (s, sec) for t, s, sec in parse_xunit(report)}
        for test in tests:
            if not applies_to(test, fs):
                continue
            status, seconds = got.get(test, ("fail", None))  # never reported: killed
            rows.append({"test": test, "filesystem": fs, "kernel": kernel,
                         "status": status, "seconds": seconds, "new": test in new})
    return rows, result


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fstests", type=Path, default=CACHE / "fstests/xfstests",
                    help="the built fstests tree (default: %(default)s)")
    ap.add_argument("--xfs-io", type=Path, default=CACHE / "fstests/bin",
                    help="directory of the patched xfs_io (default: %(default)s)")
    ap.add_argument("--kernels", nargs="+", default=["stock", "pcshare"],
                    choices=["stock", "pcshare"])
    ap.add_argument("--fs", nargs="+", default=["btrfs", "xfs"])
    ap.add_argument("--tests", nargs="+", metavar="TEST",
                    help="run these instead of the new tests and the clone list")
    ap.add_argument("--clone-quick", action="store_true",
                    help="all of -g clone intersected with quick instead of the short list")
    ap.add_argument("--only-new", action="store_true", help="the new tests only")
    ap.add_argument("--timeout", type=int, default=1800,
                    help="seconds one filesystem's check may take in a guest (default: %(default)s)")
    ap.add_argument("--disk-size", default="8G")
    ap.add_argument("--mem", default="2G")
    ap.add_argument("--out", default=None, help="JSON output (default: runs/fstests.json)")
    ap.add_argument("--verbose", action="store_true", help="echo the guest console")
    args = ap.parse_args()

    new = new_tests()
    if args.tests:
        tests = args.tests
    elif args.only_new:
        tests = new
    else:
        clone = clone_quick(args.fstests, args.fs) if args.clone_quick else CLONE_TESTS
        tests = new + [t for t in clone if t not in new]
    if not (args.fstests / "check").exists():
        ap.error(f"no fstests at {args.fstests}: run scripts/fstests-build.sh")

    start = time.monotonic()
    rows, guests = [], {}
    for kernel in args.kernels:
        kernel_rows, result = run_kernel(kernel, args, tests, new)
        rows += kernel_rows
        guests[kernel] = {"ok": result.ok, "reason": result.reason,
                          "seconds": round(result.seconds, 1), "out_dir": result.out_dir}
    problems = expectation_problems(rows, new)
    doc = {"tests": tests, "new_tests": new, "guests": guests, "rows": rows,
           "seconds": round(time.monotonic() - start, 1), "problems": problems}
    out = args.out or run_file("fstests.json")
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")

    for kernel in args.kernels:
        for fs in args.fs:
            mine = [r for r in rows if r["kernel"] == kernel and r["filesystem"] == fs]
            counts = {s: sum(r["status"] == s for r in mine) for s in ("pass", "fail", "notrun")}
            print(f"fstests: {kernel:8} {fs:6} pass {counts['pass']:3} fail {counts['fail']:3} "
                  f"notrun {counts['notrun']:3}")
    for p in problems:
        print(f"fstests: UNEXPECTED: {p}")
    print(f"fstests: {out} ({doc['seconds']:.0f} s in guests)")
    return 1 if problems or not all(g["ok"] for g in guests.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
