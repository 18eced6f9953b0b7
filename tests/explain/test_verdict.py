"""The exit contract (explain/verdict.py): any failure evidence in a log makes explain exit 1, and a log exits 0
only when it holds none; a wrapper's quoted payload is read as the failure itself, however deep the wrappers nest."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvdoctor.base.yaml_safe import load_yaml
from kvdoctor.explain.explain import explain_log, explain_text
from kvdoctor.explain.log_lines import normalise
from kvdoctor.explain.tracebacks import parse_chains
from kvdoctor.explain.verdict import FailureEvidence, failure_evidence, uphold
from kvdoctor.model.report import Finding, Report

FIXTURES = Path(__file__).parents[1] / "fixtures"
HEADS = "INFO 05-02 10:22:10 [api_server.py:1] vLLM API server version 0.30.0\n"
WRAP = "Worker failed with error '{}', please check the stack trace above for the root cause"


def kinds(report: Report) -> set[str]:
    return {e["kind"] for e in report.extra["failure_evidence"]}


@pytest.mark.parametrize("line, kind", [
    ("ERROR 05-02 10:22:18 [core.py:9] EngineCore failed to start.", "wrapper"),
    ("(EngineCore_DP0 pid=81) ERROR 05-02 10:22:18 [core.py:9] EngineCore failed to start.", "wrapper"),
    ("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}", "wrapper"),
    ("AssertionError: the flux capacitor is not charged", "exception"),
    ("ERROR 05-02 10:22:18 [worker.py:9] The worker lost its GPU", "error level"),
    ("CRITICAL 05-02 10:22:18 [launcher.py:9] The engine is gone", "error level"),
    ("/tmp/x/cuda_utils.c:6:10: fatal error: Python.h: No such file or directory", "error text"),
    ("ptxas error   : Entry function uses too much shared data", "error text"),
    ("torch.AcceleratorError: CUDA error: an illegal memory access was encountered", "exception"),
    ("  what():  CUDA error: unspecified launch failure", "error text"),
    ("Killed", "error text"),
    ("Segmentation fault (core dumped)", "error text"),
    ("WARNING 05-02 10:22:18 [api_server.py:9] API server process failed to start", "failed to start"),
    ('INFO:     10.0.0.7:4711 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error', "error text"),
    ("WARNING 05-02 10:22:18 [core_client.py:9] Engine core proc EngineCore_DP0 died unexpectedly", "error text"),
    ("INFO 05-02 10:22:18 [multiproc.py:9] Worker proc VllmWorker-0 exited with code -9", "error text"),
    ("terminate called after throwing an instance of 'c10::Error'", "error text"),
])
def test_each_kind_of_failure_line_exits_1(line, kind):
    report = explain_text(HEADS + line + "\n")
    assert report.exit_code("error") == 1, line
    assert kind in kinds(report)
    assert report.findings[0].severity == "error"


def test_a_wrapper_only_log_says_the_failing_process_error_is_missing():
    report = explain_text(HEADS + "ERROR 05-02 10:22:18 [core.py:9] EngineCore failed to start.\n")
    assert report.exit_code("error") == 1
    (first, *_) = report.findings
    assert first.rule_id == "KVD399"
    assert "only a wrapper line" in first.cause and "EngineCore failed to start" in first.cause
    assert "message index locates" not in first.cause  # where the wrapper is logged says nothing new


def test_a_line_at_a_raise_site_of_the_message_index_exits_1():
    """A bare printed line that no rule knows, but that the message index places at a vLLM `raise`."""
    from kvdoctor.explain.message_index import load_index
    from kvdoctor.explain.verdict import ERROR_TEXT, FAILED_TO_START

    index = load_index()
    text = next(t.text for t in index.templates()
                if None not in t.parts and len(t.text) > 60 and "\n" not in t.text and t.text[0].isupper()
                and all(loc.kind == "raise" and loc.package == "vllm" for loc in t.locations)
                and not ERROR_TEXT.search(t.text) and not FAILED_TO_START.search(t.text) and ":" not in t.text[:40]
                and explain_text(HEADS + "INFO 05-02 10:22:18 [x.py:1] " + t.text + "\n").exit_code("error") == 0)
    report = explain_text(HEADS + text + "\n")
    assert report.exit_code("error") == 1, text
    assert kinds(report) == {"raise site"}
    assert report.extra["located"]


def test_nested_wrappers_are_read_down_to_the_worker_error():
    inner = "Total number of attention heads (28) must be divisible by tensor parallel size (8)"
    nested = "RuntimeError: " + WRAP.format("RuntimeError: " + WRAP.format("ValueError: " + inner))
    report = explain_text(HEADS + "ERROR 05-02 10:22:18 [core.py:9] " + nested + "\n")
    assert report.exit_code("error") == 1
    assert report.extra["family"] == "parallel_divisibility"
    assert report.extra["primary"]["exception_type"] == "ValueError"


def test_a_payload_printed_as_a_repr_is_unescaped():
    payload = "CUDA error: no kernel image is available for execution on the device\\nCUDA kernel errors might be"
    chains = parse_chains(normalise("RuntimeError: " + WRAP.format(payload)))
    innermost = chains[0].innermost
    assert innermost.wrapped and "\n" in innermost.message and "\\n" not in innermost.message


def test_a_wrapper_without_an_exception_type_still_gives_its_payload():
    line = "ERROR 05-02 10:22:18 [multiproc_executor.py:9] " + WRAP.format(
        "Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has "
        "compute capability 7.5.")
    report = explain_text(HEADS + line + "\n")
    assert report.exit_code("error") == 1
    assert report.extra["family"] == "model_dtype_gpu"


def test_a_healthy_log_has_no_evidence_and_exits_0():
    report = explain_log(str(FIXTURES / "logs" / "healthy_startup_14452.log"))
    assert report.exit_code("error") == 0 and report.extra["failure_evidence"] == []


def test_uphold_adds_the_failure_finding_only_when_evidence_has_none():
    healthy = Report(command="explain", findings=(), facts={}, dry_run=None, notes=(), extra={})
    line = FailureEvidence(3, "error level", "the engine died", level="ERROR")
    made = Finding(rule_id="KVD399", severity="error", title="failed", cause="the engine died")
    assert uphold(healthy, (), lambda e: made).exit_code("error") == 0
    upheld = uphold(healthy, (line,), lambda e: made)
    assert upheld.findings == (made,) and upheld.extra["failure_evidence"][0]["line"] == 3
    failing = Report(command="explain", findings=(made,), facts={}, dry_run=None, notes=(), extra={})
    assert uphold(failing, (line,), lambda e: 1 / 0).findings == (made,)


def _fixture_logs() -> list[Path]:
    real = FIXTURES / "logs_real"
    entries = load_yaml((real / "index.yaml").read_text())
    return sorted(FIXTURES.glob("logs/*.log")) + [real / e["file"] for e in entries]


@pytest.mark.parametrize("path", _fixture_logs(), ids=lambda p: p.name)
def test_exit_1_exactly_when_the_log_shows_failure_evidence(path):
    report = explain_log(str(path))
    assert report.exit_code("error") == (1 if report.extra["failure_evidence"] else 0)


def test_evidence_is_one_entry_per_line_in_log_order():
    lines = normalise("ERROR 05-02 10:22:18 [a.py:1] boom\nValueError: boom\nERROR 05-02 10:22:18 [a.py:1] boom\n")
    evidence = failure_evidence(lines, parse_chains(lines))
    assert [e.line for e in evidence] == [1, 2, 3]


@pytest.mark.parametrize("line", [
    "/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py:63: FutureWarning: The pynvml package is deprecated.",
    "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.02s/it]",
    'INFO:     10.0.0.7:4711 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "WARNING 05-02 10:22:18 [config.py:1] Falling back to the V0 engine: the error above is not fatal",
    "INFO 05-02 10:22:18 [core.py:1] Retrying after a RuntimeError: Worker failed to start, attempt 2",
    'INFO:     10.0.0.7:4711 - "GET /metrics HTTP/1.1" 404 Not Found',
    "INFO 05-02 10:22:18 [multiproc.py:9] Worker proc VllmWorker-0 exited with code 0",
])
def test_lines_that_are_no_failure_keep_a_healthy_log_at_exit_0(line):
    report = explain_text(HEADS + line + "\n")
    assert report.exit_code("error") == 0 and report.extra["failure_evidence"] == [], line
