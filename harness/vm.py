"""Boot a pcshare kernel under QEMU and run one command inside it: run_vm(),
or `python3 -m harness.vm` on the command line.

The guest's root is the host's / over 9p, read-only, so the guest has the
host's python3, pytest, btrfs-progs, xfs_io and fio. A run directory is
shared writable as /run/pcshare/out ($PCSHARE_OUT in the guest); scratch
disks are raw files attached with cache=none, so a guest's cold read really
reads the disk image.

The run fails when the command exits non-zero, when the guest does not
report an exit status (panic, reboot), when it runs past the timeout (hang),
or when the kernel log shows an oops, BUG, WARNING, lockdep, KASAN or
hung-task report, whatever the command's exit status.
"""
import argparse
import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

from harness import kernel_log

TOP = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("PCSHARE_CACHE", Path.home() / ".cache/pcshare"))

def scan_console(text):
    """Return [(kind, line)] for every kernel problem report in a console log."""
    return [(kind, line) for kind, line, _ in kernel_log.attribute(text)]


def scan_run_dir(out):
    """Kernel problem reports of a finished run: console.log plus dmesg.txt.

    The console interleaves kernel and user output, which can split a kernel
    line; the dmesg the guest saves at a clean exit cannot be split.
    """
    out = Path(out)
    problems = scan_console((out / "console.log").read_text(errors="replace"))
    dmesg = out / "dmesg.txt"
    if dmesg.exists():
        seen = {line for _, line in problems}
        problems += [p for p in scan_console(dmesg.read_text(errors="replace"))
                     if p[1] not in seen]
    return problems


@dataclasses.dataclass
class Result:
    ok: bool
    reason: str
    exit_status: int | None
    problems: list
    seconds: float
    out_dir: str
    console_log: str

    def summary(self):
        if self.ok:
            return f"guest ok in {self.seconds:.1f} s"
        lines = [f"guest FAILED: {self.reason} (console log: {self.console_log})"]
        lines += [f"  {kind}: {line}" for kind, line in self.problems[:10]]
        return "\n".join(lines)


def kvm_usable():
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    flags = Path("/proc/cpuinfo").read_text()
    return bool(re.search(r"^flags\s*:.*\b(vmx|svm)\b", flags, re.M))


def bzimage_for(kernel, variant):
    return CACHE / kernel / f"build-{variant}" / "arch/x86/boot/bzImage"


def build_kernel(kernel, variant="default"):
    """Bring KERNEL/VARIANT's bzImage up to date (incremental; seconds when it is)."""
    subprocess.run([str(TOP / "scripts/kernel.sh"), "build", kernel, variant],
                   check=True, stdout=subprocess.DEVNULL)


def has_shared_cache(kernel, variant="default"):
    """Was KERNEL/VARIANT built with the btrfs shared extent cache?"""
    config = CACHE / kernel / f"build-{variant}" / ".config"
    return "CONFIG_BTRFS_SHARED_CACHE=y" in config.read_text().splitlines()


