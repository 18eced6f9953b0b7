"""Plain, frozen facts gathered by the probes: the only input to rules and reports.

Every fact may be unknown (``None``); rules treat unknown with three-valued logic.
``Facts.flat()`` exposes them under the dotted names rules use, declared in kvdoctor/data/fact_names.yaml
(this layer sits below data/, so a test, not an import, keeps the two in step).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kvdoctor.model.modelled import INPUTS, TargetPackages


@dataclass(frozen=True)
class GpuDevice:
    """One GPU as a probe or the GPU table sees it."""

    name: str
    """Marketing name, e.g. 'NVIDIA A100-SXM4-80GB'."""
    capability: tuple[int, int] | None
    """CUDA compute capability as (major, minor), vLLM's convention."""
    memory_gib: float | None = None
    """Total device memory in GiB."""


@dataclass(frozen=True)
class GpuFacts:
    """The GPU the deployment targets: a probed local GPU or a --gpu target."""

    source: str
    """'nvml', 'torch', 'target' (from --gpu) or 'none' (nothing found)."""
    devices: tuple[GpuDevice, ...] = ()
    """Every GPU seen, in index order."""
    driver_version: str | None = None
    """NVIDIA driver version when probed through NVML."""
    cuda_driver_version: str | None = None
    """Highest CUDA version the driver supports, e.g. '12.8'."""
    notes: tuple[str, ...] = ()
    """What the probes saw on the way (probe failures, mismatches between NVML and torch)."""

    @property
    def weakest(self) -> GpuDevice | None:
        """The device that decides: the lowest capability, then the least memory."""
        known = [d for d in self.devices if d.capability is not None]
        if not known:
            return self.devices[0] if self.devices else None
        return min(known, key=lambda d: (d.capability, d.memory_gib or 0.0))

    @property
    def mixed(self) -> bool:
        return len({(d.name, d.capability) for d in self.devices}) > 1


@dataclass(frozen=True)
class ModelFacts:
    """What config.json says about the model, and the dtype vLLM would run it in."""

    source: str
    """Where config.json came from: a path, or 'hf-cache:<id>' / 'hub:<id>'."""
    model_id: str | None = None
    model_type: str | None = None
    architectures: tuple[str, ...] = ()
    config_dtype: str | None = None
    """dtype declared by the checkpoint (torch name, e.g. 'bfloat16'); None when absent."""
    dtype: str | None = None
    """Effective model dtype after vLLM's resolution for the target GPU and --dtype."""
    dtype_note: str | None = None
    """How the effective dtype was reached (fallback, downcast, explicit flag)."""
    dtype_error: str | None = None
    """vLLM's own error when the judged release refuses this model dtype on this GPU."""
    dtype_fixes: tuple[str, ...] = ()
    """When the judged release refuses the dtype: the --dtype values it accepts for this model on this GPU (every
    candidate release agreeing), asked of the same resolution; empty when none or not asked."""
    dtype_undecided: str | None = None
    """Why the judged release's dtype resolution is unknown (kvdoctor did not read it); dtype and dtype_error then
    stay unknown rather than kvdoctor's own reading standing in for the release's."""
    head_dim: int | None = None
    num_attention_heads: int | None = None
    num_kv_heads: int | None = None
    num_hidden_layers: int | None = None
    hidden_size: int | None = None
    is_mla: bool | None = None
    """Multi-head latent attention (DeepSeek-V2/V3 style kv_lora_rank)."""
    kv_lora_rank: int | None = None
    """MLA: width of the latent KV vector (head_dim is it plus qk_rope_head_dim); None for other models."""
    is_hybrid: bool | None = None
    """Attention mixed with Mamba/linear-attention layers."""
    is_moe: bool | None = None
    """Mixture of experts (more than one expert per layer): vLLM's default model runner depends on it."""
    has_sinks: bool | None = None
    """Attention sinks (gpt-oss style learnable per-head bias): vLLM's selector asks has_sink."""
    is_sparse: bool | None = None
    """Sparse MLA (DeepSeek-V3.2's indexer, `index_topk`): vLLM's selector asks use_sparse."""
    sliding_window: int | None = None
    logits_soft_cap: float | None = None
    """The attention logits soft cap vLLM's model code passes to Attention (Gemma 2's attn_logit_softcapping)."""
    use_alibi: bool | None = None
    """ALiBi slopes instead of rotary positions (BLOOM, MPT, Falcon-RW, Baichuan-13B, JAIS), as vLLM's model code
    decides it from config.json."""
    quant_method: str | None = None
    """quantization_config.quant_method, e.g. 'fp8', 'awq', 'modelopt'."""
    kv_cache_quant_algo: str | None = None
    """ModelOpt/compressed-tensors KV-cache quantization declared by the checkpoint."""
    quant_config: str | None = None
    """The checkpoint's quantization config (quantization_config, compression_config or hf_quant_config.json) as
    compact JSON with sorted keys; None when it has none. Per-layer schemes are judged from it."""
    max_position_embeddings: int | None = None
    has_remote_code: bool = False
    """config.json declares auto_map (custom code); kvdoctor never runs it."""


ANY_RELEASE = "an environment (any release)"
"""VersionFacts.vllm_source of a vLLM whose release is unknown and may be old (a venv's, not an image's)."""


