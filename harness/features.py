"""What the running kernel can do, found by trying it (in a guest, as root).

One probe per feature of the series, run once per process on a small btrfs
in a loop file on tmpfs, so a test or a benchmark asks the kernel it runs
on, not the build that may or may not have produced it:

- shared_cache: btrfs accepts `-o shared_cache` and shows
  /sys/fs/btrfs/<fsid>/shared_cache/;
- shared_cache_map: btrfs accepts `-o shared_cache_map`;
- shared_cache_map_private: btrfs accepts `-o shared_cache_map_private`;
- clone2: FICLONERANGE2 with an invalid flag fails with EINVAL, not ENOTTY
  (the kernel knows the call).

probe() maps each name to None when the kernel has the feature, or to the
reason it has not, for pytest.skip() and for benchmark messages.
"""
import functools
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.clone2 import has_ficlonerange2

FEATURES = ("shared_cache", "shared_cache_map", "shared_cache_map_private", "clone2")
PROBE_FS_BYTES = 128 << 20  # mkfs.btrfs's smallest single-device filesystem


def _mount(image, mnt, options):
    done = subprocess.run(["mount", "-o", f"loop,{options}", str(image), str(mnt)],
                          capture_output=True, text=True)
    return done.returncode == 0, done.stderr.strip().splitlines()[0] if done.stderr.strip() else ""


def _umount(mnt):
    subprocess.run(["umount", str(mnt)], check=True)


def _clone2_reason(path):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if has_ficlonerange2(fd):
            return None
    finally:
        os.close(fd)
    return "no FICLONERANGE2 (an invalid flag got ENOTTY, not EINVAL)"


@functools.cache
def probe():
    """{feature: None if the running kernel has it, else why not}."""
    found = {}
    with tempfile.TemporaryDirectory(dir="/run") as tmp:
        image, mnt = Path(tmp) / "probe.img", Path(tmp) / "mnt"
        mnt.mkdir()
        with open(image, "wb") as f:
            f.truncate(PROBE_FS_BYTES)
        subprocess.run(["mkfs.btrfs", "-q", "-f", str(image)], check=True,
                       capture_output=True)
        for feature, option in (("shared_cache", "shared_cache"),
                                ("shared_cache_map", "shared_cache_map"),
                                ("shared_cache_map_private", "shared_cache_map_private")):
            ok, _ = _mount(image, mnt, option)
            if ok:
                if feature == "shared_cache":
                    found["clone2"] = _clone2_reason(mnt / "f")
                _umount(mnt)
            # mount(8)'s message is generic; the kernel's is in dmesg.
            found[feature] = None if ok else f"the running kernel's btrfs refuses -o {option}"
        if "clone2" not in found:
            ok, why = _mount(image, mnt, "defaults")
            found["clone2"] = _clone2_reason(mnt / "f") if ok else f"no btrfs to probe: {why}"
            if ok:
                _umount(mnt)
    return found


def missing(feature):
    """Why the running kernel lacks FEATURE, or None if it has it."""
    return probe()[feature]


# Mount options that need a feature of the series.
OPTION_FEATURES = {"shared_cache": "shared_cache", "shared_cache_map": "shared_cache_map",
                   "shared_cache_map_private": "shared_cache_map_private"}


def usable_options(options):
    """OPTIONS (comma-separated mount options) without those the running
    kernel lacks, each dropped with a note on stderr: a benchmark asked for
    the shared cache measures stock behaviour on a kernel without it."""
    kept = []
    for option in filter(None, options.split(",")):
        why = missing(OPTION_FEATURES[option]) if option in OPTION_FEATURES else None
        if why:
            print(f"note: not mounting with {option}: {why}", file=sys.stderr)
        else:
            kept.append(option)
    return ",".join(kept)
