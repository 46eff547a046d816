#!/usr/bin/env python3
"""The README's result tables, generated from results/*.json.

Each table sits in README.md between `<!-- table:NAME -->` and
`<!-- /table:NAME -->`; `--write` regenerates them in place, `--check`
(run by the host suite) fails when one differs from what its results file
says, so a rerun benchmark cannot leave stale numbers in the README.
"""
import argparse
import json
import re
import sys
from pathlib import Path

TOP = Path(__file__).resolve().parent.parent
RESULTS = TOP / "results"
README = TOP / "README.md"


def load(name):
    return json.loads((RESULTS / name).read_text())


# The same benchmarks on the series before issue 14 (mapped, compressed,
# io_uring and NOWAIT reads): each table shows pcshare before and after.
BEFORE = "before-issue14"


def load_before(name):
    return load(f"{BEFORE}/{name}")


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
    data, before = load("vm.json"), load_before("vm.json")
    image = data["image_bytes"]
    most = max(r["clones"] for r in data["runs"])
    labels = {"psync": "psync (buffered `pread`)", "io_uring": "io_uring (buffered)",
              "libaio_direct": "libaio, O_DIRECT", "mmap": "mmap"}
    by = {}
    for r in data["runs"]:
        if r["clones"] == most:
            by.setdefault((r["engine"], r["kernel"]), []).append(r)
    for r in before["runs"]:
        if r["clones"] == most and r["kernel"] == "pcshare":
            by.setdefault((r["engine"], "before"), []).append(r)
    lines = [row("engine (seq and rand alike)", "N", "stock cache", "pcshare cache before",
                 "pcshare cache", "stock disk", "pcshare disk before", "pcshare disk"),
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for engine in dict.fromkeys(r["engine"] for r in data["runs"]):
        stock, pcshare = by[(engine, "stock")], by[(engine, "pcshare")]
        prior = by.get((engine, "before"))
        # Bold where the cache makes the difference: at most half of stock's.
        shares = lambda runs, key: (max(r[key] for r in runs)  # noqa: E731
                                    <= max(r[key] for r in stock) / 2)
        # Every access pattern gave the same bytes; show the larger.
        cell = lambda runs, key, bold: ratio(max(r[key] for r in runs), image, bold)  # noqa: E731
        lines.append(row(labels.get(engine, engine), most,
                         cell(stock, "cache_growth_bytes", False),
                         cell(prior, "cache_growth_bytes", False) if prior else "-",
                         cell(pcshare, "cache_growth_bytes",
                              shares(pcshare, "cache_growth_bytes")),
                         cell(stock, "disk_read_bytes", False),
                         cell(prior, "disk_read_bytes", False) if prior else "-",
                         cell(pcshare, "disk_read_bytes", shares(pcshare, "disk_read_bytes"))))
    return lines


def hit():
    data, before = load("hit.json"), load_before("hit.json")
    labels = {"rand_4k": "4 KiB random reads", "rand_64k": "64 KiB random reads",
              "seq_1m": "1 MiB sequential reads"}
    iops = {(r["kernel"], r["workload"]): r["iops_median"] for r in data["runs"]}
    lines = [row("workload", "stock", "pcshare (`shared_cache`)", "pcshare / stock",
                 "pcshare / stock before"), "|---|---:|---:|---:|---:|"]
    for workload, value in data["ratio"].items():
        prior = before["ratio"].get(workload)
        lines.append(row(labels.get(workload, workload),
                         f"{iops[('stock', workload)]:,.0f} IOPS",
                         f"{iops[('pcshare', workload)]:,.0f} IOPS", f"{value:.2f}",
                         f"{prior:.2f}" if prior is not None else "-"))
    return lines


def unshared():
    data = load("unshared.json")
    median = {name: {(r["kernel"], r["workload"]): r["median"] for r in d["runs"]}
              for name, d in (("now", data), ("before", load_before("unshared.json")))}
    units = {r["workload"]: r["unit"] for r in data["runs"]}
    labels = {"seqread": "sequential read, 1 MiB requests", "randread4k": "4 KiB random reads"}
    lines = [row("workload", "stock", "pcshare (`shared_cache`)", "pcshare / stock",
                 "pcshare / stock before"), "|---|---:|---:|---:|---:|"]
    for workload, unit in units.items():
        now, before = median["now"], median["before"]
        digits = 1 if unit == "MB/s" else 0
        lines.append(row(labels.get(workload, workload),
                         f"{now[('stock', workload)]:.{digits}f} {unit}",
                         f"{now[('pcshare', workload)]:.{digits}f} {unit}",
                         f"{now[('pcshare', workload)] / now[('stock', workload)]:.2f}",
                         f"{before[('pcshare', workload)] / before[('stock', workload)]:.2f}"))
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


TABLES = {"containers": containers, "vm": vm, "hit": hit, "unshared": unshared,
          "clone-items": clone_items, "cp": lambda: cp_rows(load("cp.json")),
          "demo": demo, "demo-zstd": lambda: demo("demo-zstd.json")}
BLOCK = re.compile(r"(<!-- table:([\w-]+) -->\n)(.*?)(<!-- /table:\2 -->)", re.S)


def render(text):
    """README text with every table block regenerated; unknown names fail."""
    def fill(m):
        name = m.group(2)
        if name not in TABLES:
            raise SystemExit(f"README.md: no generator for table '{name}' (known: {', '.join(TABLES)})")
        return m.group(1) + "\n".join(TABLES[name]()) + "\n" + m.group(4)
    return BLOCK.sub(fill, text)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="regenerate the tables in README.md")
    mode.add_argument("--check", action="store_true",
                      help="exit 1 if a README table differs from its results file")
    ap.add_argument("--readme", type=Path, default=README, help="file to check or write (%(default)s)")
    ap.add_argument("--print", metavar="NAME", choices=sorted(TABLES),
                    help="print one table (%(choices)s)")
    args = ap.parse_args()
    if args.print:
        print("\n".join(TABLES[args.print]()))
        return 0
    text = args.readme.read_text()
    new = render(text)
    if args.write:
        if new != text:
            args.readme.write_text(new)
        print(f"{args.readme.name}: {len(BLOCK.findall(text))} tables regenerated")
        return 0
    if new != text:
        stale = [name for opening, name, body, closing in BLOCK.findall(text)
                 if opening + body + closing not in new]
        print(f"{args.readme.name}: tables differ from results/*.json: {', '.join(stale)}; "
              "run python3 bench/tables.py --write", file=sys.stderr)
        return 1
    print(f"{args.readme.name}: {len(BLOCK.findall(text))} tables match results/*.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
