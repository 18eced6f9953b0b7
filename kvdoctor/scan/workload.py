"""A vLLM workload found in a manifest: where it is, what it runs, and the line of every value read."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    """A place in a manifest."""

    file: str
    line: int | None
    what: str | None = None
    """The value found there, e.g. '--kv-cache-dtype turboquant_k8v4' or 'image vllm/vllm-openai:v0.25.1'."""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass(frozen=True)
class Token:
    """One argv word of the container's command, and the manifest line it is written on."""

    text: str
    line: int | None


@dataclass(frozen=True)
class EnvVar:
    name: str
    value: str | None
    """The literal value; None when it comes from a Secret, ConfigMap, field or the host and is unknown here."""
    line: int | None
    source: str | None = None
    """Where an unknown value comes from, e.g. "Secret 'vllm-env' key 'backend'"."""


@dataclass(frozen=True)
class GpuSelector:
    """A node label that may name the GPU: nodeSelector or a node-affinity term."""

    key: str
    values: tuple[str, ...]
    line: int | None
    required: bool = True
    """False for preferredDuringScheduling affinity."""


@dataclass(frozen=True)
class Workload:
    """One container that runs vLLM's OpenAI server."""

    file: str
    line: int | None
    """Where the object (Deployment, Compose service, modelSpec entry) starts."""
    platform: str
    """'kubernetes', 'compose', 'helm' (vLLM production-stack values), 'skypilot' (a SkyPilot task), 'script' (a
    shell script's docker run or vllm serve), 'dockerfile' (the command a Dockerfile's image runs) or 'python' (a
    Python app's vLLM launch)."""
    kind: str
    """'Deployment', 'StatefulSet', ..., 'service' (Compose), 'modelSpec' (production-stack values) or 'vLLM chart
    values'."""
    name: str
    container: str
    namespace: str | None = None
    image: str | None = None
    image_line: int | None = None
    argv: tuple[Token, ...] = ()
    """What follows `vllm serve` (or the api_server module): the model and the flags, with VAR=value prefixes."""
    command_line: int | None = None
    """Where the command or args start."""
    env: tuple[EnvVar, ...] = ()
    env_from: tuple[str, ...] = ()
    """Whole Secrets / ConfigMaps / env files loaded into the environment (their keys are unknown here)."""
    gpu_selectors: tuple[GpuSelector, ...] = ()
    gpu_limit: int | None = None
    """GPUs the container is given (nvidia.com/gpu limit, Compose device count, requestGPU); None when unknown."""
    gpu_limit_line: int | None = None
    gpu_slice: str | None = None
    """A MIG slice the pod gets instead of whole GPUs (nvidia.com/mig-1g.10gb, or a -MIG-1g.10gb product label)."""
    group_gpus: tuple[int, str] | None = None
    """A multi-node group's GPUs (LeaderWorkerSet: the leader's + (size - 1) x the worker's) and how they add up;
    vLLM's parallel sizes span the group, so this is what they are compared with."""
    vllm_pin: str | None = None
    """A vLLM release the workload's build pins (a Python app's `pip install vllm==X`) when no image tag names one."""
    vllm_pin_line: int | None = None
    expands_shell: bool = False
    """The command runs under `sh -c`: the shell expands $VAR and ${VAR} from the environment too."""
    notes: tuple[str, ...] = ()

    @property
    def title(self) -> str:
        """'Deployment/qwen (container vllm)' or 'service vllm' for Compose."""
        name = f"{self.namespace}/{self.name}" if self.namespace else self.name
        if self.platform == "compose":
            return f"service {self.name}"
        if self.platform == "helm":
            return f"{self.kind} {self.name}"
        return f"{self.kind}/{name} (container {self.container})"

    def at(self, line: int | None, what: str | None = None) -> Location:
        return Location(self.file, line if line is not None else self.line, what)
