"""OME's serving runtimes (scan/ome_runtimes.py): spec.engineConfig.runner read as the container of the pod OME creates
(batch s69, sgl-project/ome config/runtimes/vllm)."""

from __future__ import annotations

from scan_support import scan, write_tree

from kvdoctor.scan.run import read_manifests

RUNTIME = """\
apiVersion: ome.io/v1beta1
kind: ClusterServingRuntime
metadata:
  name: vllm-llama-3-3-70b-instruct
spec:
  engineConfig:
    runner:
      name: ome-container
      image: docker.io/vllm/vllm-openai:v0.25.1
      command: [python3, -m, vllm.entrypoints.openai.api_server, --port, "8080", --model, $(MODEL_PATH),
                --tensor-parallel-size, "4", --swap-space, "4"]
      resources:
        limits: {nvidia.com/gpu: 2}
"""


def test_an_ome_runtimes_runner_is_the_pods_container(tmp_path):
    root = write_tree(tmp_path / "repo", {"rt.yaml": RUNTIME})
    (runtime,) = read_manifests([str(root)])[1]
    assert (runtime.kind, runtime.name, runtime.container, runtime.gpu_limit) == (
        "ClusterServingRuntime", "vllm-llama-3-3-70b-instruct", "ome-container", 2)
    (result,) = scan([str(root)], tmp_path, gpu="H100").workloads
    fired = {p.finding.rule_id: p.location.line for p in result.placed if p.finding.status == "fired"}
    assert fired["KVD004"] == 11 and "KVD201" in fired  # --swap-space gone from 0.25.1; TP 4 on 2 GPUs


def test_a_runtime_of_another_group_is_not_read_as_omes(tmp_path):
    other = RUNTIME.replace("ome.io/v1beta1", "example.com/v1")
    assert read_manifests([str(write_tree(tmp_path / "repo", {"rt.yaml": other}))])[1] == []
