"""Fixtures for the guest suites: fresh filesystems on the VM's scratch disk."""
import os
import re
from pathlib import Path

import pytest

from harness import features, fsutil
# Marks each test in the kernel log; a kernel report fails the test by name.
from harness.pytest_kernel_reports import kernel_reports  # noqa: F401


# Mount option sets the btrfs fixture runs every test with, ";"-separated:
# PCSHARE_BTRFS_OPTION_SETS, or once as stock mounts and once through the
# shared cache where the running kernel has it (harness.features).
def _option_sets():
    if "PCSHARE_BTRFS_OPTION_SETS" in os.environ:
        return os.environ["PCSHARE_BTRFS_OPTION_SETS"].split(";")
    if os.environ.get("PCSHARE_DISKS") and not features.missing("shared_cache"):
        return ["", "shared_cache"]
    return [""]


# The series' features the markers name, probed on the running kernel.
MARKER_FEATURES = {"shared_cache": "shared_cache", "clone2": "clone2"}
BTRFS_OPTION_SETS = _option_sets()


def pytest_configure(config):
    config.addinivalue_line("markers", "shared_cache: needs the pcshare kernel's shared extent cache")
    config.addinivalue_line("markers", "clone2: needs the pcshare kernel's FICLONERANGE2 and "
                            "btrfs clone locking")
    config.addinivalue_line("markers", "xfs: runs on XFS (set by the fixtures, or by hand)")
    config.addinivalue_line("markers", "bench_smoke: short runs of the benchmarks' guest sides")
    config.addinivalue_line("markers", "debug_kernel: a run with the debug kernel "
                            "(lockdep, KASAN) beside the default one runs it there too: it "
                            "needs the debug config, or takes paths where a freed folio or a "
                            "lock order would show (make test-debug runs the unmarked ones "
                            "there as well)")
    config.addinivalue_line("markers", "corrupts: corrupts blocks on purpose, so the fixture "
                            "expects checksum errors")
    if not os.environ.get("PCSHARE_DISKS"):
        raise pytest.UsageError("guest suites run inside a pcshare VM with a scratch disk "
                                "(python3 -m harness.vm --disk SIZE); PCSHARE_DISKS is not set")


def pytest_collection_modifyitems(items):
    """Mark every case that gets an XFS from a fixture, so runs can select
    by filesystem with -m instead of by test name."""
    for item in items:
        params = getattr(item, "callspec", None)
        if "xfs" in item.fixturenames or (params and params.params.get("fs") == "xfs"):
            item.add_marker(pytest.mark.xfs)


# The options the debug variant adds (kernel/config/debug.config). A test
# that skips for want of one and lacks the debug_kernel marker would run
# only in make test-debug: the default kernel skips it, and a run with both
# kernels (PCSHARE_TEST_KERNELS=pcshare:default,pcshare:debug) runs only
# marked cases on the debug one.
DEBUG_CONFIG = Path(__file__).resolve().parents[2] / "kernel/config/debug.config"
DEBUG_ONLY_OPTIONS = set(re.findall(r"^(CONFIG_\w+)=", DEBUG_CONFIG.read_text(), re.M))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not item.get_closest_marker("debug_kernel"):
        reason = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else ""
        needs = sorted(DEBUG_ONLY_OPTIONS.intersection(re.findall(r"CONFIG_\w+", reason)))
        if needs:
            report.outcome = "failed"
            report.longrepr = (f"skipped for want of {', '.join(needs)} ({reason}), but not "
                               "marked debug_kernel: a run of both kernels would run it on neither")


@pytest.fixture(autouse=True)
def kernel_features(request):
    """Skip, with the probe's reason, a test marked with a feature of the
    series that the running kernel lacks."""
    for marker, feature in MARKER_FEATURES.items():
        if request.node.get_closest_marker(marker) and features.missing(feature):
            pytest.skip(features.missing(feature))


@pytest.fixture
def scratch_dev():
    return os.environ["PCSHARE_DISKS"].split()[0]


def _fresh(kind, device, tmp_path, options="", corrupts=False):
    """mkfs and mount; on btrfs, unless the test corrupts blocks on purpose,
    fail it if it left device errors or checksum messages behind: a read
    of a block before its checksums exist shows up only there."""
    fsutil.mkfs(kind, device)
    log = fsutil.KernelLog()
    try:
        with fsutil.mounted(device, tmp_path / "mnt", options) as mnt:
            yield mnt
            if kind == "btrfs" and not corrupts:
                problems = fsutil.btrfs_health_problems(mnt, log)
                assert not problems, f"btrfs reported errors: {problems}"
    finally:
        log.close()


@pytest.fixture(params=BTRFS_OPTION_SETS, ids=lambda o: o or "defaults")
def btrfs(request, scratch_dev, tmp_path):
    """A freshly made btrfs, mounted with each option set; yields its mount point."""
    yield from _fresh("btrfs", scratch_dev, tmp_path, request.param)


@pytest.fixture
def xfs(scratch_dev, tmp_path):
    """A freshly made XFS with reflink, mounted; yields its mount point."""
    yield from _fresh("xfs", scratch_dev, tmp_path)
