"""Exit 2, one line, no traceback: nothing listening, not a server URL, bad flags, a bad --report."""

from __future__ import annotations

import json

import pytest
from .verify_support import kvdoctor
from vllm_cpu_support import free_port


@pytest.fixture
def report(tmp_path):
    path = tmp_path / "check.json"
    path.write_text(json.dumps({"command": "check", "verdict": "PASS", "facts": {"vllm.version": "0.32.0"}}))
    return path


def _one_line_exit_2(done) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("kvdoctor: error: ") and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    return done.stderr


def test_nothing_listening(tmp_path, report):
    port = free_port()
    line = _one_line_exit_2(kvdoctor("verify", f"http://127.0.0.1:{port}", "--report", str(report), cwd=tmp_path))
    assert f"connection refused: nothing listens at http://127.0.0.1:{port}" in line


@pytest.mark.parametrize("args, said", [
    (("ftp://x",), "not a server URL"),
    (("http://user:pw@host:8000",), "the URL carries credentials"),
    (("http://127.0.0.1:1",), "nothing to compare the server with"),
    (("http://127.0.0.1:1", "--report", "missing.json"), "--report missing.json: No such file"),
    (("http://127.0.0.1:1", "--report", "{report}", "--model", "m"), "--report and check's flags both given"),
    (("http://127.0.0.1:1", "--report", "{report}", "--timeout", "0"), "--timeout 0: must be more than 0"),
    (("http://127.0.0.1:1", "--report", "{report}", "--api-key-env", "NOT_SET_ANYWHERE"), "the variable is not set"),
    (("http://127.0.0.1:1", "--report", "{report}", "--header", "broken"), "expected 'Name: value'"),
    (("http://127.0.0.1:1", "--report", "{report}", "--format", "sarif"), "unknown verify format 'sarif'"),
])  # fmt: skip
def test_bad_input(tmp_path, report, args, said):
    argv = [a.replace("{report}", str(report)) for a in args]
    assert said in _one_line_exit_2(kvdoctor("verify", *argv, cwd=tmp_path))


def test_a_file_that_is_not_a_check_report(tmp_path):
    scan = tmp_path / "scan.json"
    scan.write_text(json.dumps({"command": "scan", "workloads": []}))
    line = _one_line_exit_2(kvdoctor("verify", "http://127.0.0.1:1", "--report", str(scan), cwd=tmp_path))
    assert "not a kvdoctor check report (command: 'scan')" in line
