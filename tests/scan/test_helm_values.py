"""Helm values of the vLLM production-stack chart: one workload per enabled modelSpec entry."""

from __future__ import annotations

from scan_support import by_name, finding, line_of, rel, scan

VALUES = "production-stack-values.yaml"


def test_model_spec_becomes_a_workload_with_the_charts_argv(tmp_path):
    result = by_name(scan([rel(VALUES)], tmp_path, gpu=None))
    assert sorted(result) == ["qwen-a100"]  # enabled: false is not deployed by the chart
    spec = result["qwen-a100"]
    assert spec.workload.platform == "helm" and spec.workload.title == "modelSpec qwen-a100"
    facts = spec.report.facts
    assert facts["vllm.version"] == "0.25.1"  # repository + tag
    assert facts["gpu.name"] == "A100 80GB"  # nodeSelectorTerms
    assert facts["serve.kv_cache_dtype"] == "turboquant_4bit_nc"  # vllmConfig.extraArgs
    assert facts["serve.max_model_len"] == 8192 and facts["serve.dtype"] == "bfloat16"
    assert spec.sources["serve.kv_cache_dtype"].line == line_of(VALUES, "extraArgs")
    assert spec.sources["serve.tensor_parallel_size"].line == line_of(VALUES, "tensorParallelSize: 2")
    assert spec.sources["vllm."].line == line_of(VALUES, 'tag: "v0.25.1"')


def test_request_gpu_against_tensor_parallel_size(tmp_path):
    spec = by_name(scan([rel(VALUES)], tmp_path, gpu=None))["qwen-a100"]
    short = finding(spec, "KVD201")
    assert short.location.line == line_of(VALUES, "requestGPU: 1")
    assert short.finding.fixes[0].title == "Give the workload 2 GPUs (modelSpec.requestGPU)"


def test_secret_sourced_env_that_rules_read_is_a_warning_at_its_line(tmp_path):
    spec = by_name(scan([rel(VALUES)], tmp_path, gpu=None))["qwen-a100"]
    unknown = finding(spec, "KVD203")
    assert unknown.finding.severity == "warning"
    assert "VLLM_ATTENTION_BACKEND comes from Secret 'vllm-tuning' key 'backend'" in unknown.finding.title
    assert unknown.location.line == line_of(VALUES, "- name: VLLM_ATTENTION_BACKEND")
