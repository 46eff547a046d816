"""The harness must never report a broken guest as a pass."""
import json
import os
import shlex
import sys

import pytest

from harness import vm

LKDTM = "/sys/kernel/debug/provoke-crash/DIRECT"
# Any kernel of the project's configs will do: make test passes the first
# non-debug one of its list (KERNEL:VARIANT), so that it builds no other.
HARNESS_KERNEL = os.environ.get("PCSHARE_HARNESS_KERNEL", "pcshare:default")
if HARNESS_KERNEL.count(":") != 1:
    raise pytest.UsageError(f"PCSHARE_HARNESS_KERNEL={HARNESS_KERNEL!r}: want KERNEL:VARIANT, "
                            "e.g. pcshare:default")
KERNEL, VARIANT = HARNESS_KERNEL.split(":")


def boot(tmp_path, script, **kw):
    kw.setdefault("timeout", 180)
    return vm.run_vm(["sh", "-c", script], kernel=KERNEL, variant=VARIANT,
                     out_dir=tmp_path / "run", echo=False, **kw)


def test_scan_console_classifies_kernel_reports():
    log = "\n".join([
        "[    1.000000] Linux version 6.12",
        "[    2.000000] Oops: general protection fault, probably for non-canonical address",
        "[    3.000000] WARNING: CPU: 1 PID: 42 at fs/btrfs/inode.c:100 foo+0x1/0x2",
        "[    4.000000] WARNING: possible circular locking dependency detected",
        "[    5.000000] BUG: KASAN: slab-use-after-free in bar+0x10/0x20",
        "[    6.000000] INFO: task python3:77 blocked for more than 120 seconds.",
        "[    7.000000] Kernel panic - not syncing: Fatal exception",
    ])
    kinds = [kind for kind, _ in vm.scan_console(log)]
    assert kinds == ["oops", "warning", "lockdep", "kasan", "hung-task", "panic"]


def test_scan_console_ignores_user_output():
    log = "tests/test_x.py::test_BUG: WARNING: CPU: 0 PID: 1 Oops: KASAN: PASSED\n"
    assert vm.scan_console(log) == []


@pytest.fixture(scope="module", autouse=True)
def built_kernel():
    if not vm.bzimage_for(KERNEL, VARIANT).is_file():
        pytest.fail(f"build the {KERNEL}/{VARIANT} kernel first: "
                    f"scripts/kernel.sh build {KERNEL} {VARIANT} (or set PCSHARE_HARNESS_KERNEL)")


def test_clean_guest_passes_and_sees_two_cpus(tmp_path):
    result = boot(tmp_path, 'test "$(nproc)" = 2 && echo ok > "$PCSHARE_OUT/marker"')
    assert result.ok, result.summary()
    assert (tmp_path / "run/marker").read_text() == "ok\n"
    saved = json.loads((tmp_path / "run/result.json").read_text())
    assert saved["ok"] and saved["exit_status"] == 0


def test_host_python_and_pytest_run_in_guest(tmp_path):
    script = f"{shlex.quote(sys.executable)} -c 'import pytest' && mkfs.btrfs --version"
    result = boot(tmp_path, script)
    assert result.ok, result.summary()


def test_exit_status_is_reported(tmp_path):
    result = boot(tmp_path, "exit 3")
    assert not result.ok
    assert result.exit_status == 3
    assert "status 3" in result.reason


def test_panic_fails_the_run(tmp_path):
    result = boot(tmp_path, "echo c > /proc/sysrq-trigger; sleep 30")
    assert not result.ok
    assert result.exit_status is None
    assert "panic" in [kind for kind, _ in result.problems]


def test_oops_fails_the_run_even_if_the_command_succeeds(tmp_path):
    result = boot(tmp_path, f"sh -c 'echo EXCEPTION > {LKDTM}'; exit 0")
    assert result.exit_status == 0
    assert not result.ok
    assert "oops" in [kind for kind, _ in result.problems], result.summary()


def test_warning_fails_the_run(tmp_path):
    result = boot(tmp_path, f"echo WARNING > {LKDTM}; exit 0")
    assert result.exit_status == 0
    assert not result.ok
    assert "warning" in [kind for kind, _ in result.problems], result.summary()


