"""`make demo` (or any `make bench-NAME`) followed by `make test` must pass:
new runs go to the run directory (harness/results.py), and only `make
publish` changes results/, which the README's tables are checked against."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
BENCHES = ["demo", "clone", "clone_items", "lockhold", "unshared", "containers", "vmimage",
           "mix", "hit"]


def test_benchmarks_default_to_the_run_directory(tmp_path):
    env = dict(os.environ, PCSHARE_RUNS=str(tmp_path))
    for name in BENCHES:
        text = (TOP / f"bench/{name}.py").read_text()
        assert not re.search(r'TOP\s*/\s*f?"results', text), f"bench/{name}.py writes results/"
        helptext = subprocess.run([sys.executable, "-m", f"bench.{name}", "--help"], cwd=TOP,
                                  env=env, capture_output=True, text=True, check=True).stdout
        assert "results/" not in re.sub(r"\s+", "", helptext).split("--out", 1)[-1][:200], name
    guestbench = (TOP / "bench/guestbench.py").read_text()
    assert 'default=run_file(f"{name}.json")' in guestbench


def test_a_new_run_does_not_break_the_readme_check(tmp_path):
    """The sequence `make demo; make test`: a demo run that measured other
    figures lands in the run directory and the README check still passes."""
    committed = json.loads((TOP / "results/demo.json").read_text())
    committed["runs"][0]["seconds"] = committed["runs"][0].get("seconds", 0) + 1234.5
    env = dict(os.environ, PCSHARE_RUNS=str(tmp_path), PYTHONPATH=str(TOP))
    out = subprocess.run([sys.executable, "-c",
                          "from harness.results import run_file; print(run_file('demo.json'))"],
                         env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert Path(out).parent == tmp_path
    Path(out).write_text(json.dumps(committed))
    check = subprocess.run([sys.executable, "-m", "bench.tables", "--check"], cwd=TOP,
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr + check.stdout


def test_publish_copies_runs_into_results(tmp_path):
    """`make publish` is the one step that moves a run into results/ and the
    README; on a copy of the checkout, so the real one is untouched."""
    copy = tmp_path / "tree"
    copy.mkdir()
    for part in ("Makefile", "README.md", "docs", "bench", "harness", "results"):
        src = TOP / part
        (shutil.copytree if src.is_dir() else shutil.copy)(src, copy / part)
    runs = copy / "runs"
    runs.mkdir()
    demo = json.loads((TOP / "results/demo.json").read_text())
    shutil.copy(TOP / "results/demo.json", runs / "demo.json")
    done = subprocess.run(["make", "-s", "-C", str(copy), "publish", "PCSHARE_RUNS="],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr + done.stdout
    assert json.loads((copy / "results/demo.json").read_text()) == demo
    check = subprocess.run([sys.executable, "-m", "bench.tables", "--check"], cwd=copy,
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
