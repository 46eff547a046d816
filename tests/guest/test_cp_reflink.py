"""GNU cp with userspace/coreutils/'s patch (`make cp` on the host builds it;
these tests skip without it): `cp --reflink` clones through FICLONERANGE2 in
--reflink-budget steps on the pcshare kernel and through FICLONE on stock,
giving a byte-identical copy that shares the source's extents; a fatal
signal during a long clone leaves an empty destination and an error, never a
short copy. The ioctl calls are counted with strace."""
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from harness import fsutil

from conftest import _fresh

CACHE = Path(os.environ.get("PCSHARE_CACHE") or "/root/.cache/pcshare")
CP = CACHE / "coreutils/build/src/cp"
# strace's line for one ioctl: FICLONERANGE2 is _IOWR(0x15, 3, 96 bytes),
# which strace 6.1 prints raw; FICLONE it names.
IOCTL = re.compile(r"ioctl\(\d+, (?P<req>_IOC\([^)]*\)|[^,]*), .*\) = (?P<ret>-?\d+)"
                   r"(?: (?P<err>E\w+))?")


@pytest.fixture
def cp():
    if not os.access(CP, os.X_OK):
        pytest.skip(f"the patched cp is not built ({CP}): run `make cp` on the host")
    return str(CP)


@pytest.fixture(params=["btrfs", "xfs"])
def fs(request, scratch_dev, tmp_path):
    yield from _fresh(request.param, scratch_dev, tmp_path)


def traced_cp(cp, args, log):
    """Run cp ARGS under strace; return (CompletedProcess, [(kind, ret, errno
    name)]) for its FICLONERANGE2 ("clone2") and FICLONE ("ficlone") calls."""
    if not os.access("/usr/bin/strace", os.X_OK):
        pytest.skip("strace is not installed (scripts/deps.sh installs it)")
    res = subprocess.run(["strace", "-qq", "-e", "trace=ioctl", "-e", "signal=none",
                          "-o", str(log), cp, *map(str, args)],
                         capture_output=True, text=True, timeout=600)
    calls = []
    for line in Path(log).read_text().splitlines():
        m = IOCTL.match(line)
        if m and ("0x15, 0x3" in m["req"] or "FICLONE" in m["req"]):
            calls.append(("clone2" if "0x15, 0x3" in m["req"] else "ficlone",
                          int(m["ret"]), m["err"]))
    return res, calls


def assert_shared_copy(src, dst):
    """DST has SRC's bytes and every extent at SRC's physical address."""
    assert fsutil.sha256_file(dst) == fsutil.sha256_file(src)
    src_map, dst_map = fsutil.fiemap_all(src), fsutil.fiemap_all(dst)
    assert [e[:3] for e in dst_map] == [e[:3] for e in src_map]
    assert all(e[3] & fsutil.FIEMAP_EXTENT_SHARED for e in dst_map)


def test_option_in_help_and_checked(cp):
    assert "--reflink-budget=MS" in subprocess.run([cp, "--help"], capture_output=True,
                                                   text=True, check=True).stdout
    res = subprocess.run([cp, "--reflink-budget=soon", "/dev/null", "/run/tmp/x"],
                         capture_output=True, text=True)
    assert res.returncode == 1 and "invalid reflink budget" in res.stderr
    assert not os.path.exists("/run/tmp/x")


@pytest.mark.clone2
def test_default_budget_gives_identical_shared_copy(cp, fs, tmp_path):
    fsutil.write_extents(fs / "src", 2000)
    res, calls = traced_cp(cp, ["--reflink=always", fs / "src", fs / "dst"], tmp_path / "log")
    assert res.returncode == 0, res.stderr
    assert_shared_copy(fs / "src", fs / "dst")
    assert calls and all(kind == "clone2" for kind, _, _ in calls)
    assert calls[-1][1] == 0


@pytest.mark.clone2
def test_tiny_budget_takes_many_calls(cp, fs, tmp_path):
    fsutil.write_extents(fs / "src", 4000)
    res, calls = traced_cp(cp, ["--reflink=always", "--reflink-budget=1", fs / "src",
                                fs / "dst"], tmp_path / "log")
    assert res.returncode == 0, res.stderr
    assert_shared_copy(fs / "src", fs / "dst")
    # Every call but the last ran out of budget (FICLONERANGE2_PARTIAL).
    assert len(calls) >= 3, calls
    assert [c[:2] for c in calls] == [("clone2", 1)] * (len(calls) - 1) + [("clone2", 0)]


