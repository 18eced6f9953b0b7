"""One workload never hides the others: a kvdoctor bug while judging one is that workload's error (exit 3, said as
kvdoctor's bug, not the user's input), the rest are judged; and a model name the hub refuses is an input problem of
its workload (a real Compose file wrote 'HuggingFaceAdı/ModelAdı': it aborted the whole scan)."""

from __future__ import annotations

from pathlib import Path

from kvdoctor.check.run import CheckSettings
from kvdoctor.scan import run as scan_run
from kvdoctor.scan.judge import ScanDefaults

COMPOSE = """services:
  first:
    image: vllm/vllm-openai:v0.25.1
    command: ["--model", "{first}", "--max-model-len", "4096"]
  second:
    image: vllm/vllm-openai:v0.25.1
    command: ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "4096"]
"""


def _scan(tmp_path, first: str, **kwargs):
    path = tmp_path / "compose.yaml"
    path.write_text(COMPOSE.format(first=first))
    defaults = ScanDefaults(gpu="A100", offline=True, cache_dir=tmp_path / "cache")
    return scan_run.run_scan([str(path)], defaults, CheckSettings(compile=False), **kwargs)


def test_a_bug_in_one_workload_is_its_error_and_the_others_are_judged(tmp_path, monkeypatch):
    real = scan_run.judge

    def judge(workload, defaults, settings):
        if workload.name == "first":
            raise ZeroDivisionError("division by zero")
        return real(workload, defaults, settings)

    monkeypatch.setattr(scan_run, "judge", judge)
    report = _scan(tmp_path, "m")
    first, second = report.workloads
    assert first.internal and "kvdoctor internal error: ZeroDivisionError" in first.error
    assert second.report is not None and second.error is None
    assert report.exit_code("error") == 3
    import json

    import jsonschema

    from kvdoctor.report.scan.json import render

    schema = Path(__file__).resolve().parents[2] / "kvdoctor" / "schemas" / "scan.schema.json"
    jsonschema.validate(json.loads(render(report)), json.loads(schema.read_text()))


def test_with_debug_the_bug_is_raised_for_its_traceback(tmp_path, monkeypatch):
    monkeypatch.setattr(scan_run, "judge", lambda *a: 1 / 0)
    try:
        _scan(tmp_path, "m", debug=True)
    except ZeroDivisionError:
        return
    raise AssertionError("not raised")


def test_a_model_name_the_hub_refuses_is_that_workloads_input_problem(tmp_path):
    report = _scan(tmp_path, "HuggingFaceAdı/ModelAdı")
    first, second = report.workloads
    assert not first.internal and second.report is not None
    assert report.exit_code("error") != 3
