"""Reading results/clone.json, shared by bench/clone.py (the table) and
bench/plot_clone.py (the plot, run by Debian's python3 for matplotlib)."""

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
