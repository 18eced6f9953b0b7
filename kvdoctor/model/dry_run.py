"""Plain data of a dry run: what was asked, what each kernel compile gave, and the verdict."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    """Outcome of one kernel, and of a whole dry run (passed, failed or skipped)."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    CRASHED = "crashed"
    TIMEOUT = "timeout"

    @property
    def is_failure(self) -> bool:
        """Failed, crashed or timed out: the kernel did not compile."""
        return self in (Status.FAILED, Status.CRASHED, Status.TIMEOUT)


@dataclass(frozen=True)
class DryRunRequest:
    """One deployment to dry-run: the kernels vLLM would compile for it."""

    kv_cache_dtype: str
    """vLLM's `--kv-cache-dtype` value, e.g. "turboquant_k8v4", "turboquant_4bit_nc", "fp8", "auto"."""
    model_dtype: str
    """Effective torch dtype of the model: "bfloat16", "float16" or "float32"."""
    head_dim: int
    """Per-head dimension D."""
    num_kv_heads: int
    """KV heads per tensor-parallel rank (H)."""
    capability: tuple[int, int]
    """Target CUDA compute capability, e.g. (8, 0)."""
    block_size: int = 16
    """KV-cache block size in tokens."""
    vllm_source: str | None = None
    """None = the installed vllm distribution; else a vllm .whl file or an unpacked tree containing vllm/."""
    use_probe: bool = False
    """Compile kvdoctor's probe kernel instead of vLLM's (no source of the judged vLLM version at hand)."""
    vllm_version: str | None = None
    """The vLLM release being judged; the probe kernel models its key conversion (None: the unfixed one)."""
    roles: tuple[str, ...] | None = None
    """Compile only kernels of these roles ('store', 'decode', 'attention_2d', 'attention_3d'); None = all.
    Fix verification recompiles the role that failed. The probe kernel is always compiled when it stands in."""
    backend: str | None = None
    """vLLM attention backend that will run (selected or forced), e.g. "TRITON_ATTN"; None = not known
    (TurboQuant presets still mean the TURBOQUANT backend; fp8 KV then gets the probe kernel)."""
    num_q_heads: int | None = None
    """Query heads per tensor-parallel rank; None = as many as KV heads (Triton attention only)."""
    probe_reason: str | None = None
    """Why no vLLM kernels of the judged version are at hand (e.g. the fetch failed); shown with the probe."""
    kv_lora_rank: int | None = None
    """MLA models: width of the latent (compressed KV) part of head_dim, the rest being the rope part
    (DeepSeek-V2-Lite: 512 of 576); None for other models. The Triton MLA decode kernels are specialised on it."""


@dataclass(frozen=True)
class CompileFailure:
    """Why one kernel did not compile, reduced to the innermost cause."""

    kind: str
    """Stable classification, one of the registry kvdoctor/data/failure_kinds.yaml (kvdoctor.dryrun.kinds)."""
    exc_type: str | None = None
    """Qualified type of the exception triton.compile raised, e.g. "triton.compiler.errors.CompilationError"."""
    message: str | None = None
    """Its message (trimmed); for a crash or timeout, what the child printed last."""
    innermost_type: str | None = None
    """Type of the innermost exception of the __cause__/__context__ chain, e.g. "AssertionError"."""
    innermost_message: str | None = None
    """Message of that innermost exception (may be empty, as Triton's bare asserts are)."""
    triton_file: str | None = None
    """Triton source file that raised it, relative to site-packages, e.g. "triton/language/extra/cuda/utils.py"."""
    triton_line: int | None = None
    """Line in triton_file."""
    triton_function: str | None = None
    """Function in triton_file, e.g. "convert_custom_float8"."""
    kernel_file: str | None = None
    """Kernel source file of the failing line, as a path inside vllm (or kvdoctor for the probe)."""
    kernel_line: int | None = None
    """Line number in kernel_file of the statement Triton was compiling."""
    kernel_source_line: str | None = None
    """Text of that kernel line, stripped."""

    @property
    def innermost(self) -> str | None:
        """'Type: message' of the innermost exception, or None when it has no type."""
        if not self.innermost_type:
            return None
        return f"{self.innermost_type}: {self.innermost_message or ''}".strip().rstrip(":")


