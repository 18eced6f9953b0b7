"""Stop 47 (issue 27): with the version unknown, an argument only old releases refuse is named with those releases
(in the finding's title and in the note that keeps the flags unjudged); batch s96's shapes: workloads on another
accelerator than an NVIDIA GPU, a release named among a tag's other parts, a Compose service running an image the
project builds from a Dockerfile beside it."""

from __future__ import annotations

from scan_support import scan, write_tree

from kvdoctor.check.run import CheckSettings
from kvdoctor.scan.judge import ScanDefaults
from kvdoctor.scan.run import run_scan

VENV_SCRIPT = """\
#!/bin/bash
pip install vllm
vllm serve Qwen/Qwen2.5-3B-Instruct --enable-auto-tool-choice --tool-call-parser hermes
"""


def test_an_argument_only_old_releases_refuse_names_those_releases(tmp_path):
    (tmp_path / "run.sh").write_text(VENV_SCRIPT)
    (result,) = scan([str(tmp_path / "run.sh")], tmp_path, gpu="H100").workloads
    (kvd004,) = [p.finding for p in result.placed if p.finding.rule_id == "KVD004"]
    assert kvd004.status == "undecided"
    refused_by = result.report.facts["serve.args_rejected_by"]
    assert refused_by.startswith("0.4") and refused_by in kvd004.title, kvd004.title
    assert "version unknown" not in kvd004.title
    (note,) = [n for n in result.report.notes if "kept, not judged" in n]
    assert f"{refused_by} refuse them" in note and "accept them" in note, note


def test_a_refused_argument_of_a_named_release_names_that_release(tmp_path):
    (tmp_path / "run.sh").write_text(VENV_SCRIPT.replace("--enable-auto-tool-choice", "--max-modle-len 4"))
    defaults = ScanDefaults(gpu="H100", vllm_version="0.25.1", offline=True, cache_dir=tmp_path / "cache")
    (result,) = run_scan([str(tmp_path / "run.sh")], defaults, CheckSettings(compile=False)).workloads
    (kvd004,) = [p.finding for p in result.placed if p.finding.rule_id == "KVD004"]
    assert kvd004.status == "fired" and "vLLM 0.25.1 refuses" in kvd004.title, kvd004.title


# Batch s96 (issue 27): workloads on another accelerator than an NVIDIA GPU (AMD, Intel Gaudi / XPU, Neuron, TPU, CPU)
# are not judged as NVIDIA GPUs: the GPU checks are not judged, said once with the line that shows the accelerator.

ROCM_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: mistral}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: IMAGE
        args: [vllm, serve, mistralai/Mistral-7B-v0.3, --dtype, bfloat16]
        env:
        - {name: ENVNAME, value: "0"}
        resources:
          limits:
            RESOURCE: 1
"""


def _one(tmp_path, text: str, gpu: str | None = "T4"):
    (tmp_path / "deploy.yaml").write_text(text)
    (result,) = scan([str(tmp_path / "deploy.yaml")], tmp_path, gpu=gpu).workloads
    return result


def _rocm(image="rocm/vllm:latest", env="HOME", resource="amd.com/gpu"):
    return ROCM_DEPLOYMENT.replace("IMAGE", image).replace("ENVNAME", env).replace("RESOURCE", resource)


def test_an_amd_image_is_not_judged_as_an_nvidia_gpu_even_with_a_gpu_default(tmp_path):
    result = _one(tmp_path, _rocm())
    (line,) = [u for u in result.unjudged if u.startswith("not an NVIDIA GPU:")]
    assert "AMD GPU (ROCm)" in line and "the image rocm/vllm:latest (line 9)" in line, line
    assert result.report.facts.get("gpu.name") is None  # --gpu T4 is not applied to it
    assert not [f for f in result.report.findings if f.status == "undecided" and any("gpu." in d for d in f.decided_by)]


def test_the_accelerator_is_read_from_the_env_the_device_option_and_the_resource(tmp_path):
    by_env = _one(tmp_path, _rocm(image="my/server:1", env="HIP_VISIBLE_DEVICES"))
    assert any("the env HIP_VISIBLE_DEVICES (line 12)" in u for u in by_env.unjudged), by_env.unjudged
    by_resource = _one(tmp_path, _rocm(image="my/server:1"))
    assert any("amd.com/gpu in deploy.yaml (line 15)" in u for u in by_resource.unjudged), by_resource.unjudged
    gaudi = _one(tmp_path, _rocm(image="my/server:1", resource="cpu").replace("--dtype, bfloat16", "--device, hpu"))
    assert any("Intel Gaudi (HPU), shown by vLLM's --device hpu" in u for u in gaudi.unjudged), gaudi.unjudged


def test_a_file_that_also_states_nvidia_gpus_or_a_node_label_naming_one_stays_nvidia(tmp_path):
    both = _one(tmp_path, _rocm(image="my/server:1", resource="nvidia.com/gpu") + "# /dev/kfd\n")
    assert not any(u.startswith("not an NVIDIA GPU:") for u in both.unjudged)
    assert "T4" in both.report.facts.get("gpu.name")
    labelled = _rocm(image="rocm/vllm:latest").replace(
        "      containers:", "      nodeSelector: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}\n      containers:")
    result = _one(tmp_path, labelled)
    assert not any(u.startswith("not an NVIDIA GPU:") for u in result.unjudged) and "A100" in result.report.facts["gpu.name"]


def test_a_release_named_among_a_tags_other_parts_is_read(tmp_path):
    result = _one(tmp_path, _rocm(image="rocm/vllm:rocm6.2_mi300_ubuntu20.04_py3.9_vllm_0.6.4"))
    assert result.report.facts.get("vllm.version") == "0.6.4"


COMPOSE_REPO_IMAGE = """\
services:
  vllm-rocm-tq:
    image: ghcr.io/someone/vllm-rocm-tq:latest
    devices: [/dev/kfd, /dev/dri]
    environment:
      MODEL_NAME: Qwen/Qwen2.5-0.5B-Instruct-AWQ
"""
DOCKERFILE = """\
FROM docker.io/vllm/vllm-openai-rocm:v0.24.0
COPY entrypoint.sh /entrypoint.sh
ENTRYPOINT ["/entrypoint.sh"]
"""
ENTRYPOINT = """\
#!/bin/bash
exec python3 -m vllm.entrypoints.openai.api_server --model "${MODEL_NAME}" --max-modle-len 4096
"""


def test_a_compose_service_running_the_projects_own_image_runs_its_dockerfiles_command(tmp_path):
    write_tree(tmp_path, {"docker-compose.yml": COMPOSE_REPO_IMAGE, "Dockerfile": DOCKERFILE,
                          "entrypoint.sh": ENTRYPOINT})
    (result,) = scan([str(tmp_path / "docker-compose.yml")], tmp_path).workloads
    assert result.workload.name == "vllm-rocm-tq" and result.report.facts["vllm.version"] == "0.24.0"
    assert any("is taken to be built from" in n and "Dockerfile" in n for n in result.workload.notes)
    assert "KVD004" in {p.finding.rule_id for p in result.placed if p.finding.status == "fired"}  # --max-modle-len
    assert any(u.startswith("not an NVIDIA GPU: AMD GPU (ROCm)") for u in result.unjudged)


def test_a_compose_service_of_another_image_with_no_dockerfile_near_stays_unread(tmp_path):
    (tmp_path / "docker-compose.yml").write_text(COMPOSE_REPO_IMAGE)
    assert not scan([str(tmp_path / "docker-compose.yml")], tmp_path).workloads
