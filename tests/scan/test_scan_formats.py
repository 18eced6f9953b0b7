"""The scan formats: GitHub annotations with file and line, a JUnit case per workload, Markdown, text."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from scan_support import line_of, rel, scan

from kvdoctor.report.registry import SCAN

available_scan_formats, scan_renderer = SCAN.available, SCAN.renderer

K8S = "acceptance/vllm-k8s.yaml"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return scan([rel("acceptance"), rel("production-stack-values.yaml")], tmp_path_factory.mktemp("fmt"))


def test_every_check_format_but_prometheus_exists_for_scan():
    assert available_scan_formats() == ["github", "json", "junit", "markdown", "sarif", "text"]


def test_github_annotations_carry_file_and_line(report):
    text = scan_renderer("github")(report)
    k8v4 = line_of(K8S, "--kv-cache-dtype")
    assert f"::error file={rel(K8S)},line={k8v4},title=KVD101 " in text
    assert f"::error file={rel('production-stack-values.yaml')},line={line_of('production-stack-values.yaml', 'requestGPU: 1')},title=KVD201 " in text
    assert text.rstrip().splitlines()[-1].startswith("::error title=kvdoctor scan FAIL::4 vLLM workloads in 3 files")
    assert "qwen-h100" not in text  # a passing workload annotates nothing


def test_junit_has_one_case_per_workload(report):
    root = ET.fromstring(scan_renderer("junit")(report))
    cases = root.findall(".//testcase")
    assert [c.get("name") for c in cases] == [
        "service vllm", "Deployment/qwen-a100 (container vllm)", "Deployment/qwen-h100 (container vllm)",
        "modelSpec qwen-a100",
    ]  # fmt: skip
    failed = {c.get("name") for c in cases if c.find("failure") is not None}
    assert failed == {"service vllm", "Deployment/qwen-a100 (container vllm)", "modelSpec qwen-a100"}
    suite = root.find("testsuite")
    assert suite.get("tests") == "4" and suite.get("failures") == "3"
    a100 = next(c for c in cases if c.get("name").startswith("Deployment/qwen-a100"))
    assert f"{rel(K8S)}:{line_of(K8S, '--kv-cache-dtype')}: error KVD101" in a100.find("failure").text


def test_markdown_lists_workloads_and_finding_lines(report):
    text = scan_renderer("markdown")(report)
    assert text.startswith("### ❌ kvdoctor scan: **FAIL**")
    assert "| ✅ PASS | Deployment/qwen-h100 (container vllm) |" in text
    assert f"`KVD101` at `{rel(K8S)}:{line_of(K8S, '--kv-cache-dtype')}`" in text


def test_text_shows_each_finding_at_its_line(report):
    text = scan_renderer("text")(report)
    assert text.startswith("FAIL  kvdoctor scan: 4 vLLM workloads in 3 files: 3 FAIL, 1 PASS")
    assert f"KVD101 {rel(K8S)}:{line_of(K8S, '--kv-cache-dtype')}" in text
    assert "--kv-cache-dtype turboquant_k8v4" in text


def test_sarif_carries_related_locations_and_stable_fingerprints(report):
    import json

    log = json.loads(scan_renderer("sarif")(report))
    result = next(r for r in log["runs"][0]["results"] if r["ruleId"] == "KVD101")
    related = {r["physicalLocation"]["region"]["startLine"] for r in result["relatedLocations"]}
    assert line_of(K8S, "image: vllm/vllm-openai:v0.25.1") in related
    fingerprints = [r["partialFingerprints"]["kvdoctorWorkload/v1"] for r in log["runs"][0]["results"]]
    assert len(fingerprints) == len(set(fingerprints))
