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


def ratio(value, unit, bold=False):
    text = f"{value / unit:.2f}x" if round(value / unit, 2) else "0"
    return f"**{text}**" if bold else text


def row(*cells):
    return "| " + " | ".join(str(c) for c in cells) + " |"


def containers():
    data = load("containers.json")
    image = data["image_bytes"]
    runs = {(r["kernel"], r["step"], r["containers"]): r for r in data["runs"]}
    most = max(r["containers"] for r in data["runs"])
    labels = {"read_all_upgrade": "read_all, one old + one upgraded container",
              "entrypoint_upgrade": "entrypoint, one old + one upgraded container"}
    lines = [row("step", "N", "stock cache", "pcshare cache", "stock disk", "pcshare disk"),
             "|---|---:|---:|---:|---:|---:|"]
    steps = sorted({(r["step"], r["containers"]) for r in data["runs"]},
                   key=lambda s: (s[0] in labels, not s[0].startswith("read_all"), s[1]))
    for step, n in steps:
        stock, pcshare = runs[("stock", step, n)], runs[("pcshare", step, n)]
        bold = n == most and step not in labels
        lines.append(row(labels.get(step, step), n,
                         ratio(stock["cache_growth_bytes"], image, bold),
                         ratio(pcshare["cache_growth_bytes"], image, bold),
                         ratio(stock["disk_read_bytes"], image),
                         ratio(pcshare["disk_read_bytes"], image)))
    return lines


def vm():
    data = load("vm.json")
    image = data["image_bytes"]
    most = max(r["clones"] for r in data["runs"])
    labels = {"psync": "psync (buffered `pread`)", "io_uring": "io_uring (buffered)",
              "libaio_direct": "libaio, O_DIRECT", "mmap": "mmap"}
    by = {}
    for r in data["runs"]:
        if r["clones"] == most:
            by.setdefault((r["engine"], r["kernel"]), []).append(r)
    lines = [row("engine (seq and rand alike)", "N", "stock cache", "pcshare cache",
                 "stock disk", "pcshare disk"), "|---|---:|---:|---:|---:|---:|"]
    for engine in dict.fromkeys(r["engine"] for r in data["runs"]):
        stock, pcshare = by[(engine, "stock")], by[(engine, "pcshare")]
        # Bold where the cache makes the difference: at most half of stock's.
        shares = (max(r["cache_growth_bytes"] for r in pcshare)
                  <= max(r["cache_growth_bytes"] for r in stock) / 2)
        # Every access pattern gave the same bytes; show the larger.
        cell = lambda runs, key, bold: ratio(max(r[key] for r in runs), image, bold)  # noqa: E731
        lines.append(row(labels.get(engine, engine), most,
                         cell(stock, "cache_growth_bytes", False),
                         cell(pcshare, "cache_growth_bytes", shares),
                         cell(stock, "disk_read_bytes", False),
                         cell(pcshare, "disk_read_bytes", shares)))
    return lines


def hit():
    data = load("hit.json")
    labels = {"rand_4k": "4 KiB random reads", "rand_64k": "64 KiB random reads",
              "seq_1m": "1 MiB sequential reads"}
    iops = {(r["kernel"], r["workload"]): r["iops_median"] for r in data["runs"]}
    lines = [row("workload", "stock", "pcshare (`shared_cache`)", "pcshare / stock"),
             "|---|---:|---:|---:|"]
    for workload, value in data["ratio"].items():
        lines.append(row(labels.get(workload, workload),
                         f"{iops[('stock', workload)]:,.0f} IOPS",
                         f"{iops[('pcshare', workload)]:,.0f} IOPS", f"{value:.2f}"))
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


TABLES = {"containers": containers, "vm": vm, "hit": hit, "clone-items": clone_items,
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
        print(f"{args.readme.name}: tables differ from results/*.json; "
              "run python3 bench/tables.py --write", file=sys.stderr)
        return 1
    print(f"{args.readme.name}: {len(BLOCK.findall(text))} tables match results/*.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
