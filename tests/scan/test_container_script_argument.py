"""Batch s73 (stop 42): a container whose one argument is a whole vLLM command line is read as that command (with a
note that only a shell runs it so); Red Hat's builds of vLLM (rhaiis/, rhoai/, modh/) carry the product's release in
their tag, not vLLM's, and are judged as builds of any age."""

from __future__ import annotations

from scan_support import write_tree

from kvdoctor.scan.image import image_version, is_fork_image
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
      - name: main
        image: vllm/vllm-openai:v0.10.1.1
        args:
        - |
          python3 -m vllm.entrypoints.openai.api_server \\
            --model=/mnt/models \\
            --max-model-len=2048
"""


def test_one_argument_holding_a_vllm_command_line_is_read_as_that_command(tmp_path):
    root = write_tree(tmp_path / "repo", {"deploy.yaml": DEPLOYMENT})
    (workload,) = read_manifests([str(root / "deploy.yaml")])[1]
    assert [t.text for t in workload.argv] == ["--model=/mnt/models", "--max-model-len=2048"]
    assert workload.argv[1].line == 15
    assert "whole vLLM command line" in workload.notes[0]


def test_one_argument_of_fused_flags_is_no_script(tmp_path):
    fused = DEPLOYMENT.split("        - |")[0] + '        - "--model Qwen/Qwen3-8B --port 8000"\n'
    root = write_tree(tmp_path / "repo", {"deploy.yaml": fused})
    (workload,) = read_manifests([str(root / "deploy.yaml")])[1]
    assert [t.text for t in workload.argv] == ["--model Qwen/Qwen3-8B --port 8000"]  # one word, as vLLM gets it
    assert not any("whole vLLM command line" in note for note in workload.notes)


def test_red_hat_builds_name_their_products_release_not_vllms():
    for image in ("registry.redhat.io/rhaiis/vllm-cuda-rhel9:3.0.0", "registry.redhat.io/rhoai/odh-vllm-cuda-rhel9:v2.22"):
        version = image_version(image)
        assert version.vllm_version is None and "Red Hat AI product release" in version.why_unknown
    assert is_fork_image("rhaiis/vllm-cuda-rhel9") and is_fork_image("modh/vllm")
