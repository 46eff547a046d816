#!/usr/bin/env python3
"""The result tables in README.md and docs/*.md, generated from results/*.json.

Each table sits between `<!-- table:NAME -->` and `<!-- /table:NAME -->` in
README.md or any docs/*.md; `--write` regenerates every block in place,
`--check` (run by the host suite) fails naming the file and table that
differ from what its results file says, so a rerun benchmark cannot leave
stale numbers in the documentation.
"""
import argparse
import json
import math
import re
import statistics
import sys
from pathlib import Path

from bench import clone_results
from bench.vmimage import subvolume_of

TOP = Path(__file__).resolve().parent.parent
RESULTS = TOP / "results"


def documents():
    """The files whose table blocks are generated: README.md and docs/*.md."""
    return [TOP / "README.md", *sorted((TOP / "docs").glob("*.md"))]


def load(name):
    return json.loads((RESULTS / name).read_text())


def ratio(value, unit, bold=False):
    text = f"{value / unit:.2f}x" if round(value / unit, 2) else "0"
    return f"**{text}**" if bold else text


def row(*cells):
    return "| " + " | ".join(str(c) for c in cells) + " |"


def containers():
    """Per layout: reading every file at the largest N, starting containers
    one after the other and all at once at N = 1 and the largest N, and
    the upgraded-image pair; start time as pcshare's over stock's."""
    data = load("containers.json")
    image = data["image_bytes"]
    runs = {(r["kernel"], r.get("layout", "snapshots"), r["step"], r["containers"]): r
            for r in data["runs"]}
    most = max(r["containers"] for r in data["runs"] if r["step"] == "read_all")
    labels = {"read_all_upgrade": "read_all, old + upgraded",
              "entrypoint_upgrade": "entrypoint, old + upgraded"}
    lines = [row("layout", "step", "N", "stock cache", "pcshare cache", "stock disk",
                 "pcshare disk", "pcshare time / stock"),
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    wanted = [("read_all", most), ("entrypoint", 1), ("entrypoint", most), ("running", 1),
              ("running", most), ("read_all_upgrade", 2), ("entrypoint_upgrade", 2),
              ("fork_exit", 64)]
    for layout in dict.fromkeys(key[1] for key in runs):
        for step, n in wanted:
            stock, pcshare = runs.get(("stock", layout, step, n)), runs.get(
                ("pcshare", layout, step, n))
            if not stock or not pcshare:
                continue
            bold = n == most and step == "running"
            lines.append(row(layout, labels.get(step, step), n,
                             ratio(stock["cache_growth_bytes"], image, bold),
                             ratio(pcshare["cache_growth_bytes"], image, bold),
                             ratio(stock["disk_read_bytes"], image),
                             ratio(pcshare["disk_read_bytes"], image),
                             f"{pcshare['seconds'] / stock['seconds']:.2f}x"))
    return lines


def vm():
    data = load("vm.json")
    image = data["image_bytes"]
    most = max(r["clones"] for r in data["runs"])
    labels = {"psync": "psync (buffered `pread`)", "io_uring": "io_uring (buffered)",
              "libaio_direct": "libaio, O_DIRECT", "mmap": "mmap"}
    by, first = {}, {}
    for r in data["runs"]:
        step = (subvolume_of(r), r["engine"])
        if r["clones"] == most:
            by.setdefault((step, r["kernel"]), []).append(r)
        if r["clones"] == 1 and r["access"] == "seq":
            first[(step, r["kernel"])] = r["seconds"]
    lines = [row("subvolume", "engine (seq and rand alike)", "N", "stock cache",
                 "pcshare cache", "stock disk", "pcshare disk",
                 "first clone's time, pcshare / stock"),
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for step in dict.fromkeys((subvolume_of(r), r["engine"]) for r in data["runs"]):
        stock, pcshare = by[(step, "stock")], by[(step, "pcshare")]
        # Bold where the cache makes the difference: at most half of stock's.
        shares = lambda key: (max(r[key] for r in pcshare)  # noqa: E731
                              <= max(r[key] for r in stock) / 2)
        # Every access pattern gave the same bytes; show the larger.
        cell = lambda runs, key, bold: ratio(max(r[key] for r in runs), image, bold)  # noqa: E731
        lines.append(row(step[0], labels.get(step[1], step[1]), most,
                         cell(stock, "cache_growth_bytes", False),
                         cell(pcshare, "cache_growth_bytes", shares("cache_growth_bytes")),
                         cell(stock, "disk_read_bytes", False),
                         cell(pcshare, "disk_read_bytes", shares("disk_read_bytes")),
                         f"{first[(step, 'pcshare')] / first[(step, 'stock')]:.2f}x"))
    return lines


def counts_instructions(hit_data):
    """Was this bench-hit run timed by the guest's instruction count?"""
    return hit_data.get("clock", "host") != "host"


def lockhold_read_seconds(runs):
    """Per kernel, the median over boots of the one huge read's time."""
    return {k: statistics.median(r["read_seconds"] for r in runs if r["kernel"] == k)
            for k in KERNELS}


def hit():
    data = load("hit.json")
    labels = {"rand_4k": "4 KiB random reads", "rand_64k": "64 KiB random reads",
              "seq_1m": "1 MiB sequential reads"}
    iops = {(r["kernel"], r["workload"]): r["iops_median"] for r in data["runs"]}
    paired = data.get("paired", {})
    head = ["workload", "stock", "pcshare (`shared_cache`)", "pcshare / stock"]
    if paired:
        head += ["clone / plain file, same boot: stock", "pcshare"]
    lines = [row(*head), "|---" + "|---:" * (len(head) - 1) + "|"]
    for workload, value in data["ratio"].items():
        cells = [labels.get(workload, workload), f"{iops[('stock', workload)]:,.0f} IOPS",
                 f"{iops[('pcshare', workload)]:,.0f} IOPS", f"{value:.2f}"]
        if paired:
            cells += [f"{p['median']:.3f} ({p['ci95'][0]:.3f}-{p['ci95'][1]:.3f})"
                      for p in (paired[workload][k] for k in ("stock", "pcshare"))]
        lines.append(row(*cells))
    return lines


def sampled(name, key, labels, value, unit):
    """A guestbench.sampled() results file as a table: one row per KEY
    (run fields), stock's and pcshare's median VALUE and their ratio."""
    data = load(name)
    median = {(r["kernel"], *(r[k] for k in key)): r[value] for r in data["runs"]}
    lines = [row(*labels, "stock", "pcshare (`shared_cache`)", "pcshare / stock"),
             "|" + "---|" * len(key) + "---:|---:|---:|"]
    for rest in dict.fromkeys(tuple(r[k] for k in key) for r in data["runs"]):
        stock, pcshare = median[("stock", *rest)], median[("pcshare", *rest)]
        lines.append(row(*rest, f"{stock:,.0f} {unit}", f"{pcshare:,.0f} {unit}",
                         f"{pcshare / stock:.2f}"))
    return lines


def lockstat(top=3):
    """bench-lockstat's table: per kernel and layout, all contentions over
    all lock acquisitions, then the TOP classes with the most contentions,
    their total wait and the call site that waited most."""
    data = load("lockstat.json")
    lines = [row("kernel", "files", "lock class", "contentions", "wait", "acquisitions",
                 "waited most in"), "|---|---|---|---:|---:|---:|---|"]
    for r in data["runs"]:
        if r["round"]:
            continue
        lines.append(row(r["kernel"], r["files"], "all", f"{r['contentions']:,}", "",
                         f"{r['acquisitions']:,}", ""))
        for lock in r["locks"][:top]:
            waited = max(lock["waited_in"].items(), key=lambda p: p[1], default=("", 0))[0]
            lines.append(row("", "", f"`{lock['class']}`", f"{lock['contentions']:,}",
                             f"{lock['wait_total_us'] / 1000:.2f} ms",
                             f"{lock['acquisitions']:,}", f"`{waited}`" if waited else ""))
    return lines


def unshared():
    data = load("unshared.json")
    median = {(r["kernel"], r["workload"]): r["median"] for r in data["runs"]}
    units = {r["workload"]: r["unit"] for r in data["runs"]}
    labels = {"seqread": "sequential read, 1 MiB requests", "randread4k": "4 KiB random reads"}
    lines = [row("workload", "stock", "pcshare (`shared_cache`)", "pcshare / stock"),
             "|---|---:|---:|---:|"]
    for workload, unit in units.items():
        digits = 1 if unit == "MB/s" else 0
        stock, pcshare = median[("stock", workload)], median[("pcshare", workload)]
        lines.append(row(labels.get(workload, workload), f"{stock:.{digits}f} {unit}",
                         f"{pcshare:.{digits}f} {unit}", f"{pcshare / stock:.2f}"))
    return lines


def clone_items():
    data = load("clone-items.json")
    labels = {"ficlone": "FICLONE", "clone2_adaptive": "FICLONERANGE2, adaptive chunks",
              "clone2_budget_10ms": "FICLONERANGE2, 10 ms budget",
              "clone2_chunk_1m": "FICLONERANGE2, fixed 1 MiB chunks"}
    items = data["items"]
    lines = [row("destination", "extent items", "vs the source"), "|---|---:|---:|"]
    for key, label in labels.items():
        if key in items:
            lines.append(row(label, items[key], f"{items[key] / items['src']:.1f}x"))
    return lines


def demo(name="demo.json"):
    data = load(name)
    mib = 1 << 20
    labels = {"read_source_cold": "read source, cold", "read_source_hot": "read source, hot",
              "read_clone_first": "read its clone, first time",
              "read_clone_again": "read the clone again",
              "read_n_clones": f"read {data['clones']} more clones"}
    by = {(r["kernel"], r["step"]): r for r in data["runs"]}
    lines = [row("step", "stock: time / disk / cache growth",
                 "pcshare: time / disk / cache growth"), "|---|---|---|"]
    for step in dict.fromkeys(r["step"] for r in data["runs"]):
        cells = []
        for kernel in ("stock", "pcshare"):
            r = by.get((kernel, step))
            shared = step.startswith("read_clone_first") or step == "read_n_clones"
            disk, growth = (f"{r[k] / mib:.0f} MiB" if round(r[k] / mib) else "0"
                            for k in ("disk_read_bytes", "cache_growth_bytes"))
            if shared:
                disk, growth = f"**{disk}**", f"**+{growth}**" if growth != "0" else "**0**"
            elif growth != "0":
                growth = "+" + growth
            cells.append(f"{r['seconds']:.1f} s / {disk} / {growth}" if r else "-")
        lines.append(row(labels.get(step, step), *cells))
    return lines


def cp_rows(data):
    """bench-cp's table: per kernel and cp, the median clone time and the
    worst read and write latency (max, and the mean's median) over the runs."""
    import statistics
    labels = {"baseline": "no clone (fio alone)", "stock": "Debian's cp (FICLONE)",
              "patched": f"patched cp (FICLONERANGE2, {data.get('budget_ms') or 100} ms budget)"}
    groups = {}
    for r in data["runs"]:
        groups.setdefault((r["kernel"], r["cp"]), []).append(r)
    lines = [row("kernel", "cp", "runs", "clone s (median)", "read max / mean ms",
                 "write max / mean ms"), "|---|---|---:|---:|---:|---:|"]
    for (kernel, cp_name), runs in groups.items():
        times = [r["clone_seconds"] for r in runs if r["clone_seconds"] is not None]
        cells = [f"{max(r['latency_ms'][side]['max_ms'] for r in runs):.0f} / "
                 f"{statistics.median(r['latency_ms'][side]['mean_ms'] for r in runs):.1f}"
                 for side in ("read", "write")]
        lines.append(row(kernel, labels.get(cp_name, cp_name), len(runs),
                         f"{statistics.median(times):.2f}" if times else "-", *cells))
    return lines


def sig(value):
    """VALUE with three significant digits and no exponent: 4.66, 23.5, 122."""
    if not value:
        return "0"
    return f"{value:.{max(0, 2 - math.floor(math.log10(abs(value))))}f}"


def span(values, fmt=sig):
    """One figure, or the lowest and highest as "LO-HI" when they differ."""
    lo, hi = fmt(min(values)), fmt(max(values))
    return lo if lo == hi else f"{lo}-{hi}"


def mix(name="mix.json"):
    """The seed report's figures the design changes most, as medians over
    boots; a cell over several fio jobs (parent and child) gives their range."""
    data = load(name)
    runs = data["runs"]
    most = max(r["children"] for r in runs)
    mib = 1 << 20

    def pick(kernel, figure, kind, children=1):
        return [r for r in runs if (r["kernel"], r["figure"], r["kind"], r["children"])
                == (kernel, figure, kind, children)]

    def latency(figure, kind, children=1):
        return [span([r["lat_ms"]["mean"] for r in pick(k, figure, kind, children)]) + " ms"
                for k in ("stock", "pcshare")]

    def traffic(figure, children=1):
        # Every job of one fio run shares the run's byte counts.
        return [f"{pick(k, figure, 'read', children)[0]['disk_read_bytes'] / mib:.0f} / "
                f"{pick(k, figure, 'read', children)[0]['cache_growth_bytes'] / mib:.0f} MiB"
                for k in ("stock", "pcshare")]

    lines = [row(f"figure ({data['engine']})", "stock", "pcshare"), "|---|---:|---:|",
             row("2, parent and child reading: mean read latency", *latency(2, "read")),
             row("2: disk bytes / page cache growth", *traffic(2)),
             row(f"7, {most} children read and written: mean read latency",
                 *latency(7, "read", most)),
             row("8, the same runs: mean write latency", *latency(8, "write", most)),
             row(f"7-8, {most} children: disk bytes / page cache growth", *traffic(7, most)),
             row("5, parent and child writing: mean write latency", *latency(5, "write")),
             row("6, parent and child reading and writing: mean write latency",
                 *latency(6, "write"))]
    return lines


def lockhold():
    """Writers' latency during one huge cold read: per writer the median over
    boots of each boot's worst write, then the worst write of all and the
    read's own time."""
    data = load("lockhold.json")
    runs = data["runs"]
    boots = len({(r["kernel"], r["round"]) for r in runs if r["kernel"] == "stock"})
    labels = {"read_range": "4 KiB writes inside the range being read",
              "other_region": "4 KiB writes beside it"}
    lines = [row(f"writer (max latency, median of {boots} boots)", "stock", "pcshare",
                 "pcshare / stock"), "|---|---:|---:|---:|"]
    for writer, label in labels.items():
        worst = {k: statistics.median(r["max_ms"] for r in runs
                                      if (r["kernel"], r["writer"]) == (k, writer))
                 for k in ("stock", "pcshare")}
        lines.append(row(label, f"{worst['stock']:.0f} ms", f"{worst['pcshare']:.0f} ms",
                         f"{worst['pcshare'] / worst['stock']:.2f}"))
    worst = {k: max(r["max_ms"] for r in runs if r["kernel"] == k) for k in ("stock", "pcshare")}
    lines.append(row("worst single write, any boot", f"{worst['stock']:.0f} ms",
                     f"{worst['pcshare']:.0f} ms", f"{worst['pcshare'] / worst['stock']:.2f}"))
    read = {(r["kernel"], r["round"]): r["read_seconds"] for r in runs}
    seconds = {k: [v for (kernel, _), v in read.items() if kernel == k]
               for k in ("stock", "pcshare")}
    ratios = [read[("pcshare", n)] / read[("stock", n)] for _, n in read
              if ("pcshare", n) in read and ("stock", n) in read]
    size = f"{data['size'] / (1 << 30):.0f} GiB"
    one = lambda v: f"{v:.1f}"  # noqa: E731
    lines.append(row(f"the {size} `pread` itself, per boot", f"{span(seconds['stock'], one)} s",
                     f"{span(seconds['pcshare'], one)} s",
                     span(ratios, lambda v: f"{v:.2f}")))
    return lines


def verdict(value, goal, higher_is_better=True):
    """'met', or by how much VALUE misses GOAL, in percent of the goal."""
    miss = (goal - value) / goal if higher_is_better else (value - goal) / goal
    return "met" if miss <= 0 else f"missed by {miss * 100:.1f}%"


def targets():
    """Issue 26's targets against stock, each from its results file: the
    goal, what was measured and whether it is met."""
    lines = [row("read path", "goal", "measured (pcshare / stock)", "met?", "measured by"),
             "|---|---:|---:|---|---|"]
    median = lockhold_read_seconds(load("lockhold.json")["runs"])
    value = median["pcshare"] / median["stock"]
    lines.append(row("one cold 1 GiB `pread` (time, median of boots) while writers write",
                     "at most 1.10x", f"{value:.2f}x", verdict(value, 1.10, False),
                     "`make bench-lockhold`"))
    ratios = load("uring.json")["ratio"]
    for depth in (1, 8, 32):
        value = ratios[f"randread {depth}"]
        lines.append(row(f"cold io_uring 4 KiB random reads, queue depth {depth} (IOPS)",
                         "at least 0.95x", f"{value:.2f}x", verdict(value, 0.95),
                         "`make bench-uring`"))
    data = load("hit.json")
    timed = ", by instruction count" if counts_instructions(data) else ""
    labels = {"rand_4k": "4 KiB random", "rand_64k": "64 KiB random",
              "seq_1m": "1 MiB sequential"}
    for workload, label in labels.items():
        value = data["ratio"][workload]
        shown = f"{value:.3f}x" if timed else f"{value:.2f}x"
        lines.append(row(f"{label} cache hits (IOPS{timed}), median of each kernel's samples",
                         "at least 0.98x", shown, verdict(value, 0.98), "`make bench-hit`"))
        paired = data.get("paired", {}).get(workload, {}).get("pcshare")
        if paired:
            low, high = paired["ci95"]
            lines.append(row(f"{label} cache hits against page cache hits in the same boot "
                             "(median of pairs)",
                             "at least 0.98x", f"{paired['median']:.3f}x ({low:.3f}-{high:.3f})",
                             verdict(paired["median"], 0.98), "`make bench-hit`"))
    ratios = load("scaling.json")["ratio"]
    most = max(int(key.split()[1]) for key in ratios)
    lines.append(row(f"{most} readers of {most} distinct cold files at once (MiB/s)",
                     "measured", f"{ratios[f'distinct {most}']:.2f}x", "",
                     "`make bench-scaling`"))
    return lines


def clone():
    """bench-clone's table, as bench/clone.py writes it to runs/clone.md."""
    return clone_results.markdown(load("clone.json")).split("\n")


def duration(seconds):
    """SECONDS in the unit a reader takes in at a glance."""
    for unit, size in (("h", 3600), ("min", 60), ("s", 1)):
        if seconds >= size:
            return f"{seconds / size:,.1f} {unit}"
    return f"{seconds * 1000:.0f} ms"


def clone_scale(data=None):
    """bench-clone-scale's tables: per kernel, method and extent count, the
    clone time, its longest kernel call, the longest wait of any reader and
    of the writer, and the slab and dirty memory it grew; then each fit and
    what it predicts for 10^8 extents."""
    data = data or load("clone-scale.json")
    labels = {"ficlone": "FICLONE", "ficlonerange2_100ms": "FICLONERANGE2, 100 ms"}
    lines = [row("kernel", "method", "extents", "clone s", "longest call ms",
                 "buffered / direct / mmap read max ms", "writer max ms",
                 "slab / dirty / used MiB"),
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in data["runs"]:
        lat, mem = r["latency_ms"], r["memory"]
        lines.append(row(r["kernel"], labels.get(r["method"], r["method"]),
                         f"{r['extents']:,}", f"{r['clone_seconds']:.2f}",
                         f"{r['longest_call_ms']:.0f}",
                         " / ".join(f"{lat[j]['max']:.0f}" for j in ("buffered", "direct", "mmap")),
                         f"{lat['writer']['max']:.0f}",
                         f"{mem['slab_mib']:.1f} / {mem['dirty_mib']:.1f} / {mem['used_mib']:.0f}"))
    names = {"clone_seconds": "clone time", "reader_max_ms": "longest read (any reader)",
             "writer_max_ms": "longest write"}
    per_second = {"clone_seconds": 1, "reader_max_ms": 1000, "writer_max_ms": 1000}
    lines += ["", row("kernel", "method", "metric", "grows as extents^k, k",
                      "predicted at 10^8 extents"), "|---|---|---|---:|---:|"]
    for f in data["fits"]:
        lines.append(row(f["kernel"], labels.get(f["method"], f["method"]),
                         names[f["metric"]], f"{f['exponent']:.2f}",
                         duration(f["at_1e8"] / per_second[f["metric"]])))
    return lines


KERNELS = ("stock", "pcshare")


def headline():
    """The README's summary: one row per headline claim, each from its
    results file, with the command that measured it and where the details are."""
    lines = [row("what", "stock", "pcshare", "measured by", "details"),
             "|---|---:|---:|---|---|"]

    def claim(what, cells, target, anchor, label, doc="benchmarks.md"):
        lines.append(row(what, *cells, f"`make {target}`",
                         f"[{label}](docs/{doc}#{anchor})"))

    mib = 1 << 20
    data = load("demo.json")
    demo = {(r["kernel"], r["step"]): r for r in data["runs"]}
    size = data["file_size"]
    size = f"{size >> 30} GiB" if size % (1 << 30) == 0 else f"{size // mib} MiB"
    for step, what in (("read_clone_first", f"reading a clone of a cached {size} file"),
                       ("read_n_clones", f"reading {data['clones']} more clones of it")):
        cells = []
        for k in KERNELS:
            disk, growth = (round(demo[(k, step)][f] / mib)
                            for f in ("disk_read_bytes", "cache_growth_bytes"))
            cells.append(f"{disk} / {f'+{growth}' if growth else 0} MiB")
        claim(f"{what}: read from disk / page cache growth", cells, "demo",
              "the-demo-make-demo", "the demo")

    data = load("containers.json")
    most = max(r["containers"] for r in data["runs"] if r["step"] == "running")
    runs = {(r["kernel"], r.get("layout", "snapshots"), r["step"], r["containers"]): r
            for r in data["runs"]}
    for layout, what in (("ro-snapshots", "read-only snapshots"),
                         ("snapshots", "writable snapshots (Docker's, Podman's btrfs driver)")):
        claim(f"{most} containers running from {what}: page cache, in images",
              [ratio(runs[(k, layout, "running", most)]["cache_growth_bytes"],
                     data["image_bytes"]) for k in KERNELS],
              "bench-containers", "containers", "containers")

    data = load("vm.json")
    most = max(r["clones"] for r in data["runs"])
    for subvolume, engine, what in (
            ("writable", "psync", "read with `pread`"), ("writable", "mmap", "read with `mmap`"),
            ("read-only", "mmap", "in a read-only subvolume, read with `mmap`")):
        claim(f"{most} reflinked VM images {what}: page cache, in images",
              [ratio(max(r["cache_growth_bytes"] for r in data["runs"]
                         if (r["kernel"], subvolume_of(r), r["engine"], r["clones"])
                         == (k, subvolume, engine, most)),
                     data["image_bytes"]) for k in KERNELS],
              "bench-vm", "vm-images", "VM images")

    data = load("hit.json")
    iops = {(r["kernel"], r["workload"]): r["iops_median"] for r in data["runs"]}
    timed = ", timed by instructions executed" if counts_instructions(data) else ""
    claim(f"a cache hit: 4 KiB random reads of a cached clone{timed}",
          [f"{iops[(k, 'rand_4k')]:,.0f} IOPS" for k in KERNELS],
          "bench-hit", "the-price-of-a-hit", "the price of a hit")

    median = {(r["kernel"], r["workload"]): r["median"] for r in load("unshared.json")["runs"]}
    claim("data nobody shares: cold sequential reads",
          [f"{median[(k, 'seqread')]:.1f} MB/s" for k in KERNELS],
          "bench-unshared", "data-nobody-shares", "unshared data")

    data = load("mix.json")
    most = max(r["children"] for r in data["runs"])
    mean = {r["kernel"]: r["lat_ms"]["mean"] for r in data["runs"]
            if (r["figure"], r["kind"], r["children"]) == (7, "read", most)}
    claim(f"the seed report's Figure 7, {most} children: mean read latency",
          [f"{sig(mean[k])} ms" for k in KERNELS],
          "bench-mix", "the-seed-reports-experiments", "the seed's experiments")

    data = load("clone.json")
    grouped = clone_results.groups(data)
    for kind, what in (("direct", "O_DIRECT read"), ("writer", "write")):
        claim(f"worst {what} during a clone of {data['extents']:,} extents "
              "(stock: FICLONE; pcshare: FICLONERANGE2, 100 ms budget)",
              [f"{max(r['latency_ms'][kind]['max'] for r in grouped[key]):.0f} ms"
               for key in (("stock", "ficlone"), ("pcshare", "ficlonerange2_100ms"))],
              "bench-clone", "clone-without-stalls", "clones")

    data = load("clone-scale.json")
    most = max(r["extents"] for r in data["runs"])
    worst = {(r["kernel"], r["method"]): max(j["max"] for j in r["latency_ms"].values())
             for r in data["runs"] if r["extents"] == most}
    fits = {}
    for f in data["fits"]:
        if f["metric"] in ("reader_max_ms", "writer_max_ms"):
            key = (f["kernel"], f["method"])
            fits[key] = max(fits.get(key, 0), f["at_1e8"])
    keys = (("stock", "ficlone"), ("pcshare", "ficlonerange2_100ms"))
    if all(k in worst and k in fits for k in keys):  # a smaller run may lack one
        claim(f"longest wait of any reader or writer during a clone of {most:,} extents, "
              "and fitted out to 10^8 (stock: FICLONE; pcshare: FICLONERANGE2, 100 ms budget)",
              [f"{duration(worst[k] / 1000)}; {duration(fits[k] / 1000)}" for k in keys],
              "bench-clone-scale", "clones-of-104-to-106-extents", "clone scale")

    data = load("cp.json")
    worst = {}
    for r in data["runs"]:
        worst[(r["kernel"], r["cp"])] = max(worst.get((r["kernel"], r["cp"]), 0),
                                            r["latency_ms"]["read"]["max_ms"])
    keys = (("stock", "stock"), ("pcshare", "patched"))
    if all(k in worst for k in keys):
        claim(f"worst read while `cp --reflink` clones a {data['extents']:,}-extent image "
              "(stock: Debian's cp, FICLONE; pcshare: patched cp, FICLONERANGE2)",
              [f"{worst[k]:.0f} ms" for k in keys], "bench-cp", "tests-and-measurements",
              "cp --reflink", doc="cp.md")

    data = load("lockhold.json")
    median = lockhold_read_seconds(data["runs"])
    claim(f"one cold {data['size'] >> 30} GiB `pread` while two processes write 4 KiB blocks "
          "into the file", [f"{median[k]:.1f} s" for k in KERNELS],
          "bench-lockhold", "writers-during-one-huge-cold-read", "writers during a read")
    return lines


TABLES = {"headline": headline, "targets": targets, "containers": containers, "vm": vm,
          "hit": hit, "unshared": unshared, "clone-items": clone_items, "clone": clone,
          "mix": mix, "mix-psync": lambda: mix("mix-psync.json"), "lockhold": lockhold,
          "lockstat": lockstat,
          "demo": demo, "demo-zstd": lambda: demo("demo-zstd.json"),
          "demo-64clones": lambda: demo("demo-64clones.json"),
          "cp": lambda: cp_rows(load("cp.json")), "clone-scale": clone_scale,
          "uring": lambda: sampled("uring.json", ("pattern", "iodepth"),
                                   ("pattern", "queue depth"), "iops", "IOPS"),
          "scaling": lambda: sampled("scaling.json", ("files", "readers"),
                                     ("files", "readers at once"), "mib_per_s", "MiB/s")}
BLOCK = re.compile(r"(<!-- table:([\w-]+) -->\n)(.*?)(<!-- /table:\2 -->)", re.S)


def render(text, where):
    """TEXT with every table block regenerated; an unknown name fails,
    naming WHERE (the file) and the table."""
    def fill(m):
        name = m.group(2)
        if name not in TABLES:
            raise SystemExit(f"{where}: no generator for table '{name}' "
                             f"(known: {', '.join(TABLES)})")
        return m.group(1) + "\n".join(TABLES[name]()) + "\n" + m.group(4)
    return BLOCK.sub(fill, text)


def shown(path):
    """PATH relative to the checkout when it is inside it."""
    try:
        return str(path.resolve().relative_to(TOP))
    except ValueError:
        return str(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="regenerate every table block")
    mode.add_argument("--check", action="store_true",
                      help="exit 1 if a table differs from its results file, naming file and table")
    ap.add_argument("--file", "--readme", dest="files", type=Path, action="append",
                    help="a file to check or write (repeatable; default README.md and docs/*.md)")
    ap.add_argument("--print", metavar="NAME", choices=sorted(TABLES),
                    help="print one table (%(choices)s)")
    args = ap.parse_args()
    if args.print:
        print("\n".join(TABLES[args.print]()))
        return 0
    status, count = 0, 0
    for path in args.files or documents():
        text = path.read_text()
        blocks = BLOCK.findall(text)
        count += len(blocks)
        new = render(text, shown(path))
        if args.write:
            if new != text:
                path.write_text(new)
                print(f"{shown(path)}: {len(blocks)} tables regenerated")
            continue
        stale = [name for opening, name, body, closing in blocks
                 if opening + body + closing not in new]
        for name in stale:
            print(f"{shown(path)}: table '{name}' differs from results/*.json; "
                  "run python3 -m bench.tables --write", file=sys.stderr)
        status |= bool(stale)
    if not status:
        print(f"{count} tables {'regenerated' if args.write else 'match results/*.json'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