def has_clone2(kernel, variant="default"):
    """Was KERNEL/VARIANT built with FICLONERANGE2 (the series' VFS patch)?"""
    system_map = CACHE / kernel / f"build-{variant}" / "System.map"
    return any(line.endswith(" vfs_clone_file_range2")
               for line in system_map.read_text().splitlines())


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = str(text).strip().upper().rstrip("B").rstrip("I")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def run_vm(command, *, kernel="stock", variant="default", bzimage=None,
           mem="2G", cpus=2, disks=(), timeout=600, out_dir=None, env=None,
           cwd=None, echo=True, append="", icount=None):
    """Boot, run `command` (argv list) in the guest, return a Result.
    ICOUNT: run the vCPUs under TCG (even where KVM works) in one thread
    with QEMU's -icount shift=ICOUNT, so the guest's clock counts
    instructions (2^ICOUNT ns each) and not host time: a guest-timed
    benchmark then compares instruction counts, free of what else the host
    runs. Idle time is skipped, so waits for the disk take no guest time:
    only CPU-bound timing means anything there."""
    bzimage = Path(bzimage or bzimage_for(kernel, variant))
    if not bzimage.is_file():
        raise FileNotFoundError(f"no kernel at {bzimage}: build it with "
                                f"scripts/kernel.sh build {kernel} {variant}")
    if out_dir is None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        out_dir = CACHE / "runs" / f"{stamp}-{kernel}-{variant}-{os.getpid()}"
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("exit-status", "dmesg.txt"):
        (out / stale).unlink(missing_ok=True)

    disk_files = []
    for i, size in enumerate(disks):
        path = out / f"disk{i}.raw"
        with open(path, "wb") as f:
            f.truncate(parse_size(size))
        disk_files.append(path)
    devices = " ".join(f"/dev/vd{chr(ord('a') + i)}" for i in range(len(disks)))

    # PYTHONPATH: the one place a guest job gets the checkout's packages
    # (harness, bench), whatever it runs: pytest on tests/guest, python3 -m
    # bench.NAME_guest, tests/soak.py by path.
    guest_env = {"PYTHONPATH": str(TOP), "PCSHARE_OUT": "/run/pcshare/out",
                 "PCSHARE_KERNEL": kernel, "PCSHARE_VARIANT": variant,
                 "PCSHARE_DISKS": devices,
                 # where host-built tools are (the patched cp of `make cp`)
                 "PCSHARE_CACHE": str(CACHE)}
    guest_env.update(env or {})
    job = ["set -u", f"cd {shlex.quote(str(cwd or TOP))}"]
    job += [f"export {k}={shlex.quote(str(v))}" for k, v in guest_env.items()]
    job.append(shlex.join(command))
    (out / "job.sh").write_text("\n".join(job) + "\n")

    if icount is None and kvm_usable():
        accel = ["-accel", "kvm", "-cpu", "host"]
    else:
        # icount needs all vCPUs in one thread; sleep=off skips idle time.
        threads = "multi" if icount is None else "single"
        accel = ["-accel", f"tcg,thread={threads}", "-cpu", "max"]
        if icount is not None:
            accel += ["-icount", f"shift={int(icount)},align=off,sleep=off"]
        # Under TCG a KASAN+lockdep kernel spends tens of seconds in single
        # boot steps (ACPI link setup), which trips RCU's 21 s stall check
        # though nothing is stuck. 300 s is the largest timeout RCU allows; a
        # real stall still warns, and a real hang still hits the run timeout.
        append = f"rcupdate.rcu_cpu_stall_timeout=300 {append}"
    cmdline = ("console=ttyS0 root=/dev/root rootfstype=9p "
               "rootflags=trans=virtio,version=9p2000.L,msize=512000,cache=loose "
               f"ro init={TOP / 'scripts/guest-init.sh'} panic=-1 "
               f"printk.time=1 {append}").strip()
    qemu = ["qemu-system-x86_64", "-nodefaults", "-no-user-config",
            "-display", "none", "-no-reboot", *accel,
            "-smp", str(cpus), "-m", str(parse_size(mem) >> 20),
            "-kernel", str(bzimage), "-append", cmdline, "-serial", "stdio",
            "-fsdev", "local,id=root,path=/,security_model=none,readonly=on,multidevs=remap",
            "-device", "virtio-9p-pci,fsdev=root,mount_tag=/dev/root",
            "-fsdev", f"local,id=out,path={out},security_model=none",
            "-device", "virtio-9p-pci,fsdev=out,mount_tag=out"]
    for path in disk_files:
        qemu += ["-drive", f"file={path},format=raw,if=virtio,cache=none"]

    console_path = out / "console.log"
    start = time.monotonic()
    with open(console_path, "w", errors="replace") as log:
        proc = subprocess.Popen(qemu, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

        def pump():
            for raw in proc.stdout:
                line = raw.decode(errors="replace")
                log.write(line)
                log.flush()
                if echo:
                    # A string names the guest, for runs of several at once.
                    sys.stdout.write(echo + line if isinstance(echo, str) else line)
                    sys.stdout.flush()

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            proc.kill()
            proc.wait()
        reader.join(timeout=10)
    seconds = time.monotonic() - start
    for path in disk_files:
        path.unlink(missing_ok=True)

    problems = scan_run_dir(out)
    status_file = out / "exit-status"
    exit_status = int(status_file.read_text()) if status_file.exists() else None
    if timed_out:
        reason = f"hang: no exit within {timeout} s"
    elif problems:
        reason = f"kernel reported {problems[0][0]}: {problems[0][1]}"
        culprits = kernel_log.attribute(console_path.read_text(errors="replace"))
        if culprits and culprits[0][2]:
            kind, line, test = culprits[0]
            reason = f"kernel reported {kind} during {test}: {line}"
    elif exit_status is None:
        reason = f"guest ended without an exit status (QEMU exit {proc.returncode})"
    elif exit_status != 0:
        reason = f"command exited with status {exit_status}"
    else:
        reason = "ok"
    result = Result(ok=reason == "ok", reason=reason, exit_status=exit_status,
                    problems=problems, seconds=seconds, out_dir=str(out),
                    console_log=str(console_path))
    (out / "result.json").write_text(json.dumps(dataclasses.asdict(result), indent=2))
    return result


def main():
    ap = argparse.ArgumentParser(
        prog="python3 -m harness.vm", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="%(prog)s [options] -- COMMAND [ARGS...]")
    ap.add_argument("--kernel", default="stock", choices=["stock", "pcshare"])
    ap.add_argument("--variant", default="default", choices=["default", "debug", "lockstat"])
    ap.add_argument("--bzimage", help="boot this image instead of the cached build")
    ap.add_argument("--mem", default="2G", help="guest memory (default 2G)")
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--disk", action="append", default=[], metavar="SIZE",
                    help="attach a sparse raw scratch disk (repeatable): /dev/vda, /dev/vdb, ...")
    ap.add_argument("--timeout", type=float, default=600, help="seconds before the run counts as hung")
    ap.add_argument("--out", help="run directory (default: under the cache)")
    ap.add_argument("--append", default="", help="extra kernel command line")
    ap.add_argument("--quiet", action="store_true", help="do not echo the console")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("no command given (put it after --)")
    try:
        result = run_vm(command, kernel=args.kernel, variant=args.variant,
                        bzimage=args.bzimage, mem=args.mem, cpus=args.cpus,
                        disks=args.disk, timeout=args.timeout, out_dir=args.out,
                        echo=not args.quiet, append=args.append)
    except FileNotFoundError as e:
        print(f"harness.vm: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(dataclasses.asdict(result), indent=2))
    else:
        print(result.summary(), file=sys.stderr)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
