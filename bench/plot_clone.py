#!/usr/bin/python3
"""Plot results/clone.json: per kernel and method, the max latency of each
job kind (bar: worst over the repeats, tick: best) and the clone time, beside
each kernel's no-clone baseline.
usage: python3 -m bench.plot_clone CLONE_JSON OUT_PNG"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from bench.clone_results import KINDS, groups  # noqa: E402


def main():
    if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) == 2 else 2
    results = json.load(open(sys.argv[1]))
    grouped = groups(results)
    labels = [f"{kernel}\n{method}" for kernel, method in grouped]
    fig, (lat_ax, time_ax) = plt.subplots(1, 2, figsize=(15, 5.5),
                                          gridspec_kw={"width_ratios": [3, 1]})
    width = 0.8 / len(KINDS)
    for i, kind in enumerate(KINDS):
        xs = [j + (i - (len(KINDS) - 1) / 2) * width for j in range(len(grouped))]
        maxima = [[max(r["latency_ms"][kind]["max"], 0.01) for r in runs]
                  for runs in grouped.values()]
        lat_ax.bar(xs, [max(m) for m in maxima], width, label=kind)
        lat_ax.scatter(xs, [min(m) for m in maxima], marker="_", s=60,
                       color="black", zorder=3)
    lat_ax.axhline(100, color="grey", linestyle="--", linewidth=1)
    lat_ax.set_yscale("log")
    lat_ax.set_ylabel("max latency (ms, log): bar worst run, tick best run")
    lat_ax.set_xticks(range(len(grouped)), labels, fontsize=7)
    lat_ax.legend(title="4 KiB job")
    lat_ax.set_title(f"Cloning a btrfs file of {results['extents']} extents "
                     "while readers and a writer run")
    timed = [(label, [r["clone_seconds"] for r in runs])
             for label, runs in zip(labels, grouped.values())
             if runs[0]["clone_seconds"] is not None]
    for x, (_, times) in enumerate(timed):
        time_ax.scatter([x] * len(times), times, color="tab:purple", s=18)
    time_ax.set_xticks(range(len(timed)), [t[0] for t in timed], fontsize=7, rotation=90)
    time_ax.set_ylim(bottom=0)
    time_ax.set_ylabel("clone time (s), one dot per run")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
