"""llmaz Playgrounds whose backend is vLLM: the claimed OpenModel, backendRuntimeConfig and the flavor's GPU."""

from __future__ import annotations

from scan_support import scan

from kvdoctor.scan.run import find_workloads

PLAYGROUND = """\
apiVersion: llmaz.io/v1alpha1
kind: OpenModel
metadata:
  name: qwen
spec:
  familyName: qwen2
  source:
    modelHub:
      modelID: Qwen/Qwen2.5-7B-Instruct
  inferenceConfig:
    flavors:
      - name: a100
        limits:
          nvidia.com/gpu: 2
---
apiVersion: inference.llmaz.io/v1alpha1
kind: Playground
metadata:
  name: qwen-playground
spec:
  replicas: 1
  modelClaim:
    modelName: qwen
  backendRuntimeConfig:
    backendName: vllm
    version: v0.25.1
    args: ["--tensor-parallel-size", "4"]
    envs:
      - name: VLLM_ATTENTION_BACKEND
        value: FLASH_ATTN
"""


def _file(tmp_path, text: str = PLAYGROUND):
    path = tmp_path / "playground.yaml"
    path.write_text(text)
    return path


def test_a_vllm_playground_serves_its_claimed_open_model_with_its_args_and_envs(tmp_path):
    (play,) = find_workloads([str(_file(tmp_path))])[1]
    assert (play.kind, play.name, play.container, play.image) == ("Playground", "qwen-playground", "vllm",
                                                                  "vllm/vllm-openai:v0.25.1")  # fmt: skip
    assert [t.text for t in play.argv] == ["Qwen/Qwen2.5-7B-Instruct", "--tensor-parallel-size", "4"]
    assert play.argv[0].line == PLAYGROUND.splitlines().index("      modelID: Qwen/Qwen2.5-7B-Instruct") + 1
    assert [(e.name, e.value) for e in play.env] == [("VLLM_ATTENTION_BACKEND", "FLASH_ATTN")]


def test_the_flavors_gpu_and_count_are_read_and_compared(tmp_path):
    (play,) = scan([str(_file(tmp_path))], tmp_path, gpu=None).workloads
    assert play.report.facts["gpu.name"].startswith("A100") and play.report.facts["deploy.gpu_limit"] == 2
    assert any(p.finding.rule_id == "KVD201" and p.finding.status == "fired" for p in play.placed)  # 2 GPUs < TP 4


def test_another_backend_is_no_vllm_workload(tmp_path):
    sglang = PLAYGROUND.replace("backendName: vllm", "backendName: sglang")
    assert find_workloads([str(_file(tmp_path, sglang))])[1] == []


def test_without_a_version_the_backend_runtimes_release_decides_and_the_fix_says_so(tmp_path):
    unversioned = PLAYGROUND.replace("    version: v0.25.1\n", "")
    (play,) = scan([str(_file(tmp_path, unversioned))], tmp_path, gpu=None).workloads
    rules = {p.finding.rule_id for p in play.placed if p.finding.status == "fired"}
    assert "KVD217" in rules and "KVD204" not in rules
    assert play.verdict != "PASS"
