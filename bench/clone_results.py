"""Reading results/clone.json, shared by bench.clone and bench.tables (the
table) and bench.plot_clone (the plot, run by Debian's python3 for
matplotlib)."""
import statistics

KINDS = ["buffered", "direct", "mmap", "writer"]


def groups(results):
    """Runs by (kernel, method) in the order they ran, with each kernel's
    no-clone baseline first (as method "baseline", clone_seconds None)."""
    out = {}
    for kernel, base in results.get("baseline", {}).items():
        out[(kernel, "baseline")] = [{"clone_seconds": None, **base}]
    for r in results["runs"]:
        out.setdefault((r["kernel"], r["method"]), []).append(r)
    return out


def markdown(results):
    """One row per kernel and method: the median clone time and, per job
    kind, the worst max and worst p99.9 latency over the repeats."""
    lines = ["| kernel | method | runs | clone s (median) | "
             + " | ".join(f"{k} max / p99.9 ms" for k in KINDS) + " |",
             "|---|---|---:|---:|" + "---:|" * len(KINDS)]
    for (kernel, method), runs in groups(results).items():
        times = [r["clone_seconds"] for r in runs if r["clone_seconds"] is not None]
        clone = f"{statistics.median(times):.2f}" if times else "(no clone)"
        cells = [f"{max(r['latency_ms'][k]['max'] for r in runs):.0f} / "
                 f"{max(r['latency_ms'][k]['p999'] for r in runs):.0f}" for k in KINDS]
        lines.append(f"| {kernel} | {method} | {len(runs)} | {clone} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
