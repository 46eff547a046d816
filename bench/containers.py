#!/usr/bin/env python3
"""`make bench-containers`: container images on btrfs snapshots.

Boots the stock and the pcshare kernel (mount option
shared_cache_map_private: the shared extent cache, mappings of files of
read-only subvolumes shared, and private mappings of writable files
shared, keeping the data they were made with) in turn, once per layout; each runs bench/containers_guest.py: an
image built from the host's python3, its standard library and libraries in
one subvolume, N containers (N = 1, 2, 4, 8) whose roots are, by layout,
writable snapshots of the image ("snapshots": Docker's and Podman's btrfs
drivers), overlayfs mounts over one read-only snapshot ("overlay": the
overlay driver on btrfs) or read-only snapshots of their own
("ro-snapshots"), and per N three steps with caches dropped first:
read_all (read every file of every container), entrypoint (the
interpreter, chrooted, imports 59 standard modules in each container, one
container after the other) and running (the same N entrypoints started
together, measured while all of them still run).
Also one container of the image beside one of an "upgraded" image that
rewrote every 4th file. Writes runs/containers.json

    {"image_bytes": int, "image_files": int, "runs": [{"kernel", "layout",
     "step", "containers", "cache_growth_bytes", "disk_read_bytes", "seconds",
     "shared_cache": {...}}]}

and runs/containers.png (cache growth against N, per kernel and step).
Byte counts are exact under emulation; compare times only within a run.
"""
import sys

from bench import guestbench
from harness import vm

MiB = 1 << 20
LAYOUTS = ("snapshots", "overlay", "ro-snapshots")


def table(result):
    return guestbench.in_images_table(result, ("layout", "step", "containers"))


def main():
    ap = guestbench.arg_parser(__doc__, "containers")
    ap.add_argument("--containers", default="1,2,4,8", help="values of N")
    ap.add_argument("--layouts", default=",".join(LAYOUTS),
                    help="comma-separated container layouts: " + ", ".join(LAYOUTS))
    args = ap.parse_args()
    layouts = [x for x in args.layouts.split(",") if x]
    if not layouts or set(layouts) - set(LAYOUTS):
        ap.error(f"--layouts: expected some of {', '.join(LAYOUTS)}, got {args.layouts!r}")
    guestbench.positive_list(ap, "--containers", args.containers)
    kernels = [k for k in args.kernels.split(",") if k]
    for kernel in kernels:
        vm.build_kernel(kernel)

    result = {"runs": [], **guestbench.provenance()}
    for layout in layouts:
        for kernel in kernels:
            print(f"== {kernel}, {layout}", flush=True)
            got = guestbench.run("containers", kernel,
                                 ["--containers", args.containers, "--layout", layout],
                                 disk="4G", mem="4G",
                                 shared_cache="shared_cache_map_private")
            runs = got.pop("runs")
            result["runs"] += [{"kernel": kernel, "layout": layout, **r} for r in runs]
            result.setdefault("kernel_release", {})[kernel] = got.pop("kernel_release")
            got.pop("mount_options")
            got.pop("layout")
            result.update(got)
    print(f"\nimage: {result['image_files']} files, {result['image_bytes'] / MiB:.1f} MiB; "
          "cache growth and disk bytes in images")
    return guestbench.finish("containers", result, table(result), args.out, args.plot)


if __name__ == "__main__":
    sys.exit(main())
