#!/usr/bin/python3
"""Plot results/clone.json: max latency per job kind and clone time, one
bar group per kernel and method. usage: plot_clone.py CLONE_JSON OUT_PNG"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) == 2 else 2
    results = json.load(open(sys.argv[1]))
    runs = results["runs"]
    labels = [f"{r['kernel']}\n{r['method']}" for r in runs]
    kinds = ["buffered", "direct", "mmap", "writer"]
    fig, (lat_ax, time_ax) = plt.subplots(1, 2, figsize=(14, 5),
                                          gridspec_kw={"width_ratios": [3, 1]})
    width = 0.8 / len(kinds)
    for i, kind in enumerate(kinds):
        xs = [j + (i - (len(kinds) - 1) / 2) * width for j in range(len(runs))]
        lat_ax.bar(xs, [max(r["latency_ms"][kind]["max"], 0.01) for r in runs], width,
                   label=kind)
    lat_ax.axhline(100, color="grey", linestyle="--", linewidth=1)
    lat_ax.set_yscale("log")
    lat_ax.set_ylabel("max latency during the clone (ms, log)")
    lat_ax.set_xticks(range(len(runs)), labels, fontsize=8)
    lat_ax.legend(title="4 KiB job")
    lat_ax.set_title(f"Cloning a btrfs file of {results['extents']} extents")
    time_ax.bar(range(len(runs)), [r["clone_seconds"] for r in runs], color="tab:purple")
    time_ax.set_xticks(range(len(runs)), labels, fontsize=7, rotation=90)
    time_ax.set_ylabel("clone time (s)")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
