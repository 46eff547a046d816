"""Where a measurement goes.

A run writes to the run directory (runs/ in the checkout, or $PCSHARE_RUNS),
never to results/: results/ holds the figures the README was generated from,
and tests/host/test_readme_tables.py checks the README against them. So
`make demo` or any `make bench-NAME` followed by `make test` passes whatever
the new run measured. Publishing a run is deliberate: `make publish` copies
runs/ into results/ and regenerates the README's tables.
"""
import os
from pathlib import Path

TOP = Path(__file__).resolve().parent.parent
COMMITTED = TOP / "results"


def run_dir():
    """The directory new runs write to (created on first use)."""
    path = Path(os.environ.get("PCSHARE_RUNS") or TOP / "runs")
    path.mkdir(parents=True, exist_ok=True)
    return path


def run_file(name):
    """Path for NAME (e.g. "demo.json", "clone.png") in the run directory."""
    return str(run_dir() / name)
