"""Real failure logs from public threads (tests/fixtures/logs_real, seen entries only): the family and the
values the thread's error lines name. Held-out entries are measured by tools/measure_explain.py, not here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "fixtures" / "logs_real"
MIN_SHARE = 0.9


def _measure():
    spec = importlib.util.spec_from_file_location("measure_explain", ROOT / "tools" / "measure_explain.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _seen():
    from kvdoctor.base.yaml_safe import load_yaml

    index = LOGS / "index.yaml"
    if not index.is_file():
        return []
    return [e for e in load_yaml(index.read_text()) if not e.get("heldout") and (LOGS / e["file"]).is_file()]


@pytest.mark.skipif(not _seen(), reason="no real-log fixtures")
def test_seen_real_logs_are_explained():
    measure = _measure()
    results = [(entry["file"], *measure.judge(entry)) for entry in _seen()]
    missed = [f"{name}: {detail}" for name, ok, detail in results if not ok]
    share = 1 - len(missed) / len(results)
    assert share >= MIN_SHARE, "\n".join(missed)


@pytest.mark.skipif(not _seen(), reason="no real-log fixtures")
def test_every_healthy_seen_log_exits_zero():
    measure = _measure()
    for entry in _seen():
        if entry.get("failure") is False:
            ok, detail = measure.judge(entry)
            assert ok, (entry["file"], detail)
