"""The userspace patch series (userspace/fstests, userspace/xfsprogs): they
apply to the sources `make fstests` builds (when those are on this machine),
carry the ABI the kernel series defines, and are in the form their mailing
lists take; and scripts/fstests.py's bookkeeping."""
import os
import re
import subprocess
import tarfile
from pathlib import Path

import pytest

from harness import uapi

from conftest import load_program

fstests = load_program("scripts/fstests.py")

TOP = Path(__file__).resolve().parents[2]
USERSPACE = TOP / "userspace"
VENDOR = TOP.parent / "shared/vendor/xfstests-63a29724a85f.tar.gz"
CACHE = Path(os.environ.get("PCSHARE_CACHE", Path.home() / ".cache/pcshare"))
AUTHOR = "pcshare developers <pcshare@example.org>"
LISTS = {"fstests": "fstests@vger.kernel.org", "xfsprogs": "linux-xfs@vger.kernel.org"}


def series(name):
    patches = sorted((USERSPACE / name).glob("*.patch"))
    assert patches and patches[0].name.startswith("0000-cover-letter"), name
    return patches


def added_text(patch, path):
    """The lines `patch` adds to `path`."""
    out, in_file = [], False
    for line in patch.read_text().splitlines():
        if line.startswith("diff --git "):
            in_file = line.endswith(" b/" + path)
        elif in_file and line.startswith("+") and not line.startswith("+++"):
            out.append(line[1:])
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("name", sorted(LISTS))
def test_series_form(name):
    cover, *patches = series(name)
    assert patches
    assert f"To: {LISTS[name]}" in cover.read_text()
    assert "*** SUBJECT HERE ***" not in cover.read_text()
    for p in [cover, *patches]:
        text = p.read_text()
        assert f"From: {AUTHOR}" in text, p.name
    for p in patches:
        assert f"Signed-off-by: {AUTHOR}" in p.read_text(), p.name


@pytest.mark.parametrize("name, path", [
    ("xfsprogs", "io/reflink.c"),
    ("fstests", "src/ficlonerange2.c"),
])
def test_struct_copies_match_the_uapi(name, path):
    text = "".join(added_text(p, path) for p in series(name)[1:])
    assert uapi.struct_fields(text) == uapi.struct_fields()
    for define in ("FICLONERANGE2", "FICLONERANGE2_PARTIAL"):
        assert (re.sub(r"\s+", " ", uapi.defines(text)[define])
                == re.sub(r"\s+", " ", uapi.defines()[define])), define
    assert "#ifndef FICLONERANGE2" in text


def git_apply_check(tree, patches):
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    done = subprocess.run(["git", "-C", str(tree), "apply", "--check", *map(str, patches)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(not VENDOR.exists(), reason=f"no {VENDOR}")
def test_fstests_patches_apply_to_the_vendored_tarball(tmp_path):
    with tarfile.open(VENDOR) as tar:
        tar.extractall(tmp_path, filter="data")
    (tree,) = tmp_path.iterdir()
    git_apply_check(tree, series("fstests")[1:])


def xfsprogs_source():
    return next(iter(sorted((CACHE / "xfsprogs").glob("xfsprogs-*/io/reflink.c"))), None)


@pytest.mark.skipif(xfsprogs_source() is None, reason="no xfsprogs source (apt-get source)")
def test_xfsprogs_patches_apply_to_the_debian_source(tmp_path):
    src = xfsprogs_source().parents[1]
    for part in ("io/reflink.c", "man/man8/xfs_io.8"):
        (tmp_path / part).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / part).write_bytes((src / part).read_bytes())
    git_apply_check(tmp_path, series("xfsprogs")[1:])


def test_new_tests_are_the_ones_the_patches_create():
    new = fstests.new_tests(USERSPACE / "fstests")
    assert new and all(re.fullmatch(r"generic/\d+", t) for t in new)
    text = "".join(p.read_text() for p in series("fstests"))
    for t in new:
        assert f" create mode 100644 tests/{t}.out" in text, t


def test_expectations():
    def row(kernel, status, new=True):
        return {"test": "generic/788", "filesystem": "xfs", "kernel": kernel,
                "status": status, "seconds": 1, "new": new}
    new = ["generic/788"]
    assert fstests.expectation_problems(
        [row("stock", "notrun"), row("pcshare", "pass"),
         row("stock", "pass", False), row("stock", "notrun", False)], new) == []
    for bad in (row("stock", "pass"), row("pcshare", "notrun"), row("pcshare", "fail"),
                row("stock", "fail", False)):
        assert len(fstests.expectation_problems([bad], new)) == 1, bad


def test_xunit_statuses(tmp_path):
    report = tmp_path / "result.xml"
    report.write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="xfstests">\n'
        '<testcase classname="xfstests.global" name="generic/110" time="3"></testcase>\n'
        '<testcase classname="xfstests.global" name="generic/788" time="0">'
        '<skipped message="kernel does not support FICLONERANGE2" /></testcase>\n'
        '<testcase classname="xfstests.global" name="generic/789" time="9">'
        '<failure message="- output mismatch" type="TestFail" /></testcase>\n'
        '</testsuite>\n')
    assert fstests.parse_xunit(report) == [("generic/110", "pass", 3.0),
                                           ("generic/788", "notrun", 0.0),
                                           ("generic/789", "fail", 9.0)]


def test_clone_quick_reads_group_lists(tmp_path):
    for d, text in {"generic": "# comment\n\n110 auto quick clone\n112 auto clone\n",
                    "xfs": "001 auto quick clone\n", "btrfs": "002 quick clone\n"}.items():
        (tmp_path / "tests" / d).mkdir(parents=True)
        (tmp_path / "tests" / d / "group.list").write_text(text)
    assert fstests.clone_quick(tmp_path, ["xfs"]) == ["generic/110", "xfs/001"]
    assert fstests.applies_to("xfs/001", "xfs") and not fstests.applies_to("xfs/001", "btrfs")
