"""Results files name the series they measured: the hash must be the one
scripts/kernel.sh stamps on the tree the pcshare kernel is built from."""
import subprocess
import sys
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "bench"))
import guestbench  # noqa: E402


def test_provenance_hash_is_the_build_stamp():
    stamp = subprocess.run([str(TOP / "scripts/kernel.sh"), "series-hash"], check=True,
                           capture_output=True, text=True).stdout.strip()
    assert len(stamp) == 64
    prov = guestbench.provenance()
    assert prov["series_sha256"] == stamp[:16]
    assert prov["accel"] in ("kvm", "tcg")

