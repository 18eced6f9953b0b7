"""A log with no failure line is a PASS only when a line shows vLLM up; a log that ends before one (an excerpt, a
start-up stopped without an error line) is an undecided error (KVD427): WARN, exit 0, exit 1 under --fail-on
undecided. Lines written from vLLM's and uvicorn's own message templates."""

from __future__ import annotations

import pytest

from kvdoctor.commands._run import gate_exit_code
from kvdoctor.explain.explain import explain_text

START = ("INFO 06-25 16:32:00 [api_server.py:1043] vLLM API server version 0.9.1\n"
         "INFO 06-25 16:32:05 [config.py:823] This model supports multiple tasks: {'generate'}. Defaulting to 'generate'.\n"
         "INFO 06-25 16:32:40 [default_loader.py:272] Loading weights took 12.31 seconds\n")


def _undecided(report) -> list[str]:
    return [f.rule_id for f in report.findings if f.status == "undecided"]


def test_a_start_up_cut_before_its_ready_line_is_undecided_not_a_pass():
    report = explain_text(START)
    assert _undecided(report) == ["KVD427"]
    assert report.verdict == "WARN" and report.exit_code("error") == 0
    assert gate_exit_code(report, "undecided") == 1
    finding = next(f for f in report.findings if f.rule_id == "KVD427")
    assert "Loading weights took 12.31 seconds" in finding.evidence[0]
    assert any("OOMKilled" in line for line in finding.decided_by)
    assert any("ends at line 3" in note for note in report.notes)


@pytest.mark.parametrize("up", [
    "INFO:     Application startup complete.",
    "INFO 06-25 16:33:00 [launcher.py:37] Starting vLLM API server 0 on http://0.0.0.0:8000",
    'INFO:     127.0.0.1:59042 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "INFO 06-25 16:34:00 [loggers.py:118] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
    "0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%",
    "Processed prompts: 100%|██████████| 4/4 [00:01<00:00,  2.93it/s, est. speed input: 16.13 toks/s]",
    "INFO 06-25 16:33:00 [core.py:171] init engine (profile, create kv cache, warmup model) took 35.2 seconds",
    # the routes vLLM lists once its app is built on the engine, a speculative decoder's stats, a benchmark's results
    "(APIServer pid=1) INFO 08-26 11:10:00 [launcher.py:46] Route: /v1/chat/completions, Methods: POST",
    "INFO 06-25 16:34:00 [metrics.py:77] Speculative metrics: Mean acceptance length: 1.80, Accepted: 40 tokens, "
    "Drafted: 90 tokens, Avg Draft acceptance rate: 44.4%",
    "Successful requests:                     100",
])
def test_a_line_that_shows_vllm_up_makes_it_a_pass_and_is_named(up):
    report = explain_text(START + up + "\n")
    assert _undecided(report) == [] and report.verdict == "PASS" and report.exit_code("error") == 0
    assert any(note.startswith("vLLM is up at line 4") for note in report.notes)


def test_a_4xx_answer_or_a_debug_line_does_not_show_it_up():
    report = explain_text(START + 'INFO:     127.0.0.1:59042 - "GET /v1/models HTTP/1.1" 404 Not Found\n'
                          "DEBUG 06-25 16:33:00 [launcher.py:37] Application startup complete.\n")
    assert _undecided(report) == ["KVD427"]


def test_a_failing_log_is_not_undecided():
    report = explain_text(START + "ERROR 06-25 16:32:41 [core.py:515] EngineCore failed to start.\n"
                          "RuntimeError: CUDA error: out of memory\n")
    assert report.exit_code("error") == 1 and _undecided(report) == []


def test_the_cli_exit_codes(run_cli, tmp_path):
    log = tmp_path / "cut.log"
    log.write_text(START)
    assert run_cli("explain", str(log)).code == 0
    result = run_cli("explain", str(log), "--fail-on", "undecided", env={"COLUMNS": "200"})
    assert result.code == 1 and "KVD427" in result.stdout


TRACKER = ("/usr/lib/python3.10/multiprocessing/resource_tracker.py:224: UserWarning: resource_tracker: There appear "
           "to be 5 leaked shared_memory objects to clean up at shutdown")


@pytest.mark.parametrize("gone", [TRACKER, "vllm-server   Exited (137) 5 seconds ago"])
def test_a_process_seen_gone_before_any_line_shows_vllm_up_is_a_failure(gone):
    report = explain_text(START + gone + "\n")
    assert report.exit_code("error") == 1 and _undecided(report) == []
    assert [e["line"] for e in report.extra["failure_evidence"]] == [4]


@pytest.mark.parametrize("gone", [TRACKER, "vllm-server   Exited (0) 5 seconds ago"])
def test_a_process_gone_after_serving_or_with_exit_code_0_is_not(gone):
    up = "INFO:     Application startup complete.\n" if gone == TRACKER else ""
    report = explain_text(START + up + gone + "\n")
    assert report.exit_code("error") == 0
