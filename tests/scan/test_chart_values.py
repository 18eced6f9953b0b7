"""A chart's raw values whose chart is not scanned (scan/chart_values.py): the container they describe is read;
with the chart beside them, only its render is."""

from __future__ import annotations

from scan_support import by_name, finding, scan, write_tree

VALUES = """# values of our own chart (the chart lives in another repository)
fullnameOverride: qwen-server
image:
  repository: vllm/vllm-openai
  tag: v0.25.1
args:
  - --model
  - Qwen/Qwen3-4B
  - --max-model-len
  - "8192"
extraArgs: "--enable-prefix-caching --not-a-vllm-flag"
env:
  HF_HOME: /models
resources:
  limits:
    nvidia.com/gpu: 1
"""


def test_values_of_a_chart_not_scanned_are_read_as_its_container(tmp_path):
    root = write_tree(tmp_path / "deploy", {"values-prod.yaml": VALUES})
    served = by_name(scan([str(root / "values-prod.yaml")], tmp_path))
    result = served["qwen-server"]
    workload = result.workload
    assert workload.kind == "Helm values (chart not scanned)"
    assert workload.image == "vllm/vllm-openai:v0.25.1"
    assert [t.text for t in workload.argv][-6:] == ["--model", "Qwen/Qwen3-4B", "--max-model-len", "8192",
                                                    "--enable-prefix-caching", "--not-a-vllm-flag"]
    assert ("HF_HOME", "/models") in [(e.name, e.value) for e in workload.env]
    assert workload.gpu_limit is None  # the templates decide a pod's GPUs (and a group's pods)
    refused = finding(result, "KVD004")
    assert refused.finding.status == "fired" and "--not-a-vllm-flag" in refused.finding.title
    assert refused.location.line == VALUES.splitlines().index(next(l for l in VALUES.splitlines()
                                                                   if l.startswith("extraArgs"))) + 1
    assert any("chart is not in the scanned files" in note for note in workload.notes)


def test_a_server_nested_under_a_key_and_a_command_of_options(tmp_path):
    """`vllm: {image, command: [--model ...]}`: options under `command` are the entrypoint's arguments (a container
    whose command is an option never runs, so the template must put them after it), not KVD211."""
    text = """global:
  storageClass: fast
vllm:
  image: vllm/vllm-openai:v0.25.1
  command: ["--model", "Qwen/Qwen3-4B", "--kv-cache-dtype", "fp8"]
ui:
  image: ghcr.io/open-webui/open-webui:main
"""
    root = write_tree(tmp_path / "deploy", {"values.yaml": text})
    served = by_name(scan([str(root / "values.yaml")], tmp_path))
    assert set(served) == {"vllm"}
    result = served["vllm"]
    assert result.workload.execs_option is None
    assert not any(p.finding.rule_id == "KVD211" and p.finding.status == "fired" for p in result.placed)
    assert "--kv-cache-dtype" in [t.text for t in result.workload.argv]


def test_values_beside_their_chart_are_rendered_not_read_raw(tmp_path):
    root = write_tree(tmp_path / "repo", {
        "chart/Chart.yaml": "apiVersion: v2\nname: chart\nversion: 0.1.0\n",
        "chart/values.yaml": "image:\n  repository: vllm/vllm-openai\n  tag: v0.25.1\nargs: [--model, Qwen/Qwen3-4B]\n",
        "chart/templates/deploy.yaml": """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  template:
    spec:
      containers:
      - name: server
        image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"
        args: {{ toJson .Values.args }}
"""})
    report = scan([str(root)], tmp_path)
    assert [(r.workload.kind, r.workload.container) for r in report.workloads] == [("Deployment", "server")]


def test_values_without_a_vllm_image_or_arguments_are_not_a_workload(tmp_path):
    root = write_tree(tmp_path / "deploy", {
        "a.yaml": "image:\n  repository: vllm/vllm-openai\n  tag: v0.25.1\nreplicaCount: 2\n",
        "b.yaml": "image: nginx:1.27\nargs: [--model, Qwen/Qwen3-4B]\n",
        # arguments that name no model, and no values key that does: the chart's templates decide it (never vLLM's
        # default model): named unread
        "c.yaml": "image: vllm/vllm-openai:v0.25.1\nargs: [--max-model-len, '8192']\n"})
    report = scan([str(root / name) for name in ("a.yaml", "b.yaml", "c.yaml")], tmp_path)
    assert not report.workloads
    assert any("c.yaml" in note and "a chart's raw values" in note for note in report.notes)


def test_the_model_a_values_key_names_when_the_arguments_name_none(tmp_path):
    text = "model:\n  name: hf://Qwen/Qwen3-4B\nimage: {repository: vllm/vllm-openai, tag: v0.25.1}\nextraArgs: [--enforce-eager]\n"
    root = write_tree(tmp_path / "llm", {"values.yaml": text})
    (result,) = scan([str(root / "values.yaml")], tmp_path).workloads
    assert [(t.text, t.line) for t in result.workload.argv] == [("Qwen/Qwen3-4B", 2), ("--enforce-eager", 4)]
    assert result.workload.name == "llm"


def test_values_keys_named_for_vllms_options_are_its_flags(tmp_path):
    """`maxModelLen: 8192` is --max-model-len 8192 (a chart's templates turn such keys into flags); a switch set
    false is left out, keys that are no vLLM option (replicaCount) or no setting (port) are not flags."""
    text = ("image:\n  repository: vllm/vllm-openai\n  tag: v0.25.1\nmodel: Qwen/Qwen2.5-7B-Instruct\n"
            "maxModelLen: 32768\ngpu_memory_utilization: 0.92\nenforceEager: true\nenablePrefixCaching: false\n"
            "port: 8000\nreplicaCount: 1\n")
    root = write_tree(tmp_path / "qwen", {"values.yaml": text})
    (result,) = scan([str(root / "values.yaml")], tmp_path).workloads
    assert [t.text for t in result.workload.argv] == ["Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "32768",
                                                      "--gpu-memory-utilization", "0.92", "--enforce-eager"]
    # one option-like key is any chart's: not read as vLLM's
    root = write_tree(tmp_path / "one", {"values.yaml": "image: vllm/vllm-openai:v0.25.1\nmodel: Qwen/Qwen3-4B\ndtype: auto\n"})
    assert not scan([str(root / "values.yaml")], tmp_path).workloads
