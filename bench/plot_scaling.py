#!/usr/bin/python3
"""Plot results/scaling.json: aggregate MiB/s of N cold readers at once,
one panel per file kind (distinct files, clones of one file), stock
against pcshare, with every sample as a dot.
usage: python3 -m bench.plot_scaling JSON PNG"""
import sys

from bench.plotting import main, plt

KERNELS = (("stock", "tab:red"), ("pcshare", "tab:green"))


def draw(result):
    kinds = list(dict.fromkeys(r["files"] for r in result["runs"]))
    fig, axes = plt.subplots(1, len(kinds), figsize=(5 * len(kinds), 4.2), squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        for kernel, colour in KERNELS:
            runs = sorted((r for r in result["runs"]
                           if r["kernel"] == kernel and r["files"] == kind),
                          key=lambda r: r["readers"])
            if not runs:
                continue
            ax.plot([r["readers"] for r in runs], [r["mib_per_s"] for r in runs], "o-",
                    color=colour, label=kernel)
            for r in runs:
                ax.plot([r["readers"]] * len(r["samples"]), r["samples"], "k.", ms=3)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("readers at once")
        ax.set_ylabel("MiB/s, all readers (median; dots: samples)")
        ax.set_title(f"{kind}, {result.get('cpus', '?')} vCPUs")
        ax.legend()
    return fig


if __name__ == "__main__":
    sys.exit(main(__doc__, draw))