@dataclass(frozen=True)
class KernelResult:
    """Outcome of compiling one kernel for the target GPU."""

    kernel: str
    """Kernel function name, e.g. "_tq_fused_store_fp8"."""
    role: str
    """"store", "decode", "attention_2d", "attention_3d", "reduce", "guard" (vLLM's start-up check) or "probe"."""
    source_file: str
    """File the kernel comes from, e.g. "vllm/v1/attention/ops/triton_turboquant_store.py"."""
    status: Status
    seconds: float
    """Compile time measured in the child (from the cache entry when cached)."""
    cached: bool
    """True when this result was read from kvdoctor's cache instead of compiled now."""
    inputs: dict[str, Any] = field(default_factory=dict)
    """What the kernel was compiled with: signature dtypes, constexprs, num_warps/num_stages, target."""
    failure: CompileFailure | None = None
    """Set for failed, crashed, timeout, and layout_changed skips."""
    note: str | None = None
    """Extra words for the user, e.g. why it was skipped."""


@dataclass(frozen=True)
class DryRunReport:
    """Verdict of one dry run.

    status is FAILED when any kernel failed, crashed or timed out; else SKIPPED when any kernel (or the
    whole run) was skipped; else PASSED.
    """

    status: Status
    request: DryRunRequest
    """The request this report answers."""
    kernels: tuple[KernelResult, ...]
    """One result per kernel compiled (empty when the whole run was skipped)."""
    source_label: str
    """Where the kernels came from, e.g. "vLLM 0.25.1 kernels from /path/x.whl"."""
    vllm_version: str | None
    """Version of the vLLM whose kernel files were read; None for the probe kernel or when unknown."""
    triton_version: str | None
    """Version of the Triton that compiled them; None when Triton is not installed."""
    reason: str | None
    """One line on why the run was skipped or what failed."""
    seconds: float
    """Wall time of the whole dry run in this process."""

    @property
    def deciding_kernel(self) -> KernelResult | None:
        """The kernel whose failure explains this run: the first that did not compile, else the first skipped
        with a failure (a changed layout), else None. Everything downstream names this one kernel."""
        failing = [k for k in self.kernels if k.status.is_failure and k.failure]
        return next(iter(failing or [k for k in self.kernels if k.failure]), None)

    @property
    def failure_kind(self) -> str | None:
        kernel = self.deciding_kernel
        return kernel.failure.kind if kernel else None

    @property
    def used_probe(self) -> bool:
        """kvdoctor's probe kernel stood in for vLLM's (no kernels of the judged release at hand)."""
        return any(k.role == "probe" for k in self.kernels)


def to_json(report: DryRunReport) -> dict[str, Any]:
    """JSON form of a report (the json format and the cache): plain values, failure_kind added."""
    data = _plain(report)
    data["failure_kind"] = report.failure_kind
    return data


def from_json(data: dict[str, Any]) -> DryRunReport:
    """A report back from its JSON form (to_json's output; unknown keys are ignored)."""
    request = DryRunRequest(**_known(DryRunRequest, data["request"]))
    request = dataclasses.replace(request, capability=tuple(request.capability),
                                  roles=tuple(request.roles) if request.roles is not None else None)  # fmt: skip
    kernels = tuple(kernel_from_json(k) for k in data.get("kernels", ()))
    return DryRunReport(Status(data["status"]), request, kernels, data.get("source_label", ""), data.get("vllm_version"),
                        data.get("triton_version"), data.get("reason"), float(data.get("seconds", 0.0)))  # fmt: skip


def kernel_from_json(data: dict[str, Any]) -> KernelResult:
    failure = data.get("failure")
    return KernelResult(
        data["kernel"], data.get("role", ""), data.get("source_file", ""), Status(data["status"]),
        float(data.get("seconds", 0.0)), bool(data.get("cached", False)), dict(data.get("inputs") or {}),
        CompileFailure(**_known(CompileFailure, failure)) if failure else None, data.get("note"),
    )


def _known(cls, values: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in values.items() if k in names}


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, StrEnum):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
