"""A Podman Quadlet container unit (batch s74, stop 42): read as the `podman run` systemd runs from its [Container]
section, each word on its setting's line, found by a folder walk."""

from __future__ import annotations

from scan_support import write_tree

from kvdoctor.scan.run import read_manifests

QUADLET = """\
[Unit]
Description=vLLM
[Container]
Image=docker.io/vllm/vllm-openai:v0.10.1.1
ContainerName=vllm-openai
PodmanArgs=--ipc=host
AddDevice=nvidia.com/gpu=all
Environment=HF_HOME=/cache VLLM_LOGGING_LEVEL=INFO
Exec=--model Qwen/Qwen3-8B --max-model-len 8192 --swap-space 4
[Service]
Restart=on-failure
"""


def test_a_quadlet_is_the_podman_run_it_stands_for(tmp_path):
    root = write_tree(tmp_path / "repo", {"units/vllm.container": QUADLET, "units/other.container": "[Container]\nImage=nginx\n"})
    (workload,) = read_manifests([str(root)])[1]
    assert (workload.name, workload.container, workload.kind) == ("vllm.container", "vllm-openai", "Quadlet")
    assert workload.image == "docker.io/vllm/vllm-openai:v0.10.1.1" and workload.image_line == 4
    assert [t.text for t in workload.argv][:2] == ["--model", "Qwen/Qwen3-8B"] and workload.argv[0].line == 9
    assert {e.name: e.value for e in workload.env}["VLLM_LOGGING_LEVEL"] == "INFO"


def test_a_quadlet_without_an_image_is_named_not_checked(tmp_path):
    root = write_tree(tmp_path / "repo", {"vllm.container": "[Container]\nExec=--model Qwen/Qwen3-8B\n"})
    files, found, notes, unread = read_manifests([str(root / "vllm.container")])
    assert found == [] and any("no Image=" in note for note in notes)
