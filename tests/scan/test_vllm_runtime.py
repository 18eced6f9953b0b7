"""production-stack's VLLMRuntime (scan/vllm_runtime.py): the operator's `vllm serve` arguments from the spec, in its
order, each on its field's line (batch s65, vfarcic/crossplane-inference examples/vllm-qwen.yaml)."""

from __future__ import annotations

from scan_support import scan, write_tree

from kvdoctor.scan.run import read_manifests

RUNTIME = """\
apiVersion: production-stack.vllm.ai/v1alpha1
kind: VLLMRuntime
metadata:
  name: vllm-qwen
spec:
  model:
    modelURL: Qwen/Qwen2.5-1.5B-Instruct
    maxModelLen: 4096
    dtype: auto
  vllmConfig:
    enableChunkedPrefill: true
    gpuMemoryUtilization: "0.9"
    tensorParallelSize: 2
    extraArgs: ["--swap-space", "4"]
  deploymentConfig:
    image:
      registry: docker.io
      name: vllm/vllm-openai:v0.25.1
    resources:
      gpu: "1"
"""


def test_a_vllm_runtime_is_the_operators_command_on_its_fields_lines(tmp_path):
    root = write_tree(tmp_path / "repo", {"runtime.yaml": RUNTIME})
    (runtime,) = read_manifests([str(root)])[1]
    assert (runtime.kind, runtime.name, runtime.container, runtime.image, runtime.gpu_limit) == (
        "VLLMRuntime", "vllm-qwen", "vllm", "docker.io/vllm/vllm-openai:v0.25.1", 1)
    words = [t.text for t in runtime.argv]
    assert words[:5] == ["Qwen/Qwen2.5-1.5B-Instruct", "--host", "0.0.0.0", "--port", "8000"]
    assert "--enable-chunked-prefill" in words and "--no-enable-prefix-caching" in words  # the operator writes both
    assert words[-2:] == ["--swap-space", "4"]
    (result,) = scan([str(root)], tmp_path, gpu="H100").workloads
    placed = {p.finding.rule_id: p.location.line for p in result.placed if p.finding.status == "fired"}
    assert placed["KVD004"] == 14  # extraArgs' --swap-space, gone from 0.25.1
    assert "KVD201" in placed  # tensorParallelSize 2 on the one GPU it asks for
