"""Shapes the seen half of manifest batch s37 showed (issue 27), each as a synthetic file: a script that builds its
argv with `set --` and runs `exec vllm "$@"`, a LeaderWorkerSet of one pod (its worker template never runs), and a
custom node label that names a GPU by a shortened name."""

from __future__ import annotations

import pytest
from scan_support import by_name, scan

from kvdoctor.data.gpus import gpu_for_node_label

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  template:
    spec:
{node_selector}      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.25.1
          command: ["/bin/bash", "-lc"]
          args:
            - |
{script}
          resources: {{limits: {{nvidia.com/gpu: "{gpus}"}}}}
"""


def _deployment(tmp_path, script: str, gpus: int = 1, name: str = "app", node_selector: str = ""):
    body = "\n".join("              " + line for line in script.strip().splitlines())
    path = tmp_path / f"{name}.yaml"
    path.write_text(DEPLOYMENT.format(name=name, script=body, gpus=gpus, node_selector=node_selector))
    return path


@pytest.mark.parametrize("launch", ['exec vllm "$@"', 'vllm "$@"', 'exec "$@"'])
def test_set_dash_dash_builds_the_argv_that_exec_runs(tmp_path, launch):
    argv_owner = "vllm serve" if launch == 'exec "$@"' else "serve"
    path = _deployment(tmp_path, f"""set -eu
set -- {argv_owner} Qwen/Qwen2.5-3B-Instruct --port 8000 --tensor-parallel-size 2
if [ -n "${{EXTRA:-}}" ]; then
  set -- "$@" --enable-prefix-caching
fi
{launch}""", gpus=2)
    result = by_name(scan([str(path)], tmp_path / "s", gpu="A100"))["app"]
    assert result.report is not None and result.error is None
    assert result.report.facts["serve.tensor_parallel_size"] == 2
    assert [t.text for t in result.workload.argv][:1] == ["Qwen/Qwen2.5-3B-Instruct"]


def test_set_dash_dash_with_too_few_gpus_is_an_error_at_the_flag(tmp_path):
    path = _deployment(tmp_path, 'set -- serve Qwen/Qwen2.5-3B-Instruct --tensor-parallel-size 4\nexec vllm "$@"')
    result = by_name(scan([str(path)], tmp_path / "s", gpu="A100"))["app"]
    assert "KVD201" in {p.finding.rule_id for p in result.placed if p.finding.status == "fired"}


LWS = """apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {{name: group}}
spec:
  leaderWorkerTemplate:
{size}    leaderTemplate:
      spec:
        containers:
          - name: leader
            image: vllm/vllm-openai:v0.25.1
            command: ["sh", "-c", "python3 -m vllm.entrypoints.openai.api_server --model Qwen/Qwen2.5-3B-Instruct"]
            resources: {{limits: {{nvidia.com/gpu: "1"}}}}
    workerTemplate:
      spec:
        containers:
          - name: worker
            image: vllm/vllm-openai:v0.25.1
            resources: {{limits: {{nvidia.com/gpu: "1"}}}}
"""


@pytest.mark.parametrize(("size", "containers"), [("", {"leader"}), ("    size: 1\n", {"leader"}),
                                                  ("    size: 2\n", {"leader", "worker"})])
def test_a_leaderworkerset_of_one_pod_runs_only_its_leader(tmp_path, size, containers):
    path = tmp_path / "lws.yaml"
    path.write_text(LWS.format(size=size))
    report = scan([str(path)], tmp_path / "s", gpu="A100")
    assert {r.workload.container for r in report.workloads} == containers


@pytest.mark.parametrize(("value", "name"), [
    ("nvidia-2080ti", "RTX 2080 Ti"), ("rtx-4090-24gb", "RTX 4090"), ("RTX-3090_24GB", "RTX 3090"),
    ("4090", "RTX 4090"), ("a100-80gb", "A100 80GB"),
    ("6000", None),  # Quadro RTX 6000, RTX A6000, RTX PRO 6000: several end so, none is chosen
    ("gpu", None), ("abc1", None),
])  # fmt: skip
def test_a_shortened_gpu_name_in_a_label_is_read_when_one_gpu_ends_so(value, name):
    device = gpu_for_node_label("nvidia.com/gpu.product", value)
    assert (device.name if device else None) == name


def test_a_custom_gpu_label_with_a_shortened_name_decides_the_gpu(tmp_path):
    path = _deployment(tmp_path, "vllm serve Qwen/Qwen2.5-3B-Instruct", node_selector="      nodeSelector: {gpu-type: nvidia-2080ti}\n")
    result = by_name(scan([str(path)], tmp_path / "s", gpu=None))["app"]
    assert result.report.facts["gpu.name"] == "RTX 2080 Ti"


def test_words_a_script_passes_only_when_a_variable_is_set_are_named_not_refused(tmp_path):
    """`${TOOL_CALL_PARSER:+--tool-call-parser "$TOOL_CALL_PARSER" --enable-auto-tool-choice}` under sh -c: passed
    only when the variable is set at run time (was read as one unrecognized argument, a false KVD004)."""
    path = _deployment(tmp_path, 'exec vllm serve Qwen/Qwen2.5-3B-Instruct --port 8000 \\\n'
                                 '  ${TOOL_CALL_PARSER:+--tool-call-parser "$TOOL_CALL_PARSER" --enable-auto-tool-choice}')
    result = by_name(scan([str(path)], tmp_path / "s", gpu="A100"))["app"]
    assert result.error is None
    assert not [p for p in result.placed if p.finding.status == "fired" and p.finding.severity == "error"]
    assert any("${TOOL_CALL_PARSER:+...}" in note for note in result.workload.notes)


CONFIG_DEPLOYMENT = """apiVersion: v1
kind: ConfigMap
metadata: {{name: vllm-config}}
data:
  config.yaml: |
    model: Qwen/Qwen2.5-3B-Instruct
    tensor-parallel-size: {tp}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: app}}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.25.1
          command: ["vllm", "serve", "--config", "/etc/vllm/config.yaml"]
          resources: {{limits: {{nvidia.com/gpu: "1"}}}}
          volumeMounts: [{{name: cfg, mountPath: /etc/vllm}}]
      volumes: [{{name: cfg, configMap: {{name: vllm-config}}}}]
"""


def test_a_config_file_a_scanned_configmap_holds_is_read(tmp_path):
    path = tmp_path / "d.yaml"
    path.write_text(CONFIG_DEPLOYMENT.format(tp=4))
    result = by_name(scan([str(path)], tmp_path / "s", gpu="A100"))["app"]
    assert result.error is None
    assert result.report.facts["serve.tensor_parallel_size"] == 4  # from the ConfigMap's file
    assert "KVD201" in {p.finding.rule_id for p in result.placed if p.finding.status == "fired"}  # 4 > 1 GPU
    assert any("read from ConfigMap 'vllm-config' key 'config.yaml'" in note for note in result.workload.notes)


def test_a_config_file_inside_the_container_is_named_and_its_model_is_unknown(tmp_path):
    path = tmp_path / "d.yaml"
    path.write_text(CONFIG_DEPLOYMENT.format(tp=1).split("---\n", 1)[1])  # the Deployment alone
    result = by_name(scan([str(path)], tmp_path / "s", gpu="A100"))["app"]
    assert result.error is None and result.report is not None  # was ERROR: "--config ...: file not found"
    assert any("a file inside the container" in note and "nor the model it names" in note
               for note in result.workload.notes)
    assert "Qwen3-0.6B" not in str(result.sources)  # the file may name the model: not vLLM's default one
