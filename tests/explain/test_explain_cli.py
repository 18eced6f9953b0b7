"""`kvdoctor explain` end to end: formats, exit codes, stdin, and speed on a large noisy log."""

from __future__ import annotations

import time
from pathlib import Path

from conftest import assert_valid_report

from kvdoctor.explain.explain import explain_log

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"


def test_json_report_validates_and_carries_the_explanation(run_cli, report_schema):
    result = run_cli("explain", str(LOGS / "founding_interleaved.log"), "--format", "json")
    assert result.code == 1, result.stderr
    document = result.json()
    assert_valid_report(document, report_schema)
    assert document["command"] == "explain" and document["verdict"] == "FAIL"
    assert document["explain"]["primary"]["rule_id"] == "KVD101"
    # the run's own command as vLLM's non-default args record gives it, every flag it was given
    assert document["explain"]["check_command"].startswith("kvdoctor check --vllm-version 0.25.0 -- vllm serve "
                                                           "Qwen/Qwen2.5-3B-Instruct --kv-cache-dtype turboquant_k8v4")


def test_text_report_names_primary_and_wrapper(run_cli):
    result = run_cli("explain", str(LOGS / "founding_auto_only_0251.log"), env={"COLUMNS": "400"})
    assert result.code == 1
    assert "KVD102" in result.stdout and "PRIMARY" in result.stdout
    assert "hiding underneath" in result.stdout
    assert ("kvdoctor check --gpu 'A100 80GB' --vllm-version 0.25.1 -- vllm serve Qwen/Qwen2.5-3B-Instruct "
            "--kv-cache-dtype turboquant_k8v4") in " ".join(result.stdout.split())


def test_stdin_and_exit_zero_for_a_healthy_log(run_cli):
    result = run_cli("explain", "-", stdin=(LOGS / "healthy_startup_14452.log").read_text(), env={"COLUMNS": "400"})
    assert result.code == 0, result.stdout + result.stderr
    assert "No failure found" in result.stdout


def test_unknown_failure_shows_innermost_exception(run_cli):
    result = run_cli("explain", str(LOGS / "unknown_kvcached_205.log"), "--format", "json")
    assert result.code == 1
    primary = result.json()["explain"]["primary"]
    assert primary["rule_id"] == "KVD399"
    assert primary["exception_type"] == "ValueError"
    assert "Unsupported kv cache shape" in primary["message"]
    assert primary["where"].endswith("interfaces.py:118 in alloc_kv_cache")


def test_input_errors_exit_2_on_one_line(run_cli, tmp_path):
    for args in (("explain", str(tmp_path / "nope.log")), ("explain", str(tmp_path)), ("explain", "-")):
        result = run_cli(*args, stdin="")
        assert result.code == 2, args
        assert result.stderr.startswith("kvdoctor: error:") and result.stderr.count("\n") == 1
        assert "Traceback" not in result.stderr


def test_five_megabytes_of_noise_before_the_error(tmp_path):
    noise = (
        "(APIServer pid=1) INFO 05-20 14:02:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
        "Avg generation throughput: 12.{s} tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.1%\n"
    )
    block = "".join(noise.format(s=i % 60) for i in range(600))
    failure = (LOGS / "founding_interleaved.log").read_text()
    text = failure.split("\n", 9)
    body = "\n".join(text[:9]) + "\n" + block * 42 + text[9]
    assert len(body) > 5_000_000
    path = tmp_path / "big.log"
    path.write_text(body)
    start = time.process_time()  # CPU time: the suite shares 2 cores with compiler children
    report = explain_log(str(path))
    elapsed = time.process_time() - start
    assert report.extra["primary"]["rule_id"] == "KVD101"
    assert elapsed < 1.5, elapsed
