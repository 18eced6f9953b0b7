"""Plain data of a dry run: what was asked, what each kernel compile gave, and the verdict."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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


@dataclass(frozen=True)
class CompileFailure:
    """Why one kernel did not compile, reduced to the innermost cause."""

    kind: str
    """Stable classification: bf16_to_fp8e4b15_assert, fp8e4nv_unsupported_arch, bf16_unsupported_arch,
    ptxas_unknown_target, ptxas_error, compile_error, timeout, crashed, layout_changed; and for vLLM's start-up
    guard in front of the kernels (role "guard"): triton_attn_fp8_guard, triton_attn_bf16_guard."""
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


@dataclass(frozen=True)
class KernelResult:
    """Outcome of compiling one kernel for the target GPU."""

    kernel: str
    """Kernel function name, e.g. "_tq_fused_store_fp8"."""
    role: str
    """"store", "decode" or "probe"."""
    source_file: str
    """File the kernel comes from, e.g. "vllm/v1/attention/ops/triton_turboquant_store.py"."""
    status: str
    """"passed", "failed", "skipped", "crashed" or "timeout"."""
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

    status is "failed" when any kernel failed, crashed or timed out; else "skipped" when any kernel (or the
    whole run) was skipped; else "passed".
    """

    status: str
    """"passed", "failed" or "skipped"."""
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
    def failure_kind(self) -> str | None:
        """Kind of the first failed/crashed/timed-out kernel, else of the first skip that has one, else None."""
        bad = [k for k in self.kernels if k.status in ("failed", "crashed", "timeout") and k.failure]
        other = [k for k in self.kernels if k.failure]
        for kernel in bad or other:
            return kernel.failure.kind
        return None


@dataclass(frozen=True)
class FixVerification:
    """Whether a proposed fix makes the dry run pass."""

    fix_id: str
    """Caller's id of the fix, e.g. a rule's fix id."""
    changes: dict[str, Any]
    """DryRunRequest fields the fix changes, e.g. {"model_dtype": "float16"}."""
    status: str
    """"verified" (the changed request passes), "not_verified" (it fails) or "skipped" (cannot tell)."""
    report: DryRunReport | None
    """The dry run of the changed request; None when the changes themselves were unusable."""
