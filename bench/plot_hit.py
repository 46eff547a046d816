#!/usr/bin/python3
"""Plot results/hit.json: median IOPS per workload of hot-cache reads, stock
(the clone's own page cache) against pcshare (the shared extent cache), with
every sample as a dot and the pcshare/stock ratio above each pair.
usage: python3 -m bench.plot_hit JSON PNG"""
import sys

from bench.plotting import main, plt

KERNELS = (("stock", "tab:red"), ("pcshare", "tab:green"))


def draw(result):
    workloads = list(dict.fromkeys(r["workload"] for r in result["runs"]))
    fig, axes = plt.subplots(1, len(workloads), figsize=(4 * len(workloads), 4.2))
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


if __name__ == "__main__":
    sys.exit(main(__doc__, draw))
