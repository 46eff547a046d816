"""Short runs of the guest sides of the benchmarks (bench.*_guest), so a
change that breaks one fails `make test` instead of the next benchmark run.
Each checks the results file's shape and the byte counts that do not depend
on timing: what was read came from the disk once per copy the kernel keeps.
Not on the debug kernel (marker bench_smoke): it would only be slower."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness import fsutil

from conftest import BTRFS_OPTION_SETS

pytestmark = pytest.mark.bench_smoke
TOP = Path(__file__).resolve().parents[2]
MiB = 1 << 20
SHARED = "shared_cache" in BTRFS_OPTION_SETS
STDLIB = fsutil.system_python_stdlib()


def run_bench(name, scratch_dev, tmp_path, *args):
    out = tmp_path / f"{name}.json"
    command = [sys.executable, "-m", f"bench.{name}_guest", "--device", scratch_dev,
               "--json", str(out), *args]
    if SHARED:
        command += ["--mount-options", "shared_cache"]
    subprocess.run(command, check=True, timeout=900, cwd=TOP)
    return json.loads(out.read_text())


def rows(result, **match):
    found = [r for r in result["runs"] if all(r[k] == v for k, v in match.items())]
    assert len(found) == 1, (match, result["runs"])
    return found[0]


@pytest.mark.parametrize("layout", ["snapshots", "overlay"])
def test_containers(scratch_dev, tmp_path, layout):
    result = run_bench("containers", scratch_dev, tmp_path, "--smoke", "--layout", layout)
    assert result["layout"] == layout
    image = result["image_bytes"]
    assert result["image_files"] > 100 and image > 10 * MiB
    one, two = rows(result, step="read_all", containers=1), rows(result, step="read_all",
                                                                 containers=2)
    assert 0.9 * image <= one["disk_read_bytes"] <= 1.2 * image
    # A second snapshot's read: from the disk again into a second copy on
    # stock, from the shared cache's one copy on pcshare.  Overlay roots
    # share one lower layer, so one copy on both.
    shared = SHARED or layout == "overlay"
    second = two["disk_read_bytes"] - one["disk_read_bytes"]
    assert second < 0.05 * image if shared else second > 0.9 * image
    growth = two["cache_growth_bytes"] - one["cache_growth_bytes"]
    assert growth < 0.1 * image if shared else growth > 0.9 * image
    for step in ("entrypoint", "running", "read_all_upgrade", "entrypoint_upgrade"):
        assert rows(result, step=step, containers=2)["seconds"] > 0
    assert rows(result, step="fork_exit", containers=64)["seconds"] > 0


def second_clone(result, **match):
    """The runs of MATCH after one and two clones: the first read its clone
    whole from the disk; returns what the second added, (disk bytes read,
    page cache growth)."""
    one, two = (rows(result, clones=n, **match) for n in (1, 2))
    assert one["disk_read_bytes"] >= 0.9 * result["image_bytes"]
    return (two["disk_read_bytes"] - one["disk_read_bytes"],
            two["cache_growth_bytes"] - one["cache_growth_bytes"])


def test_vm(scratch_dev, tmp_path):
    result = run_bench("vmimage", scratch_dev, tmp_path, "--size", str(64 * MiB),
                       "--clones", "1,2", "--engines", "psync,libaio_direct",
                       "--readonly-engines", "mmap", "--fill-from", str(STDLIB / "json"))
    image = result["image_bytes"]
    assert len(result["runs"]) == 10
    # Mapped reads of the read-only subvolume's clones fill from the shared
    # cache (btrfs/0015), bound or not: the second reads nothing more.
    second, _ = second_clone(result, subvolume="read-only", engine="mmap", access="seq")
    assert second < 0.05 * image if SHARED else second >= 0.9 * image
    for access in ("seq", "rand"):
        second, growth = second_clone(result, engine="psync", access=access)
        assert second < 0.05 * image if SHARED else second >= 0.9 * image
        assert growth < 0.1 * image if SHARED else growth >= 0.9 * image
        # O_DIRECT reads every clone from the disk and caches nothing.
        direct = rows(result, engine="libaio_direct", access=access, clones=2)
        assert direct["disk_read_bytes"] >= 1.9 * image
        assert direct["cache_growth_bytes"] < 0.05 * image


def test_mix(scratch_dev, tmp_path):
    result = run_bench("mix", scratch_dev, tmp_path, "--size", str(16 * MiB),
                       "--io", str(256 * 1024), "--children", "1,2", "--figures", "2,7")
    figures = {(r["figure"], r["children"], r["job"], r["kind"]) for r in result["runs"]}
    assert figures == {(2, 1, "parent", "read"), (2, 1, "child", "read"),
                       (7, 1, "child-read", "read"), (8, 1, "child-write", "write"),
                       (7, 2, "child-read", "read"), (8, 2, "child-write", "write")}
    for r in result["runs"]:
        assert 0 < r["lat_ms"]["mean"] <= r["lat_ms"]["max"]


def test_hit(scratch_dev, tmp_path):
    result = run_bench("hit", scratch_dev, tmp_path, "--size", str(16 * MiB),
                       "--samples", "1", "--runtime", "1")
    assert {s["workload"] for s in result["samples"]} == {"rand_4k", "rand_64k", "seq_1m"}
    for s in result["samples"]:
        assert s["iops"] > 0 and s["disk_read_bytes"] == 0, s
    if SHARED:
        assert result["shared_cache"]["hits"] > 0


def test_uring(scratch_dev, tmp_path):
    result = run_bench("uring", scratch_dev, tmp_path, "--size", str(16 * MiB),
                       "--samples", "1", "--runtime", "1", "--iodepths", "1,8")
    assert {(s["pattern"], s["iodepth"]) for s in result["samples"]} == {
        ("randread", 1), ("randread", 8), ("read", 1), ("read", 8)}
    for s in result["samples"]:
        # Cold: every sample reads the disk, and at most the file (the
        # shared cache reads each block once, as stock's page cache does).
        assert s["iops"] > 0 and 0 < s["disk_read_bytes"] <= 16 * MiB + 4 * MiB, s
    if SHARED:
        # Cold reads fill the cache, and each of io_uring's waits on a fill
        # counts a miss, even when it is queued (IOCB_WAITQ) and retried.
        assert result["shared_cache"]["bytes_filled"] >= 16 * MiB
        assert result["shared_cache"]["misses"] > 0


def test_scaling(scratch_dev, tmp_path):
    result = run_bench("scaling", scratch_dev, tmp_path, "--size", str(4 * MiB),
                       "--samples", "1", "--readers", "1,2")
    assert {(s["files"], s["readers"]) for s in result["samples"]} == {
        ("distinct", 1), ("distinct", 2), ("clones", 1), ("clones", 2)}
    for s in result["samples"]:
        assert s["mib_per_s"] > 0, s
        # Cold: distinct files are each read from disk; clones of one file
        # once on pcshare (the shared cache), once per reader on stock.
        per_copy = 4 * MiB
        copies = 1 if SHARED and s["files"] == "clones" else s["readers"]
        assert copies * per_copy <= s["disk_read_bytes"] <= copies * per_copy + 2 * MiB, s
