#!/usr/bin/python3
"""Plot results/containers.json: page cache growth (in images) against the
number of containers, per kernel and step. usage: plot_containers.py JSON PNG"""
import sys

from plotting import main, plt


def draw(result):
    image = result["image_bytes"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5), sharey=True)
    for ax, step in zip(axes, ("read_all", "entrypoint", "running")):
        for kernel, style in (("stock", "o-"), ("pcshare", "s-")):
            rows = sorted((r["containers"], r["cache_growth_bytes"] / image)
                          for r in result["runs"] if r["kernel"] == kernel and r["step"] == step)
            if rows:
                ax.plot(*zip(*rows), style, label=kernel)
        ax.set_title(f"{step}: page cache growth")
        ax.set_xlabel("containers (snapshots of one image)")
        ax.grid(alpha=0.3)
        ax.legend()
    axes[0].set_ylabel(f"growth / image size ({image / 2**20:.0f} MiB)")
    return fig


if __name__ == "__main__":
    sys.exit(main(__doc__, draw))
