"""Stop 49 (issue 27), batches s99-s100's shapes: a Compose GPU reservation whose one device_ids item lists several
GPUs (`device_ids: ["5,6"]`): Docker joins the ids with commas into NVIDIA_VISIBLE_DEVICES (moby
daemon/nvidia_linux.go, setNvidiaGPUs), so the container sees both."""

from __future__ import annotations

from scan_support import scan

COMPOSE = """\
services:
  vllm:
    image: vllm/vllm-openai:v0.25.1
    command: >
      --model Qwen/Qwen2.5-3B-Instruct
      --tensor-parallel-size 2
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              device_ids: [{ids}]
              capabilities: [gpu]
"""


def _gpu_findings(tmp_path, ids: str):
    (tmp_path / "compose.yaml").write_text(COMPOSE.format(ids=ids))
    (result,) = scan([str(tmp_path / "compose.yaml")], tmp_path, gpu="H100").workloads
    return result, {p.finding.rule_id for p in result.placed if p.finding.status == "fired"}


def test_one_device_ids_item_listing_two_gpus_gives_two(tmp_path):
    result, fired = _gpu_findings(tmp_path, '"5,6"')
    assert result.workload.gpu_limit == 2
    assert "KVD201" not in fired  # TP 2 on the two GPUs: no shortfall


def test_one_gpu_id_is_still_one(tmp_path):
    result, fired = _gpu_findings(tmp_path, '"5"')
    assert result.workload.gpu_limit == 1
    assert "KVD201" in fired  # TP 2 on one GPU: vLLM cannot start


UNIT = """\
[Service]
ExecStart=/srv/vllm/.venv/bin/python \\
  -m vllm serve Qwen/Qwen2.5-3B-Instruct \\
  --max-model-len 4096
"""
POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: vllm
spec:
  containers:
  - name: vllm
    image: vllm/vllm-openai:v0.25.1
    command:
    - python3
    - -m
    - {module}
    args: ["--model", "Qwen/Qwen2.5-3B-Instruct"]
"""


def _fired(tmp_path, name: str, text: str) -> set[str]:
    (tmp_path / name).write_text(text)
    (result,) = scan([str(tmp_path / name)], tmp_path, gpu="H100").workloads
    return {p.finding.rule_id for p in result.placed if p.finding.status == "fired"}


def test_a_unit_running_the_vllm_package_as_a_module_is_found_and_refused(tmp_path):
    assert "KVD214" in _fired(tmp_path, "vllm.service", UNIT)


def test_a_pod_running_the_vllm_package_as_a_module_is_refused(tmp_path):
    assert "KVD214" in _fired(tmp_path, "pod.yaml", POD.format(module="vllm\n    - serve"))


def test_vllms_own_modules_run(tmp_path):
    assert "KVD214" not in _fired(tmp_path, "pod.yaml", POD.format(module="vllm.entrypoints.openai.api_server"))
    assert "KVD214" not in _fired(tmp_path, "run.yaml", POD.format(module="vllm.entrypoints.cli.main\n    - serve"))
