"""Kinds whose controller names each role's Deployment after the role (kubernetes.ROLE_NAMED_KINDS)."""

from __future__ import annotations

from kvdoctor.scan.run import find_workloads

MODEL_SERVICE = """\
apiVersion: llm-d.ai/v1alpha1
kind: ModelService
metadata:
  name: llama-3-2-1b
spec:
  routing:
    modelName: meta-llama/Llama-3.2-1B-Instruct
  decode:
    replicas: 1
    containers:
    - name: vllm
      image: ghcr.io/llm-d/llm-d:0.0.8
      command: [vllm]
      args: [serve, meta-llama/Llama-3.2-1B-Instruct, --port, "8200"]
  prefill:
    replicas: 1
    containers:
    - name: vllm
      image: ghcr.io/llm-d/llm-d:0.0.8
      command: [vllm]
      args: [serve, meta-llama/Llama-3.2-1B-Instruct, --port, "8000"]
"""


def test_an_llm_d_model_service_names_each_roles_deployment_name_role(tmp_path):
    path = tmp_path / "msvc.yaml"
    path.write_text(MODEL_SERVICE)
    found = find_workloads([str(path)])[1]
    assert sorted((w.name, w.container) for w in found) == [("llama-3-2-1b-decode", "vllm"),
                                                            ("llama-3-2-1b-prefill", "vllm")]
    other = tmp_path / "other.yaml"  # another kind with the same layout keeps the object's name
    other.write_text(MODEL_SERVICE.replace("kind: ModelService", "kind: InferenceStack"))
    assert {w.name for w in find_workloads([str(other)])[1]} == {"llama-3-2-1b"}
