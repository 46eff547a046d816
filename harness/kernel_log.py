"""Kernel problem reports in a guest's log, and the test each belongs to.

The guest suites write a marker to /dev/kmsg when each test starts and ends
(tests/guest/conftest.py), as fstests' check does, so a WARN, lockdep or
KASAN report fails the test that was running, by name, and the host's scan
of the console (harness/vm.py) names it too.
"""
import os
import re

MARKER = "pcshare-test:"
# Console lines carry a "[    1.234567] " timestamp (CONFIG_PRINTK_TIME);
# only such lines are classified, so a test that prints "BUG:" cannot trip it.
KERNEL_LINE = re.compile(r"^\[\s*\d+\.\d+\] ")
PROBLEMS = [
    ("panic", re.compile(r"Kernel panic - not syncing")),
    ("kasan", re.compile(r"KASAN:")),
    ("lockdep", re.compile(
        r"possible circular locking dependency|possible recursive locking"
        r"|inconsistent lock state|suspicious RCU usage"
        r"|INFO: trying to register non-static key|bad unlock balance"
        r"|held lock freed|lock held when returning to user space")),
    ("hung-task", re.compile(r"INFO: task .* blocked for more than")),
    ("oops", re.compile(r"Oops:|general protection fault|kernel BUG at"
                        r"|BUG: unable to handle")),
    ("bug", re.compile(r"BUG: |UBSAN:|list_(add|del) corruption")),
    ("warning", re.compile(r"WARNING: CPU: \d+ PID: \d+|WARNING: .* at ")),
]
_MARK = re.compile(re.escape(MARKER) + r" (start|end) (.+)$")


def classify(message):
    """The kind of problem a kernel message reports, or None."""
    for kind, pattern in PROBLEMS:
        if pattern.search(message):
            return kind
    return None


def attribute(text):
    """[(kind, line, test)] for every problem report among a console log's
    kernel lines; test is the node id of the test running when it was
    logged, "after NODEID" between tests, or None before the first."""
    found, test = [], None
    for line in text.splitlines():
        if not KERNEL_LINE.match(line):
            continue
        mark = _MARK.search(line)
        if mark:
            name = mark[2].strip()
            test = name if mark[1] == "start" else f"after {name}"
            continue
        kind = classify(line)
        if kind:
            found.append((kind, line.strip(), test))
    return found


def mark(event, nodeid):
    """Log "pcshare-test: EVENT NODEID" in the kernel log (guest, root)."""
    fd = os.open("/dev/kmsg", os.O_WRONLY)
    try:
        os.write(fd, f"{MARKER} {event} {nodeid}\n".encode())
    finally:
        os.close(fd)


class KernelLog:
    """The kernel log from now on: read() returns the messages logged since
    the last call (or since the object was made), one string each."""

    def __init__(self):
        self.fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
        os.lseek(self.fd, 0, os.SEEK_END)

    def read(self):
        messages = []
        while True:
            try:
                record = os.read(self.fd, 8192)
            except BlockingIOError:
                return messages
            except BrokenPipeError:  # records overwritten before we read them
                continue
            messages.append(record.decode(errors="replace").partition(";")[2].split("\n")[0])

    def close(self):
        os.close(self.fd)
