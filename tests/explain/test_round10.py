"""Round 10 of issue 28 (batch 15's seen misses, the lead's): a log that ends waiting is a hang, whatever the level of
its wait notice, and the CUDA runtime's and driver's error names count as failure lines; each on synthetic lines of
several shapes, with the healthy shapes that must stay at exit 0."""

from __future__ import annotations

import pytest

from kvdoctor.explain.explain import explain_text
from kvdoctor.report.check.text import render


def _exit(log: str) -> int:
    return explain_text(log).exit_code("error")


def _text(log: str) -> str:
    return " ".join(render(explain_text(log)).split())


START = "INFO 07-24 07:59:20 [api_server.py:1] vLLM API server version 0.10.0\n"


@pytest.mark.parametrize("notice", [
    "DEBUG 07-24 07:59:37 [utils.py:475] Waiting for 1 local, 0 remote core engine proc(s) to start.",
    "DEBUG 10-09 19:47:51 [scheduler.py:345] cmpl-c7da02-0 is still in WAITING_FOR_REMOTE_KVS state.",
    "(EngineCore_DP0 pid=7) INFO 01-02 03:04:05 [core.py:1] Still waiting for the KV connector handshake",
    "2025-01-02 03:04:05,678 INFO worker.py:1 -- Waiting for placement group 4b2f to be ready",
    "[pod/vllm-0] readiness: vllm not ready yet (attempt 3)",
])  # fmt: skip
@pytest.mark.parametrize("separator", ["", "...\n"])
def test_a_log_that_ends_on_one_wait_notice_repeated_is_a_hang(notice, separator):
    log = START + "".join(f"{notice}\n{separator}" for _ in range(3))
    assert _exit(log) == 1
    assert "a hang" in _text(log)


@pytest.mark.parametrize("log", [
    # the wait ended: the server started after it
    START + "DEBUG 07-24 07:59:37 [utils.py:475] Waiting for 1 local, 0 remote core engine proc(s) to start.\n" * 3
    + "INFO 07-24 08:01:00 [launcher.py:1] Application startup complete.\n",
    # one notice: a slow step, not a hang
    START + "DEBUG 07-24 07:59:37 [utils.py:475] Waiting for 1 local, 0 remote core engine proc(s) to start.\n",
    # different things waited for, one after the other: progress
    START + "INFO 01-02 03:04:05 [a.py:1] Waiting for the model download\n"
    + "INFO 01-02 03:04:06 [a.py:1] Waiting for the tokenizer to load\n",
    # the scheduler's periodic stats count waiting requests: not a wait notice
    START + "INFO 01-02 03:04:05 [loggers.py:1] Avg prompt throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs\n" * 3,
])  # fmt: skip
def test_a_wait_that_ends_or_does_not_repeat_is_not_a_failure(log):
    assert _exit(log) == 0


@pytest.mark.parametrize("line", [
    "cudaErrorLaunchFailure: unspecified launch failure",
    "RuntimeError: CUDA driver returned CUDA_ERROR_ILLEGAL_ADDRESS",
    "got cudaErrorIllegalAddress from the copy",
    "CUDA_ERROR_OUT_OF_MEMORY",
])  # fmt: skip
def test_the_cuda_error_names_are_failure_lines(line):
    assert _exit(line + "\n") == 1


@pytest.mark.parametrize("line", [
    "cudaError_t status = cudaMemcpy(dst, src, n, kind);",  # code quoted in a log
    "    cudaErrorInvalidValue = 1,",  # an enum listing
])  # fmt: skip
def test_cuda_error_types_and_enum_listings_are_not(line):
    assert _exit(START + line + "\n") == 0
