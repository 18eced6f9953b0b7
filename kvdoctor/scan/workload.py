"""A vLLM workload found in a manifest: where it is, what it runs, and the line of every value read."""

from __future__ import annotations

from dataclasses import dataclass, replace

LINE_FILE_STRIDE = 100_000_000
"""A workload read from several files (a Kustomize base and its overlay's patch) keeps one line number per value:
a line at or over this stride is in ``Workload.line_files[line // STRIDE - 1]``, at ``line % STRIDE``. A file kvdoctor
reads is at most 8 MiB, so no real line reaches it."""


def file_line(file: str, line_files: tuple[str, ...], line: int | None) -> tuple[str, int | None]:
    """(file, line) of a line kept for a node of ``file`` whose object has values from ``line_files`` too."""
    if line is None or line < LINE_FILE_STRIDE:
        return file, line
    index, real = divmod(line, LINE_FILE_STRIDE)
    return (line_files[index - 1], real) if index <= len(line_files) else (file, real)


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
class Translation:
    """How a launcher's own word became this vLLM word (TRL's `--tensor_parallel_size`), or that its parser refuses it."""

    launcher: str
    """What a report calls the launcher ("TRL's vLLM generation server")."""
    written: str
    """The word as the manifest writes it."""
    refused: bool = False
    """The launcher's parser refuses the word (an option it had in none of its releases): vLLM never starts."""
    left_out: bool = False
    """The launcher's own word, not vLLM's, that kvdoctor does not read (ms-swift's --template): named, not judged."""


@dataclass(frozen=True)
class Token:
    """One argv word of the container's command, and the manifest line it is written on."""

    text: str
    line: int | None
    via: Translation | None = None
    """Set when the word is a launcher's own, read as vLLM's (scan/translated_options.py)."""


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
    cluster_gpus: tuple[int, str] | None = None
    """A Ray cluster's most GPUs and how they add up (scan/ray_cluster_gpus.py): Ray places vLLM's workers anywhere
    in it, so only a shortfall (fewer than one engine's -tp x -pp) is judged against it."""
    ray_cluster: str | None = None
    """The `ray start --head` / `--address` its own script runs beside vLLM: vLLM's workers may be placed on the Ray
    cluster's other nodes, so this pod's GPUs are not all it can use."""
    release_by: str | None = None
    """Who picks the image, and with it the vLLM release, when the manifest names none: an operator (the installed
    KAITO operator's base image), so the fix is to name that release (--vllm-version), not to pin a tag here."""
    vllm_pin: str | None = None
    """A vLLM release the workload's build pins (a Python app's `pip install vllm==X`) when no image tag names one."""
    vllm_pin_line: int | None = None
    vllm_tree: str | None = None
    """A vLLM source tree in the scanned checkout (scan/source_tree.py) that the host's Python may run: a fork whose
    parser may add options, so options no release has are undecided, not refused."""
    built_here: bool = False
    """The image is built by the manifest itself (Compose `build:`) from a Dockerfile not read here: its vLLM is
    whatever that build installed, of any age, whatever the local tag says (vllm-blackwell:latest)."""
    expands_shell: bool = False
    """The command runs under `sh -c`: the shell expands $VAR and ${VAR} from the environment too."""
    execs_option: str | None = None
    """vLLM's options given as a Kubernetes `command` (which replaces the image's entrypoint): the option the
    container would exec as its program (`--model`), read as vllm serve's options to judge the rest."""
    non_string_item: tuple[str, int | None] | None = None
    """A Compose command or entrypoint list item that is no string ('command[9] is null') and its line: Compose refuses
    the file before any container starts."""
    command_cut: str | None = None
    """How Compose's split of a string command keeps it from running as written (scan/compose_command.py): the
    workload is judged as its author meant it, and this is said as an error."""
    launcher_refused: tuple[Token, ...] = ()
    """The words a launcher that translates its options into vLLM's refuses (TRL's server given an option it never
    had): its parser exits before vLLM starts."""
    notes: tuple[str, ...] = ()
    line_files: tuple[str, ...] = ()
    """The other files its lines are in (see LINE_FILE_STRIDE): a Kustomize overlay's patches, a generator's env file."""
    undecided: tuple[str, ...] = ()
    """What the deployment's own files leave unknown or the platform would not run as written (a Kustomize base fetched
    from the network, a helmCharts field, a field KServe does not have): judged as far as it is read, never a PASS."""
    read_through: tuple[str, ...] = ()
    """Files whose command this workload runs (a task's script file, the Dockerfile of an image built and deployed
    here): in the same scan they are read through it, not alone."""

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
        file, line = self.where(line if line is not None else self.line)
        return Location(file, line, what)

    def where(self, line: int | None) -> tuple[str, int | None]:
        """(file, line) of one of the workload's lines."""
        return file_line(self.file, self.line_files, line)

    def line_in(self, file: str, line: int | None) -> tuple["Workload", int | None]:
        """The workload (with ``file`` among its files) and the line that stands for ``line`` of ``file``."""
        if file == self.file or line is None:
            return self, line
        files = self.line_files if file in self.line_files else self.line_files + (file,)
        return replace(self, line_files=files), (files.index(file) + 1) * LINE_FILE_STRIDE + line
