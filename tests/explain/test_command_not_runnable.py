"""A deployment whose command never ran (the shell or the container runtime could not execute vLLM's launcher): the
shell's or runc's own line is the failure (KVD453, command_not_runnable), above the orchestrator's CrashLoopBackOff,
and it stops counting once the program did run after all (vLLM's own records or an exception follow)."""

from __future__ import annotations

import pytest

from kvdoctor.explain.explain import explain_text

POD_STATUS = ("NAME                          READY   STATUS             RESTARTS      AGE\n"
              "vllm-server-f5c67d786-f9n4f   0/1     CrashLoopBackOff   4 (53s ago)   2m35s\n")


@pytest.mark.parametrize("line, program, reason", [
    ("/bin/sh: 1: vllm: Permission denied", "vllm", "Permission denied"),
    ("bash: line 1: vllm: command not found", "vllm", "command not found"),
    ("zsh: command not found: vllm", "vllm", "command not found"),
    ("exec /usr/bin/python3: exec format error", "/usr/bin/python3", "exec format error"),
    ("/usr/bin/env: 'python3': No such file or directory", "python3", "No such file or directory"),
    ('Error: failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create '
     'failed: unable to start container process: exec: "vllm": executable file not found in $PATH: unknown',
     "vllm", "executable file not found in $PATH"),
])
def test_a_command_the_shell_or_runtime_could_not_run_is_the_failure_above_the_pods_status(line, program, reason):
    report = explain_text(POD_STATUS + line + "\n")
    assert report.exit_code("error") == 1
    first = report.sorted_findings()[0]
    assert (first.rule_id, report.extra.get("family")) == ("KVD453", "command_not_runnable")
    assert program in first.title and reason in first.title


def test_without_the_shells_line_the_log_would_only_show_the_pods_status_or_nothing():
    report = explain_text("/bin/sh: 1: vllm: Permission denied\n")
    assert report.exit_code("error") == 1  # before KVD453 this log was 'ends before vLLM is up': exit 0


@pytest.mark.parametrize("after", [
    "INFO 05-02 10:22:18 [api_server.py:1] vLLM API server version 0.10.0",
    "Traceback (most recent call last):",
    "RuntimeError: CUDA error: no kernel image is available for execution on the device",
])
def test_a_program_that_ran_after_all_is_not_the_failure(after):
    report = explain_text("/bin/sh: 1: vllm: Permission denied\n" + after + "\n")
    assert "KVD453" not in {f.rule_id for f in report.findings}


def test_a_side_tool_missing_is_not_the_command_that_never_ran():
    report = explain_text("/bin/sh: 1: nvidia-smi: not found\n")
    assert "KVD453" not in {f.rule_id for f in report.findings}

