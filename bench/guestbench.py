"""Host side of a guest benchmark: boot a kernel, run one bench/*_guest.py
in it on a scratch disk, return its JSON; and what every results file
records about where it came from."""
import argparse
import json
import subprocess
import sys
from pathlib import Path

TOP = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(TOP), str(TOP / "scripts")]
import vm  # noqa: E402,F401  (re-exported for the bench wrappers)
from harness.results import run_file  # noqa: E402


def run(name, kernel, guest_args, *, disk="4G", mem="4G", timeout=3600,
        shared_cache="shared_cache"):
    """Run bench/NAME_guest.py GUEST_ARGS in a guest of KERNEL, with a
    scratch disk at /dev/vda and mount option SHARED_CACHE (shared_cache, or
    shared_cache_map to share mappings too) when the kernel has the cache;
    returns the JSON it wrote. Exits with a message naming the
    kernel and the console log when the guest fails."""
    out_dir = vm.CACHE / f"bench-{name}" / kernel
    command = [sys.executable, f"bench/{name}_guest.py", "--device", "/dev/vda",
               "--json", f"/run/pcshare/out/{name}.json", *guest_args]
    if vm.has_shared_cache(kernel):
        command += ["--mount-options", shared_cache]
    result = vm.run_vm(command, kernel=kernel, mem=mem, disks=[disk], timeout=timeout,
                       out_dir=out_dir)
    if not result.ok:
        raise SystemExit(f"bench-{name}: {kernel} guest failed: {result.summary()}")
    return json.loads((out_dir / f"{name}.json").read_text())


def provenance():
    """The series and the accelerator, for every results file. The series
    hash is scripts/kernel.sh's, the stamp of the tree a kernel is built from."""
    series = subprocess.run([str(TOP / "scripts/kernel.sh"), "series-hash"], check=True,
                            capture_output=True, text=True).stdout.strip()
    return {"series_sha256": series[:16],
            "accel": "kvm" if vm.kvm_usable() else "tcg"}


class _HelpFormatter(argparse.RawDescriptionHelpFormatter,
                     argparse.ArgumentDefaultsHelpFormatter):
    """The module docstring as written, and every option's default."""


def arg_parser(doc, name, plot=True):
    """The host side's arguments: DOC as the description, and the options
    every benchmark takes (--kernels, --out, --plot)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=_HelpFormatter)
    ap.add_argument("--kernels", default="stock,pcshare",
                    help="comma-separated kernels, run in this order")
    ap.add_argument("--out", default=run_file(f"{name}.json"), help="results file")
    if plot:
        ap.add_argument("--plot", default=run_file(f"{name}.png"), help="plot file")
    return ap


def sampling_args(ap, size, rounds, samples, runtime):
    """--size, --rounds, --samples and --runtime with these defaults, for
    the benchmarks that sample fio for RUNTIME seconds, SAMPLES times a
    boot, ROUNDS boots per kernel."""
    ap.add_argument("--size", default=size, help="file size")
    ap.add_argument("--rounds", type=int, default=rounds, help="boots per kernel")
    ap.add_argument("--samples", type=int, default=samples, help="samples per boot")
    ap.add_argument("--runtime", type=int, default=runtime, help="seconds per sample")


def positive_list(ap, option, text):
    """Parse '1,2,4' for OPTION, or exit with a usage error naming it."""
    try:
        values = [int(v) for v in text.split(",")]
        if values and min(values) > 0:
            return values
    except ValueError:
        pass
    ap.error(f"{option}: expected positive integers like 1,2,4, got {text!r}")


def side_by_side(runs, key, columns, kernels=("stock", "pcshare")):
    """A markdown table with one line per KEY (a tuple of run fields) and,
    for each (title, format) in COLUMNS, one column per kernel holding
    format(run) of that kernel's run, or "-"."""
    by = {}
    for r in runs:
        by.setdefault(tuple(r[k] for k in key), {})[r["kernel"]] = r
    heads = [f"{kernel} {title}" for title, _ in columns for kernel in kernels]
    lines = ["| " + " | ".join([*key, *heads]) + " |",
             "|" + "---|" * len(key) + "---:|" * len(heads)]
    for values, rows in by.items():
        cells = [fmt(rows[kernel]) if kernel in rows else "-"
                 for _, fmt in columns for kernel in kernels]
        lines.append("| " + " | ".join([*map(str, values), *cells]) + " |")
    return "\n".join(lines)


def finish(name, result, text, out, png):
    """Write RESULT to OUT, print TEXT (the human table), and draw PNG with
    bench/plot_NAME.py under Debian's python3, which has matplotlib
    (scripts/deps.sh). Returns the exit status."""
    import subprocess
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print("\n" + text + f"\n\nwritten: {out}")
    if png is None:
        return 0
    done = subprocess.run(["/usr/bin/python3", str(TOP / f"bench/plot_{name}.py"),
                           str(out), str(png)])
    if done.returncode:
        print(f"bench-{name}: plot failed (results are in the JSON)", file=sys.stderr)
        return 1
    print(f"written: {png}")
    return 0
