"""The pcshare tool on the host's own kernel, which has no FICLONERANGE2:
the FICLONERANGE fallback on loop-mounted btrfs and XFS, its errors and exit
codes, --resume after an interrupt, and `stat` without a shared cache.
Needs root (loop mounts)."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "tests/guest"))
import fsutil  # noqa: E402

TOOL = TOP / "tools/pcshare/pcshare"
MiB = 1 << 20

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="loop mounts need root")


def tool(*args, check=None):
    res = subprocess.run([str(TOOL), *map(str, args)], capture_output=True, text=True,
                         timeout=300)
    if check is not None:
        assert res.returncode == check, (res.returncode, res.stdout, res.stderr)
    return res


def loop_fs(kind, tmp_path, size="512M"):
    image = tmp_path / f"{kind}.img"
    subprocess.run(["truncate", "-s", size, str(image)], check=True)
    if kind == "ext4":
        fsutil.run("mkfs.ext4", "-q", "-F", str(image))
    else:
        fsutil.mkfs(kind, str(image))
    mnt = tmp_path / kind
    mnt.mkdir()
    fsutil.run("mount", "-o", "loop", str(image), str(mnt))
    return mnt


@pytest.fixture(params=["btrfs", "xfs"])
def fs(request, tmp_path):
    mnt = loop_fs(request.param, tmp_path)
    yield mnt
    fsutil.run("umount", str(mnt))


def write_in_pieces(path, data, pieces=8):
    """Several fsyncs, so the file has several extents to clone."""
    step = len(data) // pieces
    with open(path, "wb") as f:
        for i in range(0, len(data), step):
            f.write(data[i:i + step])
            os.fsync(f.fileno())


def all_shared(path):
    with open(path, "rb") as f:
        extents = fsutil.fiemap(f.fileno())
    return bool(extents) and all(fl & fsutil.FIEMAP_EXTENT_SHARED for *_, fl in extents)


def test_help_and_version():
    assert "pcshare clone SRC DST" in tool("--help", check=0).stdout
    assert tool("clone", "--help", check=0).stdout.startswith("usage:")
    assert tool("--version", check=0).stdout.startswith("pcshare ")
    assert tool("frobnicate", check=2).stderr.startswith("usage:")


def test_whole_file_clone_uses_the_fallback_loop(fs):
    data = fsutil.pattern(24 * MiB + 1234, seed="whole")
    write_in_pieces(fs / "src", data)
    (fs / "dst").write_bytes(b"old contents, longer than nothing" * 100000)
    with open(fs / "src", "rb") as f:
        expect_method = ("ficlonerange2" if fsutil.has_ficlonerange2(f.fileno())
                         else "ficlonerange")
    res = tool("clone", "--json", "--budget-ms", "50", fs / "src", fs / "dst", check=0)
    summary = json.loads(res.stdout)
    assert summary["method"] == expect_method
    assert summary["bytes"] == len(data)
    assert summary["calls"] >= 1
    assert fsutil.sha256_file(fs / "dst") == fsutil.sha256(data)
    assert all_shared(fs / "dst") and all_shared(fs / "src")
    assert "user.pcshare.clone" not in os.listxattr(fs / "dst")


def test_range_clone_leaves_the_rest_of_dst(fs):
    src = fsutil.pattern(8 * MiB, seed="range-src")
    dst = fsutil.pattern(8 * MiB, seed="range-dst")
    fsutil.write_file(fs / "src", src)
    fsutil.write_file(fs / "dst", dst)
    tool("clone", "--offset", "1M", "--length", "2M", "--dest-offset", "5M", "--chunk", "64K",
         fs / "src", fs / "dst", check=0)
    expect = dst[:5 * MiB] + src[1 * MiB:3 * MiB] + dst[7 * MiB:]
    assert fsutil.sha256_file(fs / "dst") == fsutil.sha256(expect)


def test_fixed_chunk_loop_counts_its_calls(fs):
    data = fsutil.pattern(4 * MiB, seed="chunks")
    fsutil.write_file(fs / "src", data)
    summary = json.loads(tool("clone", "--json", "--method", "ficlonerange", "--chunk", "256K",
                              fs / "src", fs / "dst", check=0).stdout)
    assert (summary["method"], summary["calls"]) == ("ficlonerange", 16)
    assert fsutil.sha256_file(fs / "dst") == fsutil.sha256(data)


def test_interrupted_clone_resumes(fs):
    data = fsutil.pattern(256 * MiB, seed="resume")
    fsutil.write_file(fs / "src", data)
    proc = subprocess.Popen([str(TOOL), "clone", "--method", "ficlonerange", "--chunk", "4K",
                             str(fs / "src"), str(fs / "dst")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
                (fs / "dst").exists() and os.path.getsize(fs / "dst") >= MiB):
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130, stderr
    assert "--resume" in stderr
    partial = os.path.getsize(fs / "dst")
    assert MiB <= partial < len(data)
    record = os.getxattr(fs / "dst", "user.pcshare.clone").decode().split()
    assert int(record[4]) == len(data) and int(record[6]) <= partial
    # The record may lag the clone, never lead it: everything it counts is there.
    assert fsutil.sha256_file(fs / "dst", 0, int(record[6])) == fsutil.sha256(data[:int(record[6])])

    tool("clone", "--resume", "--quiet", fs / "src", fs / "dst", check=0)
    assert fsutil.sha256_file(fs / "dst") == fsutil.sha256(data)
    assert "user.pcshare.clone" not in os.listxattr(fs / "dst")


def test_resume_needs_a_record_from_the_same_source(fs):
    fsutil.write_file(fs / "src", fsutil.pattern(MiB, seed="a"))
    fsutil.write_file(fs / "other", fsutil.pattern(MiB, seed="b"))
    fsutil.write_file(fs / "dst", b"x" * 4096)
    res = tool("clone", "--resume", fs / "src", fs / "dst", check=1)
    assert "no interrupted clone to resume" in res.stderr
    os.setxattr(fs / "dst", "user.pcshare.clone", b"1 1 1 0 4096 0 0")
    res = tool("clone", "--resume", fs / "other", fs / "dst", check=2)
    assert "another file" in res.stderr
    res = tool("clone", "--resume", "--offset", "0", fs / "src", fs / "dst", check=2)
    assert "drop --offset" in res.stderr


def test_invalid_ranges_exit_2(fs):
    fsutil.write_file(fs / "src", fsutil.pattern(MiB, seed="bad"))
    res = tool("clone", "--offset", "1000", "--length", "4096", fs / "src", fs / "dst", check=2)
    assert "invalid range" in res.stderr and "block size" in res.stderr
    res = tool("clone", "--offset", "2M", fs / "src", fs / "dst", check=2)
    assert "past its end" in res.stderr
    res = tool("clone", "--length", "2M", fs / "src", fs / "dst", check=2)
    assert "past its end" in res.stderr
    res = tool("clone", "--offset", "0", "--length", "64K", "--dest-offset", "32K",
               fs / "src", fs / "src", check=2)
    assert "overlap" in res.stderr
    res = tool("clone", "--budget-ms", "soon", fs / "src", fs / "dst", check=2)
    assert "--budget-ms: 'soon' is not a size" in res.stderr
    tool("clone", "--method", "teleport", fs / "src", fs / "dst", check=2)
    # Nothing was cloned by the refused requests.
    assert os.path.getsize(fs / "dst") == 0


def test_no_reflink_here_exits_3(fs, tmp_path):
    fsutil.write_file(fs / "src", fsutil.pattern(MiB, seed="x"))
    other = loop_fs("ext4", tmp_path, "64M")
    try:
        res = tool("clone", fs / "src", other / "dst", check=3)
        assert "different filesystems" in res.stderr
        fsutil.write_file(other / "src", fsutil.pattern(MiB, seed="y"))
        res = tool("clone", other / "src", other / "dst", check=3)
        assert "cannot reflink" in res.stderr
        with open(other / "src", "rb") as f:
            old_kernel = not fsutil.has_ficlonerange2(f.fileno())
        if old_kernel:
            res = tool("clone", "--method", "ficlonerange2", fs / "src", fs / "dst", check=3)
            assert "no FICLONERANGE2" in res.stderr
    finally:
        fsutil.run("umount", str(other))


def test_missing_source_exits_1(fs):
    res = tool("clone", fs / "nope", fs / "dst", check=1)
    assert "nope" in res.stderr and "No such file" in res.stderr


def test_stat_without_a_shared_cache(fs):
    res = tool("stat", fs)
    if fs.name == "xfs":
        assert res.returncode == 3 and "not a btrfs" in res.stderr
    elif res.returncode == 3:
        assert "no btrfs shared extent cache" in res.stderr
    else:
        # A host kernel with the series: the counters must parse.
        stats = json.loads(tool("stat", "--json", fs, check=0).stdout)
        assert stats["resident_pages"] >= 0 and stats["enabled"] is False
