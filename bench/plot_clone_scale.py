#!/usr/bin/python3
"""Plot results/clone-scale.json on log axes: clone time, the longest wait
of a reader and of the writer, and the slab the clone grew, against the
extents of the cloned file; one line per kernel and method, dotted out to
10^8 extents where the results file has a fit.
usage: python3 -m bench.plot_clone_scale JSON PNG"""
import sys

from bench.clone_scale import metric
from bench.plotting import main, plt

STYLE = {("stock", "ficlone"): "tab:red", ("pcshare", "ficlone"): "tab:orange",
         ("pcshare", "ficlonerange2_100ms"): "tab:green"}
LABELS = {"ficlone": "FICLONE", "ficlonerange2_100ms": "FICLONERANGE2, 100 ms"}
PANELS = (("clone_seconds", "clone time, s"),
          ("reader_max_ms", "longest read during the clone, ms"),
          ("writer_max_ms", "longest write during the clone, ms"),
          ("slab_mib", "slab growth during the clone, MiB"))


def value(run, name):
    if name == "slab_mib":
        return run["memory"]["slab_mib"]
    return metric(run, name)


def draw(result):
    fig, axes = plt.subplots(1, len(PANELS), figsize=(4.4 * len(PANELS), 4.2))
    keys = list(dict.fromkeys((r["kernel"], r["method"]) for r in result["runs"]))
    for ax, (name, title) in zip(axes, PANELS):
        for key in keys:
            runs = sorted((r for r in result["runs"] if (r["kernel"], r["method"]) == key),
                          key=lambda r: r["extents"])
            colour = STYLE.get(key, "tab:blue")
            xs = [r["extents"] for r in runs]
            ax.plot(xs, [value(r, name) for r in runs], "o-", color=colour,
                    label=f"{key[0]}, {LABELS.get(key[1], key[1])}")
            for f in result.get("fits", []):
                if (f["kernel"], f["method"], f["metric"]) == (*key, name):
                    ax.plot([xs[-1], 1e8], [value(runs[-1], name), f["at_1e8"]], ":",
                            color=colour)
        ax.set_xscale("log")
        # Slab growth spans one decade: a log axis would show one tick.
        ax.set_yscale("linear" if name == "slab_mib" else "log")
        ax.set_xlabel("extents in the cloned file")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    return fig


if __name__ == "__main__":
    sys.exit(main(__doc__, draw))
