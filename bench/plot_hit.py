#!/usr/bin/python3
"""Plot results/hit.json: median IOPS per workload of hot-cache reads, stock
(the clone's own page cache) against pcshare (the shared extent cache), with
every sample as a dot and the pcshare/stock ratio above each pair; with
paired samples, a last panel of each boot's clone/plain IOPS ratios per
kernel (pcshare: a cache hit over a page cache hit; stock: the control).
usage: python3 -m bench.plot_hit JSON PNG"""
import sys

from bench.plotting import main, plt

KERNELS = (("stock", "tab:red"), ("pcshare", "tab:green"))


def draw(result):
    workloads = list(dict.fromkeys(r["workload"] for r in result["runs"]))
    paired = result.get("paired", {})
    panels = len(workloads) + bool(paired)
    fig, axes = plt.subplots(1, panels, figsize=(4 * panels, 4.2))
    if paired:
        draw_paired(axes[-1], workloads, paired)
    for ax, workload in zip(axes, workloads):
        for i, (kernel, colour) in enumerate(KERNELS):
            run = next((r for r in result["runs"]
                        if r["kernel"] == kernel and r["workload"] == workload), None)
            if run is None:
                continue
            ax.bar(i, run["iops_median"], 0.6, color=colour, alpha=0.6, label=kernel)
            ax.plot([i] * len(run["samples"]), run["samples"], "k.", ms=4)
        ratio = result.get("ratio", {}).get(workload)
        ax.set_title(f"{workload}" + (f": pcshare/stock {ratio:.2f}" if ratio else ""))
        ax.set_xticks(range(len(KERNELS)), [k for k, _ in KERNELS])
        ax.set_ylabel("IOPS (median; dots: samples)")
    return fig


def draw_paired(ax, workloads, paired):
    for w, workload in enumerate(workloads):
        for i, (kernel, colour) in enumerate(KERNELS):
            p = paired.get(workload, {}).get(kernel)
            if p is None:
                continue
            x = w + (i - 0.5) * 0.3
            ax.plot([x] * len(p["ratios"]), p["ratios"], ".", color=colour, ms=4,
                    label=kernel if w == 0 else None)
            ax.errorbar(x, p["median"], yerr=[[p["median"] - p["ci95"][0]],
                                              [p["ci95"][1] - p["median"]]],
                        fmt="_", color="k", ms=12, capsize=3)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.axhline(0.98, color="grey", lw=0.8, ls="--")
    ax.set_xticks(range(len(workloads)), workloads)
    ax.set_ylabel("clone / plain file IOPS, same boot")
    ax.set_title("paired (median, 95% interval)")
    ax.legend(fontsize=8)


if __name__ == "__main__":
    sys.exit(main(__doc__, draw))
