"""Compile jobs for vLLM's Triton attention backend (TRITON_ATTN), as its launchers specialise them.

Three launches per layer: the KV-cache store (`triton_reshape_and_cache_flash`), unified attention as a 2D
kernel (prefill, and decode batches above the 3D threshold) and as a 3D split-KV kernel plus its
`reduce_segments` (small decode batches). The launchers pass every argument by keyword, so a job binds by
parameter name: the values below cover every parameter of these kernels in vLLM 0.20.0-0.34.0, and a
parameter kvdoctor does not know (with no default) is reported as a changed layout, never guessed.

Modelled: a causal decoder layer without sliding window, softcap, ALiBi, sinks, multimodal prefix or
fp8 query/output quantisation (none of which change the KV-cache dtype's path), contiguous
[blocks, block_size, heads, head_size] caches, and the per-tensor fp8 path (KVQuantMode.FP8_PER_TENSOR).
"""

from __future__ import annotations

from typing import Any

from kvdoctor.base.versions import release_numbers
from kvdoctor.data.kernel_layouts import launches_since
from kvdoctor.dryrun.plans import CompileJob, next_pow2

RESHAPE_FILE = "vllm/v1/attention/ops/triton_reshape_and_cache_flash.py"
UNIFIED_FILE = "vllm/v1/attention/ops/triton_unified_attention.py"
HELPERS_FILE = "vllm/v1/attention/ops/triton_attention_helpers.py"
BACKEND_FILE = "vllm/v1/attention/backends/triton_attn.py"
ATTENTION_FILES = (RESHAPE_FILE, UNIFIED_FILE, HELPERS_FILE, BACKEND_FILE)

# --kv-cache-dtype -> Triton element type of the cache the kernels see. The backend views every fp8*
# cache as current_platform.fp8_dtype(), float8_e4m3fn on CUDA (fp8_e5m2 included).
FP8_KV_DTYPES = ("fp8", "fp8_e4m3", "fp8_e5m2")
NATIVE_KV_DTYPES = {"auto": None, "float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32",
                    "float": "fp32"}  # fmt: skip
ATTENTION_KV_DTYPES = FP8_KV_DTYPES + tuple(NATIVE_KV_DTYPES)

NUM_PAR_SOFTMAX_SEGMENTS = 16  # triton_attn.py's constant, 0.20.0-0.34.0


def cache_dtype(kv_cache_dtype: str, model_dtype: str) -> str:
    """Triton element type of the KV cache for this --kv-cache-dtype and model dtype."""
    if kv_cache_dtype in FP8_KV_DTYPES:
        return "fp8e4nv"
    return NATIVE_KV_DTYPES.get(kv_cache_dtype) or model_dtype


def _job(kernel: str, role: str, source: str, signature: dict[str, str], constexprs: dict[str, Any],
         capability: tuple[int, int], num_warps: int, num_stages: int | None) -> CompileJob:  # fmt: skip
    return CompileJob(kernel, role, source, (), signature, constexprs, tuple(capability), num_warps, num_stages,
                      by_name=True)  # fmt: skip


def plan_store(kv_cache_dtype: str, dtype: str, head_dim: int, num_kv_heads: int, capability: tuple[int, int],
               block_size: int) -> CompileJob:  # fmt: skip
    """reshape_and_cache_kernel_flash as triton_reshape_and_cache_flash launches it on CUDA."""
    cache = cache_dtype(kv_cache_dtype, dtype)
    n = num_kv_heads * head_dim
    tile = min(2048, next_pow2(n))
    if capability[0] < 9:
        tile = min(512, tile)
    signature = {"key_ptr": f"*{dtype}", "value_ptr": f"*{dtype}", "key_cache_ptr": f"*{cache}",
                 "value_cache_ptr": f"*{cache}", "slot_mapping_ptr": "*i64", "k_scale": "*fp32", "v_scale": "*fp32"}  # fmt: skip
    signature |= {n_: "i64" for n_ in ("key_stride", "value_stride", "block_stride", "head_stride", "dim_stride_k",
                                        "dim_stride_v", "page_stride")}  # fmt: skip
    constexprs = {"num_heads": num_kv_heads, "head_size": head_dim, "block_size": block_size, "x": 1,
                  "USE_HEAD_MAJOR_LAYOUT": False, "FP8_KV_CACHE": kv_cache_dtype in FP8_KV_DTYPES,
                  "TILE_SIZE": tile, "INTERLEAVED_V_PACK_FACTOR": 0}  # fmt: skip
    return _job("reshape_and_cache_kernel_flash", "store", RESHAPE_FILE, signature, constexprs, capability, 16, 10)


