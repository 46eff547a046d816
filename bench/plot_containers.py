#!/usr/bin/python3
"""Plot results/containers.json: page cache growth (in images) against the
number of containers, per kernel and step, one row of plots per container
layout. usage: python3 -m bench.plot_containers JSON PNG"""
import sys

from bench.plotting import main, plt

STEPS = ("read_all", "entrypoint", "running")


def draw(result):
    image = result["image_bytes"]
    layouts = list(dict.fromkeys(r.get("layout", "snapshots") for r in result["runs"]))
    fig, axes = plt.subplots(len(layouts), 3, figsize=(15, 4.2 * len(layouts)), sharey=True,
                             squeeze=False)
    for row, layout in zip(axes, layouts):
        for ax, step in zip(row, STEPS):
            for kernel, style in (("stock", "o-"), ("pcshare", "s-")):
                rows = sorted((r["containers"], r["cache_growth_bytes"] / image)
                              for r in result["runs"]
                              if r["kernel"] == kernel and r["step"] == step
                              and r.get("layout", "snapshots") == layout)
                if rows:
                    ax.plot(*zip(*rows), style, label=kernel)
            ax.set_title(f"{layout}, {step}: page cache growth")
            ax.set_xlabel("containers")
            ax.grid(alpha=0.3)
            ax.legend()
        row[0].set_ylabel(f"growth / image ({image / 2**20:.0f} MiB)")
    return fig


if __name__ == "__main__":
    sys.exit(main(__doc__, draw))
