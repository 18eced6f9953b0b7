"""KV-cache capacity: bytes one token costs for a KV-cache dtype, and how many tokens fit on a GPU.

Pure arithmetic on model facts; the assumptions it makes are listed in ASSUMPTIONS and shown with the matrix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvdoctor.data.turboquant import native_layers as turboquant_native_layers
from kvdoctor.data.turboquant import presets as turboquant_presets

NATIVE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
FP8_VALUES = ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc")
PER_TOKEN_HEAD = {"int8_per_token_head": 1.0, "fp8_per_token_head": 1.0, "int4_per_token_head": 0.5}
SCALE_BYTES = 4  # one fp32 scale per token and head (assumed for the *_per_token_head dtypes)
GIB = 1 << 30

ASSUMPTIONS = (
    "KV bytes/token = layers x 2 (K+V) x KV heads per rank x head_dim x bytes per element; MLA models cache one latent "
    "(kv_lora_rank + rope dims) per layer instead of K and V.",
    "auto/float16/bfloat16: 2 bytes (auto = the model dtype); fp8*: 1 byte; nvfp4*: 0.5 byte + 1 scale byte per 16 "
    "elements; int8/fp8_per_token_head: 1 byte, int4_per_token_head 0.5 byte, + a 4-byte scale per token and head.",
    "TurboQuant: one slot per head and token = KPS + ceil(D*VQB/8) + 4 bytes, rounded up to even (k8v4: KPS=D, VQB=4; "
    "_nc presets: KPS=ceil(D*key_bits/8)+2); the first and last 2 attention layers of dense models stay in the model dtype.",
    "Tokens that fit = GPU memory x --gpu-memory-utilization - weights per rank, divided by KV bytes/token, rounded down "
    "to whole 16-token blocks; activations, CUDA graphs and the sampler are not subtracted, so vLLM reports somewhat fewer.",
    "Every layer is counted as attention: sliding-window layers and the Mamba layers of hybrid models are not "
    "modelled, so capacity for such models is a lower bound.",
    "Values with no known layout (octave_*, ultraquant_4bit, *_ds_mla on non-MLA models) get no capacity.",
)


@dataclass(frozen=True)
class ModelShape:
    """What KV sizing needs from the model's facts."""

    num_layers: int
    num_kv_heads: int
    head_dim: int
    dtype: str
    """Effective model dtype ('bfloat16', 'float16', 'float32')."""
    is_mla: bool = False


@dataclass(frozen=True)
class Capacity:
    """KV-cache capacity of one (GPU, KV-cache dtype) cell."""

    kv_bytes_per_token: float
    """All layers, one tensor-parallel rank."""
    tokens: int
    """Tokens whose KV cache fits on one GPU; 0 when the weights alone do not fit."""
    max_concurrent_seqs: float | None
    """tokens / max_model_len, None when no max_model_len is known."""
    free_bytes: int
    """Bytes left for the KV cache after the weights (negative: the weights do not fit)."""


def element_bytes(kv_cache_dtype: str, model_dtype: str) -> float | None:
    """Bytes per cached element for non-TurboQuant dtypes (scales included), None when unknown."""
    if kv_cache_dtype == "auto":
        return float(NATIVE_BYTES.get(model_dtype, 2) if model_dtype != "float32" else 2)
    if kv_cache_dtype in ("float16", "bfloat16"):
        return 2.0
    if kv_cache_dtype in FP8_VALUES:
        return 1.0
    if kv_cache_dtype.startswith("nvfp4") and not kv_cache_dtype.endswith("_mla"):
        return 0.5 + 1 / 16
    return None


def turboquant_slot_bytes(kv_cache_dtype: str, head_dim: int) -> int:
    """Bytes of one TurboQuant slot (key + value of one head, one token)."""
    preset = turboquant_presets()[kv_cache_dtype]
    key_bits, value_bits = preset.key_bits, preset.value_bits
    kps = head_dim if key_bits == 8 else math.ceil(head_dim * key_bits / 8) + 2
    slot = kps + math.ceil(head_dim * value_bits / 8) + 4
    return slot + (slot % 2)


def kv_bytes_per_token(shape: ModelShape, kv_cache_dtype: str) -> float | None:
    """KV-cache bytes one token costs across all layers of one rank, or None when the layout is unknown."""
    native = NATIVE_BYTES.get(shape.dtype, 2) if shape.dtype != "float32" else 2
    heads, dim, layers = shape.num_kv_heads, shape.head_dim, shape.num_layers
    if shape.is_mla:
        if kv_cache_dtype == "fp8_ds_mla":
            return float(layers * 656)  # 512 fp8 latent + 4 fp32 scales + 64 bf16 rope values
        per = element_bytes(kv_cache_dtype, shape.dtype)
        return None if per is None or kv_cache_dtype.startswith("turboquant_") else layers * dim * per
    if kv_cache_dtype in turboquant_presets():
        native_layers = min(turboquant_native_layers(), layers)
        slot = turboquant_slot_bytes(kv_cache_dtype, dim)
        return float((layers - native_layers) * heads * slot + native_layers * 2 * heads * dim * native)
    if kv_cache_dtype in PER_TOKEN_HEAD:
        return layers * 2 * heads * (dim * PER_TOKEN_HEAD[kv_cache_dtype] + SCALE_BYTES)
    per = element_bytes(kv_cache_dtype, shape.dtype)
    return None if per is None else layers * 2 * heads * dim * per


def capacity(
    shape: ModelShape,
    kv_cache_dtype: str,
    gpu_memory_gib: float,
    weights_bytes: int,
    gpu_memory_utilization: float = 0.9,
    max_model_len: int | None = None,
    tensor_parallel_size: int = 1,
    block_size: int = 16,
) -> Capacity | None:
    """Capacity of one GPU (one rank) for this dtype; None when the dtype's layout is unknown."""
    per_rank = ModelShape(shape.num_layers, max(1, shape.num_kv_heads // tensor_parallel_size), shape.head_dim,
                          shape.dtype, shape.is_mla)  # fmt: skip
    per_token = kv_bytes_per_token(per_rank, kv_cache_dtype)
    if per_token is None:
        return None
    free = int(gpu_memory_gib * GIB * gpu_memory_utilization) - weights_bytes // tensor_parallel_size
    tokens = max(0, int(free // per_token) // block_size * block_size)
    seqs = tokens / max_model_len if max_model_len else None
    return Capacity(per_token, tokens, seqs, free)
