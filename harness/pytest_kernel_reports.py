"""pytest plugin for the guest suites: per-test kernel log markers.

Each test's start and end are marked in the kernel log, and a problem
report (WARN, lockdep, KASAN, BUG, hung task) logged in between fails that
test by name.  tests/guest/conftest.py uses it; elsewhere: pytest -p
harness.pytest_kernel_reports (in a guest, as root).
"""
import pytest

from harness import kernel_log


@pytest.fixture(autouse=True)
def kernel_reports(request):
    """Set up before the test's other fixtures, so their teardown counts."""
    log = kernel_log.KernelLog()
    kernel_log.mark("start", request.node.nodeid)
    try:
        yield
    finally:
        messages = log.read()
        log.close()
        kernel_log.mark("end", request.node.nodeid)
    reports = [(kind, m) for m in messages if (kind := kernel_log.classify(m))]
    if reports:
        kind, message = reports[0]
        pytest.fail(f"kernel reported {kind} during {request.node.nodeid}: {message}"
                    f" ({len(reports)} report lines)", pytrace=False)
