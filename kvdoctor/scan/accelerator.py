"""The accelerator a workload targets when it is not an NVIDIA GPU (data/accelerators.yaml): an AMD GPU, Intel Gaudi
or XPU, AWS Neuron, a TPU or the CPU, read from what the deployment states: vLLM's `--device`, the image's
repository and tag, the container's environment, and the file's device resources and device paths.

kvdoctor's GPU, kernel and KV-cache memory checks model NVIDIA GPUs, so on another accelerator they are not judged
(said once, with the line that shows the accelerator); the release's parser, KV dtypes and GPU counts still are. A
file that also states NVIDIA GPUs (nvidia.com/gpu, --gpus, the NVIDIA runtime) decides nothing by its resources."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from kvdoctor.base.yaml_safe import load_yaml_cached
from kvdoctor.data import read_data
from kvdoctor.model.report import Report
from kvdoctor.scan.image import repository_path, split_image
from kvdoctor.scan.workload import Location, Workload

NVIDIA_SIGNS = re.compile(r"nvidia\.com/gpu|--gpus[= ]|\bgpus:\s*all\b|runtime:\s*nvidia|driver:\s*nvidia"
                          r"|NVIDIA_VISIBLE_DEVICES|CUDA_VISIBLE_DEVICES")
IMAGE_WORD = re.compile(r"[a-z0-9]+")
GPU_FACT = re.compile(r"\bgpu\.\w+")
MAX_FILE_BYTES = 2_000_000
NOT_NVIDIA = "not an NVIDIA GPU:"  # how the not-judged line starts (the public-manifest measure reads it)


@dataclass(frozen=True)
class Accelerator:
    name: str
    image_words: frozenset[str]
    image_repositories: frozenset[str]
    resources: tuple[str, ...]
    devices: tuple[str, ...]
    env: frozenset[str]
    vllm_device: str | None


@dataclass(frozen=True)
class Target:
    """A workload's accelerator and what in the deployment shows it."""

    accelerator: Accelerator
    shown_by: str
    """In words: "vLLM's --device hpu", "the image rocm/vllm:latest", "the env HIP_VISIBLE_DEVICES", "resource amd.com/gpu"."""
    at: Location


@lru_cache(maxsize=1)
def accelerators() -> tuple[Accelerator, ...]:
    raw = load_yaml_cached(read_data("accelerators.yaml"), "accelerators.yaml")
    return tuple(Accelerator(entry["name"], frozenset(entry.get("image_words", ())),
                             frozenset(entry.get("image_repositories", ())), tuple(entry.get("resources", ())),
                             tuple(entry.get("devices", ())), frozenset(entry.get("env", ())), entry.get("vllm_device"))
                 for entry in raw["accelerators"])  # fmt: skip


def target_of(workload: Workload) -> Target | None:
    """The non-NVIDIA accelerator the workload targets, or None (an NVIDIA GPU, or nothing says)."""
    return _by_device_option(workload) or _by_image(workload) or _by_env(workload) or _by_file(workload)


def _by_device_option(workload: Workload) -> Target | None:
    words = workload.argv
    for index, token in enumerate(words):
        name, eq, value = token.text.partition("=")
        if name != "--device":
            continue
        value = value if eq else (words[index + 1].text if index + 1 < len(words) else "")
        for accelerator in accelerators():
            if accelerator.vllm_device and value.strip().lower() == accelerator.vllm_device:
                return Target(accelerator, f"vLLM's --device {value}", workload.at(token.line))
    return None


def _by_image(workload: Workload) -> Target | None:
    if not workload.image:
        return None
    repository = repository_path(workload.image).lower()
    _, tag, _ = split_image(workload.image.strip())
    words = set(IMAGE_WORD.findall(repository)) | set(IMAGE_WORD.findall((tag or "").lower()))
    for accelerator in accelerators():
        if repository in accelerator.image_repositories or words & accelerator.image_words:
            return Target(accelerator, f"the image {workload.image}", workload.at(workload.image_line))
    return None


def _by_env(workload: Workload) -> Target | None:
    for variable in workload.env:
        for accelerator in accelerators():
            if variable.name in accelerator.env:
                return Target(accelerator, f"the env {variable.name}", workload.at(variable.line))
    return None


def _by_file(workload: Workload) -> Target | None:
    """A device resource or device path in the workload's own file, when the file states no NVIDIA GPU."""
    text = _file_text(workload.file)
    if not text or NVIDIA_SIGNS.search(text):
        return None
    for accelerator in accelerators():
        for sign in (*accelerator.resources, *accelerator.devices):
            at = text.find(sign)
            if at >= 0:
                line = text.count("\n", 0, at) + 1
                return Target(accelerator, f"{sign} in {Path(workload.file).name}", Location(workload.file, line, sign))
    return None


def _file_text(path: str) -> str:
    try:
        file = Path(path)
        return file.read_text(errors="replace") if file.is_file() and file.stat().st_size <= MAX_FILE_BYTES else ""
    except OSError:
        return ""


def not_judged_line(target: Target) -> str:
    """The scan's 'not judged' line for a workload on another accelerator."""
    line = f" (line {target.at.line})" if target.at.line else ""
    return (f"{NOT_NVIDIA} {target.accelerator.name}, shown by {target.shown_by}{line}; kvdoctor's GPU, kernel "
            "and KV-cache memory checks model NVIDIA GPUs and are not judged here (the release's parser, KV dtypes "
            "and GPU counts are)")


@lru_cache(maxsize=1)
def _gpu_decided_rules() -> frozenset[str]:
    return frozenset(load_yaml_cached(read_data("accelerators.yaml"), "accelerators.yaml").get("gpu_decided_rules", ()))


def without_nvidia_checks(report: Report) -> Report:
    """The report without the findings an NVIDIA GPU would decide (undecided ones whose facts name gpu.*, and the
    rules data/accelerators.yaml lists): on another accelerator they do not apply, and not_judged_line says so once."""
    kept = tuple(f for f in report.findings if f.rule_id not in _gpu_decided_rules()
                 and not (f.status == "undecided" and any(GPU_FACT.search(line) for line in f.decided_by)))
    return replace(report, findings=kept)
