"""Batches s94 and s95 (issue 27): shapes their first measure missed, each on a synthetic file in the shape of the
public one (a script that writes a systemd unit with a here-document, a shell script kept without a suffix or a #!
line, a pod whose command starts a Ray head beside vLLM, a Compose command run through a wrapper script)."""

from __future__ import annotations

from scan_support import by_name, scan, write_tree

from kvdoctor.scan.run import read_manifests

UNIT_WRITER = """\
#!/bin/bash
IMAGE=vllm/vllm-openai:v0.25.1
sudo tee /etc/systemd/system/vllm-coder.service > /dev/null << SCRIPT
[Unit]
Description=vLLM

[Service]
ExecStart=docker run --rm --name vllm-coder --gpus all \\\\
  $IMAGE \\\\
  vllm serve \\$VLLM_MODEL \\\\
    --tensor-parallel-size 2 \\\\
    --kv-cache-dtype fp8
Restart=on-failure
SCRIPT
sudo systemctl enable --now vllm-coder
"""


def test_a_systemd_unit_a_script_writes_with_a_heredoc_is_read_as_that_unit(tmp_path):
    root = write_tree(tmp_path / "repo", {"deploy-master.sh": UNIT_WRITER})
    (run,) = read_manifests([str(root)])[1]
    assert (run.name, run.container) == ("deploy-master.sh", "vllm-coder")
    assert [t.text for t in run.argv] == ["$VLLM_MODEL", "--tensor-parallel-size", "2", "--kv-cache-dtype", "fp8"]
    assert run.line == 8 or run.command_line == 8  # the unit's ExecStart, on the script's own line
    assert any("systemd unit the shell script writes" in n for n in run.notes)


def test_a_shell_script_without_a_suffix_or_shebang_that_launches_vllm_is_read(tmp_path):
    text = ("export TAG=26.05.post1-py3\n\n# pull first\ndocker pull nvcr.io/nvidia/vllm:${TAG}\n"
            "docker run -it --gpus all nvcr.io/nvidia/vllm:${TAG} vllm serve Qwen/Qwen3-8B --max-model-len 4096\n")
    root = write_tree(tmp_path / "repo", {"start-container": text, "NOTES": "vllm serve is started by start-container\n"})
    (run,) = read_manifests([str(root)])[1]
    assert run.file.endswith("start-container") and [t.text for t in run.argv][:1] == ["Qwen/Qwen3-8B"]


def test_a_pod_that_starts_a_ray_head_beside_vllm_is_not_held_to_its_own_gpus(tmp_path):
    pod = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm-head}
spec:
  template:
    spec:
      containers:
      - name: vllm-head
        image: vllm/vllm-openai:v0.25.1
        resources: {limits: {nvidia.com/gpu: 1}}
        command: ["/bin/sh", "-c", "ray start --head --port=6379 --block & vllm serve Qwen/Qwen3-8B --pipeline-parallel-size 2"]
"""
    root = write_tree(tmp_path / "repo", {"head.yaml": pod})
    result = by_name(scan([str(root)], tmp_path))["vllm-head"]
    assert "KVD201" not in {p.finding.rule_id for p in result.placed}
    alone = pod.replace("ray start --head --port=6379 --block & ", "")
    root = write_tree(tmp_path / "alone", {"head.yaml": alone})
    result = by_name(scan([str(root)], tmp_path))["vllm-head"]
    assert "KVD201" in {p.finding.rule_id for p in result.placed}


def test_a_compose_command_run_through_a_wrapper_script_is_vllms(tmp_path):
    compose = """\
services:
  vllm-noray:
    image: vllm-node-tf5  # built locally on NVIDIA's vLLM image: its entrypoint is no vLLM launcher
    command: >
      /launch-cluster.sh vllm serve
        /models/Qwen3-8B
        --tensor-parallel-size 2
"""
    root = write_tree(tmp_path / "repo", {"compose.yaml": compose})
    (run,) = read_manifests([str(root)])[1]
    assert [t.text for t in run.argv] == ["/models/Qwen3-8B", "--tensor-parallel-size", "2"]