def _unified(kv_cache_dtype: str, dtype: str, head_dim: int, num_kv_heads: int, num_q_heads: int,
             capability: tuple[int, int], block_size: int, release: tuple[int, ...], is_3d: bool) -> CompileJob:  # fmt: skip
    cache = cache_dtype(kv_cache_dtype, dtype)
    per_kv = max(1, num_q_heads // num_kv_heads)
    block_m = 16 if per_kv <= 16 else next_pow2(per_kv)
    tile = 16 if is_3d else 32  # _get_tile_size: prefill 32, decode 16 for 2-byte queries (no Gemma3 window)
    warps, stages = 4, None  # Triton's defaults: the launcher passes none on CUDA ...
    tuned_large_head = (not is_3d and head_dim == 256 and per_kv <= 16 and capability[0] == 10
                        and launches_since("triton_attn_sm10x_large_head_tuning", release))  # fmt: skip
    if tuned_large_head:  # ... except for 256-wide heads on SM10x prefill (kvdoctor/data/kernel_layouts.yaml)
        block_m, tile, warps, stages = 32, 128, 8, 2
    none_era = launches_since("triton_attn_unused_pointers_none", release)  # before: stand-in pointers
    stand_in = None if none_era else f"*{dtype}"  # 2D before 0.25.0: `out` stands in for unused pointers
    segm = "*fp32" if is_3d else stand_in
    signature: dict[str, str | None] = {
        "output_ptr": f"*{dtype}", "segm_output_ptr": segm, "segm_max_ptr": segm, "segm_expsum_ptr": segm,
        "query_ptr": f"*{dtype}", "key_cache_ptr": f"*{cache}", "value_cache_ptr": f"*{cache}", "sink_ptr": None,
        "block_tables_ptr": "*i32", "seq_lens_ptr": "*i32", "alibi_slopes_ptr": None, "qq_bias_ptr": None,
        "k_scale_cache_ptr": None if none_era else f"*{cache}", "v_scale_cache_ptr": None if none_era else f"*{cache}",
        "scale": "fp32", "q_scale": None, "k_scale": "*fp32", "v_scale": "*fp32", "out_scale": "fp32",
        "softcap": "i32", "mm_prefix_range_ptr": None, "query_start_len_ptr": "*i32", "num_seqs": "i32",
        "per_seq_causal_ptr": None, "rswa_prefix_lens_ptr": "*i32",
    }  # fmt: skip
    for name in ("block_table_stride", "query_stride_0", "query_stride_1", "output_stride_0", "output_stride_1",
                 "qq_bias_stride_0", "stride_k_cache_0", "stride_k_cache_1", "stride_k_cache_2",
                 "stride_v_cache_0", "stride_v_cache_1", "stride_v_cache_2"):  # fmt: skip
        signature[name] = "i64"
    for name in ("stride_ks_blk", "stride_ks_slot", "stride_ks_head", "stride_vs_blk", "stride_vs_slot",
                 "stride_vs_head"):  # fmt: skip
        signature[name] = None if none_era else "i64"
    constexprs = {
        "num_query_heads": num_q_heads, "num_queries_per_kv": per_kv, "BLOCK_SIZE": block_size, "TILE_SIZE": tile,
        "HEAD_SIZE": head_dim, "HEAD_SIZE_PADDED": next_pow2(head_dim), "USE_ALIBI_SLOPES": False,
        "USE_ALIBI_SQRT": False, "USE_QQ_BIAS": False, "USE_SOFTCAP": False, "USE_SINKS": False,
        "USE_MM_PREFIX": False, "MAX_MM_RANGES": 0, "SLIDING_WINDOW": 0, "stride_k_cache_3": 1,
        "stride_v_cache_3": 1, "BLOCK_Q": block_m // per_kv, "BLOCK_M": block_m,
        "NUM_SEGMENTS_PER_SEQ": NUM_PAR_SOFTMAX_SEGMENTS if is_3d else 1, "USE_FP8": False, "IS_3D": is_3d,
        "KV_QUANT_MODE": 1 if kv_cache_dtype in FP8_KV_DTYPES else 0, "Q_IS_FP8": False, "CHUNK_LOOKBACK": -1,
        "CHUNK_SIZE": -1, "USE_TD": False, "USE_TD_QO": False, "USE_CAUSAL": True, "USE_PER_SEQ_CAUSAL": False,
        "R_SWA_WINDOW": 0, "USE_R_SWA": False, "MM_PREFIX_CLAMP_SW": False,
    }  # fmt: skip
    return _bound("kernel_unified_attention", "attention_3d" if is_3d else "attention_2d", UNIFIED_FILE, signature,
                  constexprs, capability, warps, stages)  # fmt: skip


def _bound(kernel: str, role: str, source: str, signature: dict[str, str | None], constexprs: dict[str, Any],
           capability: tuple[int, int], warps: int, stages: int | None) -> CompileJob:  # fmt: skip
    """A by-name job; a None signature entry is a None argument (a constexpr None to Triton)."""
    runtime = {k: v for k, v in signature.items() if v is not None}
    nones = {k: None for k, v in signature.items() if v is None}
    return _job(kernel, role, source, runtime | {k: "constexpr" for k in nones}, constexprs | nones, capability,
                warps, stages)  # fmt: skip


def _reduce(dtype: str, head_dim: int, num_kv_heads: int, num_q_heads: int, capability: tuple[int, int]) -> CompileJob:
    per_kv = max(1, num_q_heads // num_kv_heads)
    block_m = 16 if per_kv <= 16 else next_pow2(per_kv)
    signature = {"output_ptr": f"*{dtype}", "segm_output_ptr": "*fp32", "segm_max_ptr": "*fp32",
                 "segm_expsum_ptr": "*fp32", "seq_lens_ptr": "*i32", "num_seqs": "i32", "out_scale_inv": "fp32",
                 "output_stride_0": "i64", "output_stride_1": "i64", "block_table_stride": "i64",
                 "query_start_len_ptr": "*i32"}  # fmt: skip
    constexprs = {"num_query_heads": num_q_heads, "TILE_SIZE": 16, "HEAD_SIZE": head_dim,
                  "HEAD_SIZE_PADDED": next_pow2(head_dim), "BLOCK_Q": block_m // per_kv,
                  "NUM_SEGMENTS_PER_SEQ": NUM_PAR_SOFTMAX_SEGMENTS, "USE_FP8": False}  # fmt: skip
    return _bound("reduce_segments", "attention_3d", UNIFIED_FILE, signature, constexprs, capability, 4, None)


def plan_triton_attention(kv_cache_dtype: str, dtype: str, head_dim: int, num_kv_heads: int, num_q_heads: int,
                          capability: tuple[int, int], block_size: int, vllm_version: str | None) -> list[CompileJob]:  # fmt: skip
    """The KV-cache store, unified attention 2D and 3D (with reduce_segments) for one decoder layer."""
    release = release_numbers(vllm_version)
    cap = tuple(capability)
    return [
        plan_store(kv_cache_dtype, dtype, head_dim, num_kv_heads, cap, block_size),
        _unified(kv_cache_dtype, dtype, head_dim, num_kv_heads, num_q_heads, cap, block_size, release, False),
        _unified(kv_cache_dtype, dtype, head_dim, num_kv_heads, num_q_heads, cap, block_size, release, True),
        _reduce(dtype, head_dim, num_kv_heads, num_q_heads, cap),
    ]

