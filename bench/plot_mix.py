#!/usr/bin/python3
"""Plot results/mix.json as the seed report drew it: mean completion
latency per job for Figures 2-6 (bars, stock against pcshare), read and
write latency against the number of children (Figures 7 and 8), and page
cache growth and disk bytes against the number of children.
usage: python3 -m bench.plot_mix JSON PNG"""
import sys

from bench.plotting import main, plt

KERNELS = (("stock", "tab:red"), ("pcshare", "tab:green"))  # the report's colours
TITLES = {2: "both read", 3: "child reads, parent writes", 4: "child writes, parent reads",
          5: "both write", 6: "both read and write"}


def draw(result):
    runs = result["runs"]
    fig, axes = plt.subplots(2, 5, figsize=(22, 8))
    for ax, figure in zip(axes[0], range(2, 7)):
        rows = [r for r in runs if r["figure"] == figure]
        labels = sorted({f"{r['job']} {r['kind']}" for r in rows})
        for k, (kernel, colour) in enumerate(KERNELS):
            values = [next((r["lat_ms"]["mean"] for r in rows if r["kernel"] == kernel
                            and f"{r['job']} {r['kind']}" == label), 0) for label in labels]
            ax.bar([i + (k - 0.5) * 0.4 for i in range(len(labels))], values, 0.4,
                   color=colour, label=kernel)
        ax.set_xticks(range(len(labels)), labels, fontsize=8)
        ax.set_title(f"Fig. {figure}: {TITLES[figure]}", fontsize=10)
        ax.set_ylabel("mean completion latency (ms)")
        ax.legend(fontsize=8)

    def against_children(ax, figure, value, ylabel, title):
        for kernel, colour in KERNELS:
            pts = sorted((r["children"], value(r)) for r in runs
                         if r["kernel"] == kernel and r["figure"] == figure)
            if pts:
                ax.plot(*zip(*pts), "o-", color=colour, label=kernel)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("children")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)

    against_children(axes[1][0], 7, lambda r: r["lat_ms"]["mean"], "ms",
                     "Fig. 7: average read latency")
    against_children(axes[1][1], 8, lambda r: r["lat_ms"]["mean"], "ms",
                     "Fig. 8: average write latency")
    against_children(axes[1][2], 7, lambda r: r["cache_growth_bytes"] / 2**20, "MiB",
                     "page cache growth (Figs. 7-8 runs)")
    against_children(axes[1][3], 7, lambda r: r["disk_read_bytes"] / 2**20, "MiB",
                     "disk bytes read (Figs. 7-8 runs)")
    axes[1][4].axis("off")
    return fig


if __name__ == "__main__":
    sys.exit(main(__doc__, draw))
