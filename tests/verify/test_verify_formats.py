"""Every verify format renders (through the shared builders), a mismatch shows in each, no header value in any."""

from __future__ import annotations

import importlib
import json
import xml.etree.ElementTree as ET

import pytest

from kvdoctor.report.registry import VERIFY
from kvdoctor.verify.checked import from_facts
from kvdoctor.verify.compare import compare
from kvdoctor.verify.credentials import read_credentials
from kvdoctor.verify.result import VerifyReport
from .verify_support import h200_server as _h200_server

SECRET = "sk-very-secret-0123456789"


def _report(kv: str) -> VerifyReport:
    facts = {"vllm.version": "0.25.1", "serve.kv_cache_dtype": kv, "serve.max_model_len": 512,
             "serve.argv": ["--max-model-len", "512"]}  # fmt: skip
    checked = from_facts(facts, "check report check.json", "PASS")
    server = _h200_server()
    credentials = read_credentials(None, "KEY", ["X-Team: $TEAM"], {"KEY": SECRET, "TEAM": SECRET + "-team"})
    return VerifyReport(server.url, server, checked, compare(checked, server), credentials.described)


@pytest.mark.parametrize("name", VERIFY.available())
def test_each_format_says_the_mismatch_and_no_secret(name):
    text = VERIFY.renderer(name)(_report("turboquant_k8v4"), verbose=True)
    assert "turboquant_k8v4" in text and "fp8" in text
    assert SECRET not in text
    if name == "json":
        assert json.loads(text)["verdict"] == "FAIL"
    if name == "junit":
        suite = ET.fromstring(text).find("testsuite")
        assert suite.get("failures") == "1" and suite.get("tests") == "9"


def test_a_match_is_pass_everywhere():
    report = _report("fp8")
    assert report.verdict == "PASS" and report.exit_code("error") == 0
    assert VERIFY.renderer("github")(report).strip() == "::notice title=kvdoctor verify PASS::" + report.summary_line()
    assert VERIFY.renderer("markdown")(report).startswith("### ✅ kvdoctor verify: **PASS**")


def test_the_terminal_format_prints():
    assert VERIFY.terminal in VERIFY.available()
    assert callable(importlib.import_module(f"{VERIFY.package}.{VERIFY.terminal}").print_console)


def test_an_unknown_field_is_undecided_and_fail_on_undecided_gates_it():
    from kvdoctor.commands._run import gate_exit_code

    facts = {"vllm.version": None, "serve.kv_cache_dtype": "fp8", "serve.max_model_len": 512,
             "serve.argv": ["--max-model-len", "512"]}  # fmt: skip
    checked = from_facts(facts, "check report check.json", "PASS")
    server = _h200_server()
    report = VerifyReport(server.url, server, checked, compare(checked, server), ())
    assert report.verdict == "WARN"
    assert [gate_exit_code(report, f) for f in ("never", "error", "undecided", "warning")] == [0, 0, 1, 1]