@dataclass(frozen=True)
class VersionFacts:
    """Versions of the serving stack, from distribution metadata (nothing is imported)."""

    vllm: str | None = None
    vllm_source: str | None = None
    """'installed', '--vllm-version', '--vllm-source', ANY_RELEASE (unknown: an environment's vLLM of any age) or
    None when unknown."""
    vllm_build: str | None = None
    """The image whose own build of vLLM runs, of unknown release (another project's, one the host chooses, a fork's):
    an option no release kvdoctor read has may be that build's own."""
    vllm_kernels: str | None = None
    """Where the dry run reads vLLM's kernels: a wheel or tree path, 'installed', or None (probe kernel)."""
    triton: str | None = None
    torch: str | None = None
    flashinfer: str | None = None
    python: str | None = None


@dataclass(frozen=True)
class ServeFacts:
    """The `vllm serve` flags and VLLM_* environment that shape the KV cache."""

    kv_cache_dtype: str = "auto"
    dtype: str = "auto"
    attention_backend: str | None = None
    """Forced backend from --attention-backend or VLLM_ATTENTION_BACKEND."""
    attention_backend_source: str | None = None
    quantization: str | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    """--gpu-memory-utilization; None when not given (the judged release's own default applies)."""
    block_size: int | None = None
    kv_cache_memory_bytes: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    cpu_offload_gb: float = 0.0
    mamba_cache_dtype: str = "auto"
    """--mamba-cache-dtype: a Mamba layer's conv state dtype ('auto': the model dtype)."""
    mamba_ssm_cache_dtype: str = "auto"
    """--mamba-ssm-cache-dtype: its temporal (SSM) state dtype ('auto': the conv state's)."""
    enforce_eager: bool = False
    speculative_config: str | None = None
    trust_remote_code: bool = False
    env: tuple[tuple[str, str], ...] = ()
    """VLLM_* variables in effect."""
    unknown_flags: tuple[str, ...] = ()
    """Flags kvdoctor does not model; kept and listed (the release's own parser judges them: serve.args_*)."""
    argv: tuple[str, ...] = ()
    """The arguments `vllm serve` would parse (launcher and VAR= prefixes removed; kvdoctor's flags added)."""


@dataclass(frozen=True)
class Facts:
    """Everything kvdoctor knows before it judges."""

    gpu: GpuFacts
    model: ModelFacts | None
    versions: VersionFacts
    serve: ServeFacts
    derived: dict[str, Any] = field(default_factory=dict)
    """Facts computed from the others (e.g. 'kv.known_dtype', 'dryrun.status')."""
    targets: TargetPackages = field(default_factory=TargetPackages)
    """The target image's packages the pack models (FlashInfer, its TRT-LLM cubins): stated, or the official
    image's value assumed (kvdoctor/model/modelled.py)."""

    def flat(self) -> dict[str, Any]:
        """Facts under rules.yaml's dotted names; unknown facts map to None."""
        gpu = self.gpu.weakest
        model = self.model or ModelFacts(source="none")
        flat: dict[str, Any] = {
            "gpu.name": gpu.name if gpu else None,
            "gpu.capability": _capability_number(gpu.capability) if gpu else None,
            "gpu.memory_gib": gpu.memory_gib if gpu else None,
            "gpu.count": len(self.gpu.devices) if self.gpu.devices else None,
            "gpu.mixed": self.gpu.mixed if self.gpu.devices else None,
            "gpu.source": self.gpu.source,
            "gpu.driver_version": self.gpu.driver_version,
            "vllm.version": self.versions.vllm,
            "triton.version": self.versions.triton,
            "torch.version": self.versions.torch,
            "flashinfer.version": self.versions.flashinfer,
            "flashinfer.installed": (self.versions.flashinfer is not None)
            if self.versions.vllm_source == "installed"
            else None,
        }
        for name, value in asdict(model).items():
            if value is None and self.model is not None and name in ABSENT_MEANS and not (
                    name == "dtype_error" and model.dtype_undecided):
                value = ABSENT_MEANS[name]  # config.json was read: a field it lacks is known to be absent
            flat[f"model.{name}"] = list(value) if isinstance(value, tuple) else value
        flat["model.dtype_fix"] = model.dtype_fixes[0] if model.dtype_fixes else None
        for name, value in asdict(self.serve).items():
            if name != "env":
                flat[f"serve.{name}"] = list(value) if isinstance(value, tuple) else value
        # No forced backend is a known fact (vLLM chooses), not an unknown one.
        flat["serve.attention_backend"] = self.serve.attention_backend or "auto"
        for name in INPUTS:
            flat[f"target.{name.replace('-', '_')}"] = self.targets.value(name)
        flat["target.packages"] = "; ".join(self.targets.describe(name) for name in INPUTS)
        for name, value in self.serve.env:
            flat[f"env.{name}"] = value
        flat.update(self.derived)
        return flat


ABSENT_MEANS: dict[str, Any] = {
    "quant_method": "none",
    "kv_cache_quant_algo": "none",
    "quant_config": "none",
    "model_type": "none",
    "sliding_window": 0,
    "logits_soft_cap": 0,
    "config_dtype": "none",
    "dtype_error": "none",
}
"""What a field missing from a config.json that was read means (None stays for 'no model read')."""


def _capability_number(capability: tuple[int, int] | None) -> float | None:
    """(8, 9) -> 8.9; minors never exceed 9, so the number orders like the tuple."""
    if capability is None:
        return None
    return capability[0] + capability[1] / 10
