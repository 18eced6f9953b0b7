"""Compile jobs for vLLM's Triton MLA backend (TRITON_MLA) decode, as TritonMLAImpl.forward_mqa launches them.

forward_mqa calls `decode_attention_fwd(q, kv_c_and_k_pe_cache, kv_c_cache, o, lse, ..., is_mla=True)` from
vllm/v1/attention/ops/triton_decode_attention.py: split-KV stage 1 over the latent cache, then
`_fwd_kernel_stage2` merges the splits. Stage 1 is `_fwd_grouped_kernel_stage1` when a rank has more than one
query head per latent head (every MLA model below TP = num_heads), else `_fwd_kernel_stage1`. The launchers
pass the constexprs by keyword and the runtime arguments by position; the jobs bind by parameter name, so
the page strides vLLM added in 0.25.0 and 0.34.0's SLIDING_WINDOW (default 0) are bound where the release
has them, and a parameter kvdoctor does not know is a changed layout, never guessed.

Not Triton, so not compiled: the KV-cache store (concat_and_cache_mla is a CUDA op) and prefill
(forward_mha runs on FlashAttention / FlashInfer / cuDNN prefill backends).

Values read from vLLM 0.20.0-0.34.0 (triton_mla.py, triton_decode_attention.py, mla_attention.py):
- q = cat(ql_nope, q_pe) in the model dtype (TritonMLAImpl sets supports_quant_query_input = False for an
  fp8 cache: no fp8 queries), o and lse in the model dtype, attn_logits float32 [B, H, splits, Lv + 1];
- the cache is viewed as current_platform.fp8_dtype() (float8_e4m3fn on CUDA) for fp8/fp8_e4m3, and
  k_scale = v_scale = layer._k_scale (float32 tensor);
- grouped stage 1: BLOCK_DMODEL 512 / BLOCK_DPE 64 for Lk 576 (256/32 for 288, else powers of two),
  BLOCK_N 32, BLOCK_H 16, num_warps 4, num_stages 2 (1 when BLOCK_DMODEL >= 1024);
  plain stage 1: BLOCK_DMODEL next_pow2(Lk), BLOCK_N 64, num_warps 4, num_stages 2;
  stage 2: BLOCK_DV next_pow2(Lv), num_warps 4, num_stages 2.
NUM_KV_SPLITS is a constexpr that follows the batch's longest sequence (a power of two, 1 below 1024 tokens,
capped at 2x the SM count); it shapes the grid and the loop bounds, not a dtype. The jobs use 1, what the
first decode steps of short sequences (and vLLM's start-up CUDA-graph capture) compile.
"""

from __future__ import annotations

from kvdoctor.dryrun.plans import CompileJob, next_pow2

DECODE_ATTENTION_FILE = "vllm/v1/attention/ops/triton_decode_attention.py"
MLA_BACKEND_FILE = "vllm/v1/attention/backends/mla/triton_mla.py"
MLA_FILES = (DECODE_ATTENTION_FILE, MLA_BACKEND_FILE)

# --kv-cache-dtype values TritonMLABackend.supported_kv_cache_dtypes lists (0.20.0-0.34.0): fp8_e5m2 is not one
MLA_FP8_KV_DTYPES = ("fp8", "fp8_e4m3")
MLA_NATIVE_KV_DTYPES = {"auto": None, "float16": "fp16", "bfloat16": "bf16"}
MLA_KV_DTYPES = MLA_FP8_KV_DTYPES + tuple(MLA_NATIVE_KV_DTYPES)
NUM_KV_SPLITS = 1


def mla_cache_dtype(kv_cache_dtype: str, model_dtype: str) -> str:
    """Triton element type of the latent cache the decode kernels read."""
    if kv_cache_dtype in MLA_FP8_KV_DTYPES:
        return "fp8e4nv"
    return MLA_NATIVE_KV_DTYPES.get(kv_cache_dtype) or model_dtype


