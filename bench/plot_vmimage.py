#!/usr/bin/python3
"""Plot results/vm.json: page cache growth and disk bytes (in images) after
N clones, per fio engine and subvolume (writable, then read-only), stock
against pcshare.
usage: python3 -m bench.plot_vmimage JSON PNG"""
import sys

from bench.plotting import main, plt
from bench.vmimage import subvolume_of


def draw(result):
    image = result["image_bytes"]
    engines = list(dict.fromkeys((subvolume_of(r), r["engine"]) for r in result["runs"]))
    fig, axes = plt.subplots(2, len(engines), figsize=(4 * len(engines), 7),
                             sharey="row", squeeze=False)
    for col, engine in enumerate(engines):
        for row, (key, label) in enumerate((("cache_growth_bytes", "page cache growth"),
                                            ("disk_read_bytes", "disk bytes read"))):
            ax = axes[row][col]
            # Stock wide and pale under pcshare, so equal lines stay visible.
            for kernel, style in (("stock", dict(color="tab:red", lw=6, alpha=0.35, ms=11)),
                                  ("pcshare", dict(color="tab:green", lw=1.5, ms=5))):
                for access, line in (("seq", "o-"), ("rand", "s--")):
                    pts = sorted((r["clones"], r[key] / image) for r in result["runs"]
                                 if (r["kernel"], (subvolume_of(r), r["engine"]), r["access"])
                                 == (kernel, engine, access))
                    if pts:
                        ax.plot(*zip(*pts), line, label=f"{kernel} {access}", **style)
            ax.set_title(f"{engine[1]}, {engine[0]}: {label}", fontsize=10)
            ax.set_xlabel("clones read")
            ax.grid(alpha=0.3)
        axes[0][col].legend(fontsize=8)
    for row, label in enumerate(("cache growth / image", "disk bytes / image")):
        axes[row][0].set_ylabel(label)
    return fig


if __name__ == "__main__":
    sys.exit(main(__doc__, draw))
