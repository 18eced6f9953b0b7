"""Batch s71 (stop 42): a pod that runs a script a ConfigMap holds (a container's `bash /scripts/start.sh`, a
RayJob's `python /home/ray/samples/serve.py`) is read on the ConfigMap's script, with the container's image, env and
GPUs; a RayJob's workers span its cluster. An image of another project whose tag names the vLLM it bundles
(rayproject/ray:2.43.0-vllm_0.7.3) is that release."""

from __future__ import annotations

from scan_support import write_tree

from kvdoctor.scan.image import image_version
from kvdoctor.scan.run import read_manifests

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: chat
spec:
  template:
    spec:
      containers:
      - name: server
        image: vllm/vllm-openai:v0.10.1.1
        command: ["bash", "/scripts/start.sh"]
        env:
        - name: MODEL
          value: Qwen/Qwen3-8B
        resources:
          limits:
            nvidia.com/gpu: 2
        volumeMounts:
        - name: scripts
          mountPath: /scripts
      volumes:
      - name: scripts
        configMap:
          name: vllm-scripts
"""
CONFIG_MAP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: vllm-scripts
data:
  start.sh: |
    #!/bin/bash
    exec vllm serve "$MODEL" --tensor-parallel-size 2 \\
      --swap-space 4
"""


def test_a_container_running_a_configmaps_script_is_read_on_the_script(tmp_path):
    root = write_tree(tmp_path / "repo", {"deploy.yaml": DEPLOYMENT, "scripts.yaml": CONFIG_MAP})
    files, found, notes, unread = read_manifests([str(root)])
    (workload,) = found
    assert (workload.name, workload.container, workload.image) == ("chat", "server", "vllm/vllm-openai:v0.10.1.1")
    assert [t.text for t in workload.argv][:3] == ["Qwen/Qwen3-8B", "--tensor-parallel-size", "2"]
    assert workload.gpu_limit == 2 and "ConfigMap vllm-scripts" in workload.notes[0]
    assert not any("does not read kind ConfigMap" in note for note in notes)


def test_without_the_configmap_in_the_scan_the_container_is_not_read(tmp_path):
    root = write_tree(tmp_path / "repo", {"deploy.yaml": DEPLOYMENT})
    assert read_manifests([str(root)])[1] == []


def test_a_bundled_vllm_named_in_another_projects_tag_is_that_release():
    version = image_version("rayproject/ray:2.43.0-vllm_0.7.3")
    assert version.vllm_version == "0.7.3" and "bundling vLLM" in version.why_unknown
    assert image_version("ghcr.io/llm-d/llm-d:v0.2.0").vllm_version is None
