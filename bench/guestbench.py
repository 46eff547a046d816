"""Host side of a guest benchmark: boot a kernel, run one bench.*_guest
module in it on a scratch disk, return its JSON; and what every results
file records about where it came from."""
import argparse
import json
import subprocess
import sys
from pathlib import Path

from harness import vm
from harness.results import run_file

TOP = vm.TOP


def run(name, kernel, guest_args, *, disk="4G", mem="4G", timeout=3600,
        shared_cache="shared_cache", cpus=2, variant="default", icount=None):
    """Run bench.NAME_guest GUEST_ARGS in a guest of KERNEL (its build
    VARIANT), with a
    scratch disk at /dev/vda and mount option SHARED_CACHE (shared_cache, or
    shared_cache_map to share mappings too) when the kernel has the cache;
    returns the JSON it wrote. ICOUNT: harness.vm.run_vm()'s, an
    instruction-counting clock. Exits with a message naming the
    kernel and the console log when the guest fails."""
    directory = out_dir(name, kernel)
    command = [sys.executable, "-m", f"bench.{name}_guest", "--device", "/dev/vda",
               "--json", f"/run/pcshare/out/{name}.json", *guest_args]
    # The guest keeps only the options its kernel has (harness.features).
    command += ["--mount-options", shared_cache]
    result = vm.run_vm(command, kernel=kernel, variant=variant, mem=mem, cpus=cpus,
                       disks=[disk], timeout=timeout, out_dir=directory, icount=icount)
    if not result.ok:
        raise SystemExit(f"bench-{name}: {kernel} guest failed: {result.summary()}")
    return json.loads((directory / f"{name}.json").read_text())


def out_dir(name, kernel):
    """Where run() leaves what the guest of bench NAME on KERNEL wrote."""
    return vm.CACHE / f"bench-{name}" / kernel


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


def sampling_args(ap, size, rounds, samples, runtime=None):
    """--size, --rounds, --samples (and --runtime unless None) with these
    defaults, for the benchmarks that sample fio SAMPLES times a boot (for
    RUNTIME seconds), ROUNDS boots per kernel."""
    ap.add_argument("--size", default=size, help="file size")
    ap.add_argument("--rounds", type=int, default=rounds, help="boots per kernel")
    ap.add_argument("--samples", type=int, default=samples, help="samples per boot")
    if runtime is not None:
        ap.add_argument("--runtime", type=int, default=runtime, help="seconds per sample")


def parse_sampling(ap, min_size):
    """Parse AP's arguments (sampling_args() and more); exits with a usage
    error unless --size is at least MIN_SIZE bytes and the counts are
    positive. Returns the arguments and the size in bytes."""
    args = ap.parse_args()
    size = vm.parse_size(args.size)
    counts = [args.rounds, args.samples, getattr(args, "runtime", 1)]
    if size < min_size or min(counts) < 1:
        ap.error(f"--size: at least {min_size >> 20} MiB; --rounds, --samples, "
                 "--runtime: positive")
    return args, size


def built_kernels(args, variant="default"):
    """ARGS.kernels as a list, each built as VARIANT (scripts/kernel.sh)
    and current."""
    kernels = [k for k in args.kernels.split(",") if k]
    for kernel in kernels:
        vm.build_kernel(kernel, variant)
    return kernels


def sampled(name, args, kernels, guest_args, key, value, **run_kw):
    """Boot each kernel ARGS.rounds times (interleaved), run bench.NAME_guest
    GUEST_ARGS, and group its samples by KEY (sample fields): returns the
    results-file fields (runs with the median VALUE and the samples, the
    pcshare/stock ratio per key, the guests' cache counters) and the human
    table's lines."""
    import statistics
    collected, releases, counters = {}, {}, []
    for r in range(args.rounds):
        for kernel in kernels:
            print(f"== round {r + 1}/{args.rounds}: {kernel}", flush=True)
            got = run(name, kernel, guest_args, **run_kw)
            for s in got["samples"]:
                collected.setdefault((kernel, *(s[k] for k in key)), []).append(s[value])
            releases[kernel] = got["kernel_release"]
            if got["shared_cache"] is not None:
                counters.append({"kernel": kernel, "round": r, **got["shared_cache"]})
    runs = [{"kernel": k, **dict(zip(key, rest)), value: statistics.median(v), "samples": v}
            for (k, *rest), v in collected.items()]
    ratio, lines = {}, ["  ".join([*key, *(f"{k} {value}" for k in kernels), "ratio"])]
    for rest in dict.fromkeys(tuple(c[1:]) for c in collected):
        medians = {k: statistics.median(collected[(k, *rest)]) for k in kernels
                   if (k, *rest) in collected}
        label = " ".join(map(str, rest))
        if {"stock", "pcshare"} <= medians.keys():
            ratio[label] = round(medians["pcshare"] / medians["stock"], 3)
        lines.append("  ".join([*map(str, rest), *(f"{m:.1f}" for m in medians.values()),
                                f"{ratio[label]:.3f}" if label in ratio else "-"]))
    return {"kernel_release": releases, **provenance(), "runs": runs, "ratio": ratio,
            "shared_cache": counters}, lines


def in_images_table(result, key):
    """bench-containers' and bench-vm's table: page cache growth and disk
    reads per KEY (run fields), in units of the image's size."""
    image = result["image_bytes"]
    in_images = [(title, lambda r, f=field: f"{r[f] / image:.2f}x")
                 for title, field in (("cache", "cache_growth_bytes"),
                                      ("disk", "disk_read_bytes"))]
    return side_by_side(result["runs"], key, in_images)


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


def plot(name, out, png):
    """Draw PNG from the results file OUT with bench.plot_NAME under Debian's
    python3, which has matplotlib (scripts/deps.sh); True when it did."""
    done = subprocess.run(["/usr/bin/python3", "-m", f"bench.plot_{name}",
                           str(Path(out).resolve()), str(Path(png).resolve())], cwd=TOP)
    return done.returncode == 0


def finish(name, result, text, out, png):
    """Write RESULT to OUT, print TEXT (the human table), and draw PNG with
    plot(). Returns the exit status."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print("\n" + text + f"\n\nwritten: {out}")
    if png is None:
        return 0
    if not plot(name, out, png):
        print(f"bench-{name}: plot failed (results are in the JSON)", file=sys.stderr)
        return 1
    print(f"written: {png}")
    return 0
