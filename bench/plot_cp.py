#!/usr/bin/python3
"""Plot results/cp.json: per kernel and cp (Debian's cp with FICLONE,
patched cp with FICLONERANGE2, fio alone), fio's worst read and write
latency during the clone (bars; dots: each run) and the clone time.
usage: python3 -m bench.plot_cp JSON PNG"""
import sys

from bench.plotting import main, plt

SIDES = (("read", "tab:blue"), ("write", "tab:orange"))
CP = {"baseline": "fio alone", "stock": "Debian cp", "patched": "patched cp"}


def draw(result):
    groups = {}
    for r in result["runs"]:
        groups.setdefault((r["kernel"], r["cp"]), []).append(r)
    labels = [f"{kernel} kernel\n{CP.get(cp, cp)}" for kernel, cp in groups]
    fig, (lat, clone) = plt.subplots(1, 2, figsize=(11, 4.2),
                                     gridspec_kw={"width_ratios": [2, 1]})
    for j, (side, colour) in enumerate(SIDES):
        for i, runs in enumerate(groups.values()):
            maxes = [r["latency_ms"][side]["max_ms"] for r in runs]
            x = i + (j - 0.5) * 0.38
            lat.bar(x, max(maxes), 0.36, color=colour, alpha=0.6,
                    label=f"{side} max" if i == 0 else None)
            lat.plot([x] * len(maxes), maxes, "k.", ms=4)
    lat.set_yscale("log")
    lat.set_ylabel("fio latency, max over the run (ms)")
    lat.set_xticks(range(len(labels)), labels)
    lat.set_title(f"4 KiB randrw during cp --reflink, {result['extents']:,} extents")
    lat.legend()
    cloned = [(label, [r["clone_seconds"] for r in runs])
              for label, runs in zip(labels, groups.values()) if runs[0]["clone_seconds"]]
    for i, (label, times) in enumerate(cloned):
        clone.bar(i, sorted(times)[len(times) // 2], 0.6, color="tab:grey", alpha=0.6)
        clone.plot([i] * len(times), times, "k.", ms=4)
    clone.set_xticks(range(len(cloned)), [label for label, _ in cloned])
    clone.set_ylabel("clone time (s; bar: median)")
    return fig


if __name__ == "__main__":
    sys.exit(main(__doc__, draw))
