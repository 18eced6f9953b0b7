"""Issue 26: `kvdoctor scan` and `verify` share the report format. verify's JSON is scan's envelope (verdict, counts,
a list of checked targets each with findings, verdict and exit code) beside its own 1.0 fields; real verify output
(the CPU server fixture) validates against verify.schema.json and envelope.schema.json, real scan output against
scan.schema.json and envelope.schema.json."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from kvdoctor.report.verify.json import render
from kvdoctor.verify.checked import from_facts
from kvdoctor.verify.compare import compare
from kvdoctor.verify.result import VerifyReport
from .verify_support import REPO, h200_server, kvdoctor

SCHEMAS = REPO / "kvdoctor" / "schemas"


def _schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


def _validate(document: dict, *names: str) -> None:
    for name in names:
        jsonschema.validate(document, _schema(name))


def to_dict(report: VerifyReport) -> dict:
    """The JSON exactly as written (tuples become lists)."""
    return json.loads(render(report))


def _report(facts: dict, fail_on: str = "error") -> VerifyReport:
    checked = from_facts(facts, "check report check.json", "PASS")
    server = h200_server()
    return VerifyReport(server.url, server, checked, compare(checked, server), (), fail_on=fail_on)


MATCHING = {"vllm.version": "0.25.1", "serve.kv_cache_dtype": "fp8", "serve.max_model_len": 512,
            "serve.argv": ["--max-model-len", "512"]}  # fmt: skip


def test_a_match_is_one_passing_target_with_no_findings():
    document = to_dict(_report(MATCHING))
    _validate(document, "verify", "envelope")
    assert document["counts"] == {"PASS": 1, "WARN": 0, "FAIL": 0, "ERROR": 0}
    (target,) = document["targets"]
    assert target["verdict"] == "PASS" and target["exit_code"] == 0 and target["findings"] == []
    assert target["url"] == document["url"] == "http://h200:8011"


def test_a_mismatch_is_a_fired_finding_placed_where_each_value_was_read():
    document = to_dict(_report(MATCHING | {"serve.kv_cache_dtype": "turboquant_k8v4"}))
    _validate(document, "verify", "envelope")
    (target,) = document["targets"]
    assert document["verdict"] == target["verdict"] == "FAIL" and target["exit_code"] == 1
    assert document["counts"]["FAIL"] == 1
    (finding,) = target["findings"]
    assert finding["rule_id"] == "verify.kv_cache_dtype" and finding["status"] == "fired" and finding["gates"]
    assert finding["location"] == {"file": "GET /metrics vllm:cache_config_info{cache_dtype}", "line": None, "value": "fp8"}
    assert finding["related"][0]["value"] == "turboquant_k8v4" and "serve.kv_cache_dtype" in finding["related"][0]["file"]
    # 1.0's fields stay for tools that read them
    assert {c["field"]: c["status"] for c in document["comparisons"]}["kv_cache_dtype"] == "mismatch"
    assert document["checked"] == {"source": "check report check.json", "verdict": "PASS"}


@pytest.mark.parametrize("fail_on,code,gates", [("error", 0, False), ("undecided", 1, True), ("never", 0, False)])
def test_an_unknown_field_is_undecided_and_its_exit_code_follows_fail_on(fail_on, code, gates):
    document = to_dict(_report(MATCHING | {"vllm.version": None}, fail_on))
    _validate(document, "verify", "envelope")
    (target,) = document["targets"]
    assert target["verdict"] == "WARN" and target["exit_code"] == code and target["fail_on"] == fail_on
    (finding,) = target["findings"]
    assert (finding["rule_id"], finding["status"], finding["severity"]) == ("verify.vllm_version", "undecided", "warning")
    assert finding["gates"] is gates


def test_the_envelope_refuses_what_it_promises_is_there():
    document = to_dict(_report(MATCHING))
    for broken in ({k: v for k, v in document.items() if k != "targets"},
                   document | {"targets": [{"verdict": "PASS"}]},
                   document | {"counts": {"PASS": 1}}):  # fmt: skip
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, _schema("envelope"))


def test_real_scan_output_is_the_same_envelope(tmp_path):
    done = kvdoctor("scan", str(REPO / "tests" / "fixtures" / "manifests" / "acceptance"), "--gpu", "A100",
                    "--no-compile", "--format", "json", cwd=tmp_path)  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    document = json.loads(done.stdout)
    _validate(document, "scan", "envelope")
    assert document["workloads"] and all(w["findings"] is not None for w in document["workloads"])


def test_real_verify_output_validates_pass_and_fail(plain_server, keyed_server, check_report, tmp_path):
    report = check_report(*plain_server.flags)
    done = kvdoctor("verify", plain_server.url, "--report", str(report), "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    passing = json.loads(done.stdout)
    _validate(passing, "verify", "envelope")
    assert passing["targets"][0]["verdict"] == "PASS" and passing["targets"][0]["exit_code"] == 0
    key = tmp_path / "key"
    key.write_text(keyed_server.api_key + "\n")
    done = kvdoctor("verify", keyed_server.url, "--report", str(report), "--api-key-file", str(key), "--format", "json",
                    cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    failing = json.loads(done.stdout)
    _validate(failing, "verify", "envelope")
    (target,) = failing["targets"]
    assert target["exit_code"] == done.returncode == 1
    fired = {f["rule_id"] for f in target["findings"] if f["status"] == "fired"}
    assert {"verify.kv_cache_dtype", "verify.block_size", "verify.max_model_len"} <= fired
    assert key.read_text().strip() not in done.stdout  # the key never appears