def test_hang_fails_the_run(tmp_path):
    result = boot(tmp_path, "sleep 600", timeout=45)
    assert not result.ok
    assert result.reason.startswith("hang")


def test_scratch_disk_reads_reach_the_disk(tmp_path):
    # cache=none on the host and drop_caches in the guest: a cold read must
    # show up in the guest's block device counters.
    script = """
        dd if=/dev/zero of=/dev/vda bs=1M count=16 oflag=direct status=none
        sync; echo 3 > /proc/sys/vm/drop_caches
        before=$(awk '{print $3}' /sys/block/vda/stat)
        dd if=/dev/vda of=/dev/null bs=1M count=16 status=none
        after=$(awk '{print $3}' /sys/block/vda/stat)
        echo $(( (after - before) * 512 )) > "$PCSHARE_OUT/read_bytes"
    """
    result = boot(tmp_path, script, disks=["64M"])
    assert result.ok, result.summary()
    assert int((tmp_path / "run/read_bytes").read_text()) >= 16 << 20



def test_report_split_on_the_console_is_caught_from_dmesg(tmp_path):
    # User output landed in the middle of the WARN line on the console, so
    # only the saved dmesg has it whole.
    warn = "[   12.345678] WARNING: CPU: 1 PID: 9 at fs/btrfs/inode.c:1 f+0x1/0x2"
    (tmp_path / "console.log").write_text("[   12.345678] WARNING: CPU: 1 PIDxxxxxx: 9 at\n")
    assert vm.scan_run_dir(tmp_path) == []
    (tmp_path / "dmesg.txt").write_text("[    1.000000] Linux version 6.12\n" + warn + "\n")
    assert vm.scan_run_dir(tmp_path) == [("warning", warn)]
    (tmp_path / "console.log").write_text(warn + "\n")
    assert vm.scan_run_dir(tmp_path) == [("warning", warn)]  # not counted twice


def test_attribute_names_the_test_that_was_running():
    log = "\n".join([
        "[    1.000000] WARNING: CPU: 0 PID: 1 at init/main.c:1 f+0x1/0x2",
        "[    2.000000] pcshare-test: start tests/guest/t.py::test_a[x y]",
        "[    3.000000] BUG: KASAN: slab-use-after-free in g+0x10/0x20",
        "tests/guest/t.py::test_a PASSED",
        "[    4.000000] pcshare-test: end tests/guest/t.py::test_a[x y]",
        "[    5.000000] INFO: task python3:77 blocked for more than 120 seconds.",
    ])
    assert [(kind, test) for kind, _, test in vm.kernel_log.attribute(log)] == [
        ("warning", None), ("kasan", "tests/guest/t.py::test_a[x y]"),
        ("hung-task", "after tests/guest/t.py::test_a[x y]")]


KERNEL_REPORT_TESTS = f"""
import os
def test_quiet():
    assert os.getuid() == 0
def test_warns():
    with open("{LKDTM}", "w") as f:
        f.write("WARNING")
def test_after():
    pass
"""


def test_a_kernel_report_fails_the_test_that_caused_it(tmp_path):
    """A WARN in the second of three guest tests fails that test by name (the
    per-test kmsg markers), the boot fails naming it too, and the tests
    around it pass; the guest also saves the whole dmesg."""
    (tmp_path / "test_reports.py").write_text(KERNEL_REPORT_TESTS)
    script = (f"{shlex.quote(sys.executable)} -m pytest -p no:cacheprovider"
              f" -p harness.pytest_kernel_reports -q --junitxml=$PCSHARE_OUT/j.xml"
              f" {tmp_path}/test_reports.py; exit 0")
    result = boot(tmp_path, script)
    assert result.exit_status == 0 and not result.ok
    assert "during" in result.reason and "test_reports.py::test_warns" in result.reason
    junit = (tmp_path / "run/j.xml").read_text()
    failed = [case for case in junit.split("<testcase ")[1:] if "<failure" in case
              or "<error" in case]
    assert len(failed) == 1 and 'name="test_warns"' in failed[0], junit
    assert "kernel reported warning during" in failed[0]
    dmesg = (tmp_path / "run/dmesg.txt").read_text(errors="replace")
    assert "warning" in [kind for kind, _ in vm.scan_console(dmesg)]
