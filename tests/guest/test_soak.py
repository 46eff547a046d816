"""The soak (tests/soak.py) on the scratch disk, under each of the btrfs
fixture's mount option sets (so through the shared extent cache on the
pcshare kernel): $PCSHARE_SOAK_SECONDS (unset: skipped) of random operations
with a random seed ($PCSHARE_SOAK_SEED to repeat one) find nothing, and a
planted model bug is found."""
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

# The random run is the debug kernel's widest sweep of the cache's paths.
pytestmark = pytest.mark.debug_kernel
SOAK = Path(__file__).resolve().parent.parent / "soak.py"
# make test sets it for one pcshare kernel: 180 s on the debug kernel when
# it runs (lockdep and KASAN are where a long random run finds the most),
# else 60 s per option set on the default one; minutes per option set and
# kernel would not fit CI's 90 minutes.
SECONDS = float(os.environ.get("PCSHARE_SOAK_SECONDS", "0"))


def run_soak(mnt, out, *args):
    res = subprocess.run([sys.executable, str(SOAK), "--dir", str(mnt), "--json", str(out),
                          *map(str, args)], capture_output=True, text=True,
                         timeout=max(SECONDS, 60) + 900)
    sys.stdout.write(res.stdout[-20000:])  # shown by pytest when the test fails
    return res


def test_soak_finds_nothing(btrfs, tmp_path):
    if not SECONDS:
        pytest.skip("PCSHARE_SOAK_SECONDS is not set: make test soaks on one pcshare kernel only")
    seed = int(os.environ.get("PCSHARE_SOAK_SEED") or random.randrange(1 << 32))
    res = run_soak(btrfs, tmp_path / "soak.json", "--seed", seed, "--seconds", SECONDS)
    assert res.returncode == 0, f"seed {seed}: " + res.stdout[-3000:] + res.stderr
    r = json.loads((tmp_path / "soak.json").read_text())
    assert r["mismatches"] == 0 and r["failures"] == []
    assert r["reads_verified"] > r["reader_reads_verified"] > 0
    assert r["bytes_verified"] > 0 and r["ops_total"] > 0


def test_soak_catches_a_planted_bug(btrfs, tmp_path):
    res = run_soak(btrfs, tmp_path / "soak.json", "--seed", 1, "--plant-bug", "punch_hole",
                   "--seconds", 60)
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr
    assert "soak: MISMATCH:" in res.stdout
    r = json.loads((tmp_path / "soak.json").read_text())
    assert r["mismatches"] >= 1 and r["last_ops"]
