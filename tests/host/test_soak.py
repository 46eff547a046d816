"""The soak (tests/soak.py) on the host's own kernel, on loop-mounted btrfs:
a short run finds nothing, verifies reads in both the main thread and the
readers and runs every operation kind; a seed repeats its operations; every
planted model bug is caught. Needs root (loop devices, /dev/kmsg)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import fsutil

from conftest import load_program

TOP = Path(__file__).resolve().parents[2]
SOAK = TOP / "tests/soak.py"
soak = load_program("tests/soak.py")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="loop mounts need root")


def run_soak(*args):
    # soak.py imports the harness package from the checkout's root.
    env = {**os.environ, "PYTHONPATH": str(TOP)}
    return subprocess.run([sys.executable, str(SOAK), *map(str, args)],
                          capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture
def image(tmp_path):
    path = tmp_path / "soak.img"
    with open(path, "wb") as f:
        f.truncate(1 << 30)
    return path


@pytest.fixture
def mounted_btrfs(image, tmp_path):
    fsutil.mkfs("btrfs", str(image))
    with fsutil.mounted(str(image), tmp_path / "mnt", "loop") as mnt:
        yield mnt


def test_clean_run_verifies_reads_and_runs_every_kind(image, tmp_path):
    out = tmp_path / "soak.json"
    res = run_soak("--device", image, "--seed", 1, "--ops", 4000, "--json", out)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr
    r = json.loads(out.read_text())
    assert (r["ops_total"], r["mismatches"], r["failures"]) == (4000, 0, [])
    assert r["reads_verified"] > r["reader_reads_verified"] > 0
    assert r["bytes_verified"] > r["reader_bytes_verified"] > 0
    assert all(r["reads_by_kind"][k] > 0 for k in soak.READ_KINDS), r["reads_by_kind"]
    expect = set(soak.WEIGHTS) - ({"ficlonerange2"} if not r["ficlonerange2"] else set())
    assert set(r["ops"]) == expect
    assert r["device_stats"] and not any(r["device_stats"].values())
    assert r["csum_messages"] == []
    assert "soak: ok: 4000 ops" in res.stdout


def test_a_seed_repeats_its_operations(image, mounted_btrfs, tmp_path):
    def sequence(seed, *where):
        out = tmp_path / f"{seed}-{where[0][2:]}.json"
        res = run_soak(*where, "--seed", seed, "--ops", 300, "--json", out)
        assert res.returncode == 0, res.stdout[-4000:] + res.stderr
        r = json.loads(out.read_text())
        return r["op_sequence_sha256"], r["ops"]

    first = sequence(5, "--dir", mounted_btrfs)
    fsutil.run("umount", str(mounted_btrfs))
    try:
        assert sequence(5, "--device", image) == first
        assert sequence(6, "--device", image) != first
    finally:
        fsutil.run("mount", "-o", "loop", str(image), str(mounted_btrfs))


def test_refuses_a_used_filesystem(mounted_btrfs):
    (mounted_btrfs / "someone's file").write_text("x")
    res = run_soak("--dir", mounted_btrfs, "--ops", 10)
    assert res.returncode == 2
    assert "fresh, empty btrfs" in res.stderr


@pytest.mark.parametrize("bug", sorted(soak.PLANTED))
def test_planted_bug_is_caught(bug, image):
    res = run_soak("--device", image, "--seed", 3, "--plant-bug", bug,
                   "--seconds", 3 if bug == "kernel_log" else 30)
    assert res.returncode == 1, res.stdout[-4000:] + res.stderr
    lines = res.stdout.splitlines()
    caught = [line for line in lines if line.startswith(("soak: MISMATCH:", "soak: FAILED:"))]
    print(caught[0])
    if bug == "kernel_log":
        assert "checksum messages in the kernel log" in caught[0]
    else:
        assert caught[0].startswith("soak: MISMATCH:")
    if bug == "snapshot_ro":
        assert "reader" in caught[0] and "readers' checksum" in caught[0]
    assert "soak: seed 3; the main thread's last" in res.stdout
    assert sum(line.startswith("  #") for line in lines) >= 10
