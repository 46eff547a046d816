#!/usr/bin/env python3
"""`make bench-vm`: a VM disk image cloned with cp --reflink, read by fio.
(Not bench/vm.py: harness/vm.py is the VM runner.)

Boots the stock and the pcshare kernel (mount option shared_cache_map:
the shared extent cache, and mappings of unchanged clones shared) in turn; each runs
bench/vmimage_guest.py: a raw image (--size, an ext4 filesystem with files in
it) cloned 8 times, then for each fio engine (psync and io_uring buffered,
libaio on O_DIRECT, mmap) and access (sequential 1 MiB, random 64 KiB)
the clones read one after the other with caches dropped first; page cache
growth and disk bytes after 1, 4 and 8 clones. Then the images' subvolume
is made read-only and mmap reads them again, sequentially: those mappings
are bound to one shared copy, and the first clone's time is a cold mapped
read of a bound file. Writes runs/vm.json

    {"image_bytes": int, "runs": [{"kernel", "subvolume": "writable" | "read-only",
     "engine", "access", "clones", "cache_growth_bytes", "disk_read_bytes",
     "seconds"}]}

and runs/vm.png. This shows which I/O paths share today.
"""
import sys

from bench import guestbench
from harness import vm


def subvolume_of(run):
    """Where a run read its images; runs from before the read-only step
    have no field: writable."""
    return run.get("subvolume", "writable")


def table(result):
    return guestbench.in_images_table(result, ("subvolume", "engine", "access", "clones"))


def main():
    ap = guestbench.arg_parser(__doc__, "vm")
    ap.add_argument("--size", default="256M",
                    help="disk image size; it holds the python standard library")
    ap.add_argument("--clones", default="1,4,8", help="values of N")
    ap.add_argument("--readonly-engines", default="mmap",
                    help="fio engines run again once the images' subvolume is read-only "
                    "(default mmap; empty: none)")
    args = ap.parse_args()
    size = vm.parse_size(args.size)
    guestbench.positive_list(ap, "--clones", args.clones)
    if size < (128 << 20) or size % (1 << 20):
        ap.error("--size must be a whole number of MiB, at least 128M (the image holds "
                 "the python standard library, about 60 MiB)")
    kernels = [k for k in args.kernels.split(",") if k]
    for kernel in kernels:
        vm.build_kernel(kernel)

    result = {"image_bytes": size, "runs": [], "kernel_release": {},
              **guestbench.provenance()}
    for kernel in kernels:
        print(f"== {kernel}", flush=True)
        got = guestbench.run("vmimage", kernel, ["--size", str(size), "--clones", args.clones,
                              "--readonly-engines", args.readonly_engines],
                             disk=str(size * 3 + (1 << 30)), mem="4G",
                             shared_cache="shared_cache_map")
        result["runs"] += [{"kernel": kernel, **r} for r in got["runs"]]
        result["kernel_release"][kernel] = got["kernel_release"]
    print("\ncache growth and disk bytes, cumulative over N clones, in images")
    return guestbench.finish("vmimage", result, table(result), args.out, args.plot)


if __name__ == "__main__":
    sys.exit(main())
