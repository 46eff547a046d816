#!/usr/bin/python3
"""Plot results/uring.json: median IOPS of cold io_uring 4 KiB reads per
queue depth, one panel per pattern, stock against pcshare, every sample a
dot and the pcshare/stock ratio over each pair.
usage: python3 -m bench.plot_uring JSON PNG"""
import sys

from bench.plotting import main, plt

KERNELS = (("stock", "tab:red"), ("pcshare", "tab:green"))


def draw(result):
    patterns = list(dict.fromkeys(r["pattern"] for r in result["runs"]))
    depths = sorted({r["iodepth"] for r in result["runs"]})
    fig, axes = plt.subplots(1, len(patterns), figsize=(5 * len(patterns), 4.2), squeeze=False)
    for ax, pattern in zip(axes[0], patterns):
        for i, depth in enumerate(depths):
            for j, (kernel, colour) in enumerate(KERNELS):
                run = next((r for r in result["runs"] if (r["kernel"], r["pattern"],
                                                          r["iodepth"]) == (kernel, pattern, depth)),
                           None)
                if run is None:
                    continue
                x = i + (j - 0.5) * 0.35
                ax.bar(x, run["iops"], 0.35, color=colour, alpha=0.6,
                       label=kernel if i == 0 else None)
                ax.plot([x] * len(run["samples"]), run["samples"], "k.", ms=4)
            ratio = result.get("ratio", {}).get(f"{pattern} {depth}")
            if ratio:
                top = max(r["iops"] for r in result["runs"]
                          if r["pattern"] == pattern and r["iodepth"] == depth)
                ax.annotate(f"{ratio:.2f}x", (i, top), ha="center", va="bottom")
        ax.set_xticks(range(len(depths)), [f"qd {d}" for d in depths])
        ax.set_title(f"cold io_uring 4 KiB {pattern}")
        ax.set_ylabel("IOPS (median; dots: samples)")
        ax.legend()
    return fig


if __name__ == "__main__":
    sys.exit(main(__doc__, draw))
