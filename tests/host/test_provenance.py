"""Results files name the series they measured: the hash must be the one
scripts/kernel.sh stamps on the tree the pcshare kernel is built from."""
import subprocess
import sys
from pathlib import Path

from bench import guestbench

TOP = Path(__file__).resolve().parents[2]


def test_provenance_hash_is_the_build_stamp():
    stamp = subprocess.run([str(TOP / "scripts/kernel.sh"), "series-hash"], check=True,
                           capture_output=True, text=True).stdout.strip()
    assert len(stamp) == 64
    prov = guestbench.provenance()
    assert prov["series_sha256"] == stamp[:16]
    assert prov["accel"] in ("kvm", "tcg")



def test_demo_uses_the_harness_not_the_vm_benchmark():
    """bench/demo.py uses the VM runner, harness/vm.py; make bench-vm's
    bench/vm.py (now bench/vmimage.py) once shadowed it and every `make demo`
    died before booting."""
    done = subprocess.run([sys.executable, "-m", "bench.demo", "--size", "1000"], cwd=TOP,
                          capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert "--size must be a positive multiple of 4 KiB" in done.stderr