def start_long_clone(cp, fs, preexec_fn=None):
    """Start cp cloning a file of 12000 extents in 1 ms steps; return the
    process and the source's size once the destination is partly cloned."""
    size = fsutil.write_extents(fs / "src", 12000)
    proc = subprocess.Popen([cp, "--reflink=always", "--reflink-budget=1", fs / "src",
                             fs / "dst"], stderr=subprocess.PIPE, text=True,
                            preexec_fn=preexec_fn)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if 0 < os.stat(fs / "dst").st_size < size:
                return proc, size
        except FileNotFoundError:
            pass
        time.sleep(0.001)
    proc.kill()
    pytest.fail(f"cp never showed a partial clone (exit {proc.wait()}); file too small?")


# The signal tests test cp, whatever the filesystem: btrfs alone keeps them cheap.
@pytest.fixture
def plain_btrfs(scratch_dev, tmp_path):
    yield from _fresh("btrfs", scratch_dev, tmp_path)


@pytest.mark.clone2
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_fatal_signal_leaves_empty_dest_and_error(cp, plain_btrfs, sig):
    fs = plain_btrfs
    proc, _ = start_long_clone(cp, fs, preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL))
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    # cp reports, truncates, then dies from the signal it caught.
    assert proc.returncode == -sig, err
    assert f"failed to clone '{fs / 'dst'}' from '{fs / 'src'}'" in err
    assert os.stat(fs / "dst").st_size == 0


@pytest.mark.clone2
def test_stop_continue_and_ignored_sigint_still_complete(cp, plain_btrfs):
    fs = plain_btrfs
    proc, _ = start_long_clone(cp, fs,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    proc.send_signal(signal.SIGSTOP)
    time.sleep(0.2)
    proc.send_signal(signal.SIGCONT)
    proc.send_signal(signal.SIGINT)  # inherited ignored (nohup, &): cp must not catch it
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert_shared_copy(fs / "src", fs / "dst")


def test_without_ficlonerange2_falls_back_to_ficlone(cp, fs, tmp_path):
    with open(fs / "probe", "wb") as f:
        if fsutil.has_ficlonerange2(f.fileno()):
            pytest.skip("this kernel has FICLONERANGE2; the fallback is for kernels without")
    for name in ("a", "b"):
        fsutil.write_extents(fs / name, 50)
    (fs / "out").mkdir()
    res, calls = traced_cp(cp, ["--reflink=always", fs / "a", fs / "b", fs / "out"],
                           tmp_path / "log")
    assert res.returncode == 0, res.stderr
    for name in ("a", "b"):
        assert_shared_copy(fs / name, fs / "out" / name)
    # One probe per cp run: ENOTTY is remembered for the second file.
    assert calls == [("clone2", -1, "ENOTTY"), ("ficlone", 0, None), ("ficlone", 0, None)]


@pytest.mark.clone2
def test_filesystem_without_chunked_clones_falls_back_per_file(cp, plain_btrfs, tmp_path):
    """overlayfs passes FICLONE through to btrfs but does not opt in to
    chunked clones: EOPNOTSUPP, for every file, then FICLONE."""
    mnt = plain_btrfs
    for d in ("lower", "upper", "work", "merged"):
        (mnt / d).mkdir()
    fsutil.run("mount", "-t", "overlay", "overlay", "-o", f"lowerdir={mnt}/lower,"
               f"upperdir={mnt}/upper,workdir={mnt}/work", str(mnt / "merged"))
    try:
        merged = mnt / "merged"
        for name in ("a", "b"):
            fsutil.write_extents(merged / name, 50)
        (merged / "out").mkdir()
        res, calls = traced_cp(cp, ["--reflink=always", merged / "a", merged / "b",
                                    merged / "out"], tmp_path / "log")
        assert res.returncode == 0, res.stderr
        for name in ("a", "b"):
            assert_shared_copy(mnt / "upper" / name, mnt / "upper/out" / name)
        assert calls == [("clone2", -1, "EOPNOTSUPP"), ("ficlone", 0, None)] * 2
    finally:
        fsutil.run("umount", str(mnt / "merged"))
