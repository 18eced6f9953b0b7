"""A bug inside kvdoctor is one line and exit 3; --debug shows the traceback."""

from __future__ import annotations

import subprocess
import sys

from conftest import EXAMPLE_MODEL, REPO

# Break the rules engine from inside the process, as a bug would.
CODE = """
import sys
import kvdoctor.rules.engine as engine
def broken(rules, facts):
    raise ZeroDivisionError("simulated bug")
engine.evaluate_rules = broken
import kvdoctor.check.run
kvdoctor.check.run.evaluate_rules = broken
sys.argv = ["kvdoctor", "check", "--model", sys.argv[1], "--gpu", "A100", "--no-compile"] + sys.argv[2:]
from kvdoctor.cli import main
main()
"""


def run(*extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CODE, str(EXAMPLE_MODEL), *extra], capture_output=True, text=True, cwd=REPO)


def test_internal_error_is_one_line_and_exit_3():
    result = run()
    assert result.returncode == 3
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "internal error: ZeroDivisionError: simulated bug" in lines[0]


def test_debug_shows_the_traceback():
    result = run("--debug")
    assert result.returncode == 1 and "Traceback" in result.stderr and "ZeroDivisionError" in result.stderr


def test_matrix_bug_is_one_line_and_exit_3(monkeypatch, capsys):
    """matrix keeps check's error contract: a kvdoctor bug is one stderr line and exit 3, no traceback."""
    import sys

    import pytest

    import kvdoctor.matrix as matrix
    from kvdoctor.cli import main

    def broken(request, on_cell=None):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(matrix, "run_matrix", broken)
    monkeypatch.setattr(sys, "argv", ["kvdoctor", "matrix", "--model", str(EXAMPLE_MODEL), "--gpus", "A100",
                                      "--kv-cache-dtypes", "auto", "--no-compile", "--vllm-version", "0.27.0"])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kvdoctor: internal error: RuntimeError: boom second line")
