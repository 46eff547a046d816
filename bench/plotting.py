"""What every bench.plot_* module does around its drawing: arguments, the
results file, saving the PNG. Run under Debian's python3 (matplotlib)."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402,F401  (re-exported to the plot scripts)


__all__ = ["main", "plt"]


def main(doc, draw, dpi=100):
    """usage: python3 -m bench.plot_X RESULTS_JSON OUT_PNG; draw(results) returns a figure."""
    if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
        print(doc)
        return 0 if len(sys.argv) == 2 else 2
    with open(sys.argv[1]) as f:
        fig = draw(json.load(f))
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=dpi)
    return 0