def _job(kernel: str, role: str, signature: dict[str, str], constexprs: dict, capability: tuple[int, int],
         num_warps: int, num_stages: int) -> CompileJob:  # fmt: skip
    return CompileJob(kernel, role, DECODE_ATTENTION_FILE, (), signature | {k: "constexpr" for k in constexprs},
                      constexprs, tuple(capability), num_warps, num_stages, by_name=True)  # fmt: skip


def _grouped_blocks(lk: int, lv: int) -> tuple[int, int]:
    """(BLOCK_DMODEL, BLOCK_DPE) as _decode_grouped_att_m_fwd sets them for MLA on CUDA."""
    if lk == 576:
        return 512, 64
    if lk == 288:
        return 256, 32
    return next_pow2(lv), (next_pow2(lk - lv) if lk > lv else 0)


def plan_triton_mla(kv_cache_dtype: str, dtype: str, kv_lora_rank: int, rope_dim: int, num_q_heads: int,
                    capability: tuple[int, int], block_size: int) -> list[CompileJob]:  # fmt: skip
    """Stage 1 (grouped or plain) and stage 2 of the MLA decode for one layer on one rank."""
    cache = mla_cache_dtype(kv_cache_dtype, dtype)
    lk, lv = kv_lora_rank + rope_dim, kv_lora_rank
    cap = tuple(capability)
    strides = ("stride_req_to_tokens_b", "stride_qbs", "stride_qh", "stride_buf_kpbs", "stride_buf_kbs",
               "stride_buf_kh", "stride_buf_vpbs", "stride_buf_vbs", "stride_buf_vh", "stride_mid_ob",
               "stride_mid_oh", "stride_mid_os")  # fmt: skip
    signature = {"Q": f"*{dtype}", "K_Buffer": f"*{cache}", "V_Buffer": f"*{cache}", "sm_scale": "fp32",
                 "Req_to_tokens": "*i32", "B_Seqlen": "*i32", "Att_Out": "*fp32", "k_scale": "*fp32",
                 "v_scale": "*fp32"} | {name: "i32" for name in strides}  # fmt: skip
    common = {"BLOCK_DV": next_pow2(lv), "NUM_KV_SPLITS": NUM_KV_SPLITS, "PAGE_SIZE": block_size,
              "logit_cap": 0.0, "Lk": lk, "Lv": lv}  # fmt: skip
    if num_q_heads > 1:  # kv_group_num = query heads per rank // the cache's one latent head
        block_dmodel, block_dpe = _grouped_blocks(lk, lv)
        constexprs = common | {"kv_group_num": num_q_heads, "q_head_num": num_q_heads, "BLOCK_DMODEL": block_dmodel,
                               "BLOCK_DPE": block_dpe, "BLOCK_N": 32, "BLOCK_H": 16, "IS_MLA": True}  # fmt: skip
        stage1 = _job("_fwd_grouped_kernel_stage1", "decode", signature, constexprs, cap, 4,
                      1 if block_dmodel >= 1024 else 2)  # fmt: skip
    else:
        constexprs = common | {"kv_group_num": 1, "BLOCK_DMODEL": next_pow2(lk), "BLOCK_N": 64}
        stage1 = _job("_fwd_kernel_stage1", "decode", signature, constexprs, cap, 4, 2)
    signature = {"Mid_O": "*fp32", "o": f"*{dtype}", "lse": f"*{dtype}", "B_Seqlen": "*i32"}
    signature |= {name: "i32" for name in ("stride_mid_ob", "stride_mid_oh", "stride_mid_os", "stride_obs",
                                            "stride_oh", "stride_lse_bs")}  # fmt: skip
    constexprs = {"NUM_KV_SPLITS": NUM_KV_SPLITS, "BLOCK_DV": next_pow2(lv), "Lv": lv}
    stage2 = _job("_fwd_kernel_stage2", "reduce", signature, constexprs, cap, 4, 2)
    return [stage1, stage2]

