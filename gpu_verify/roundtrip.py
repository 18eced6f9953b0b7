"""Key round-trip error of TurboQuant k8v4: keys through vLLM's real store kernel, read back two ways.

The bytes are decoded in torch (e4nv: torch.float8_e4m3fn; e4b15: the byte is bits 14..7 of an fp16 with
bias 15, which is how Triton's convert_float16_to_fp8e4b15 builds it) and by vLLM's own
_tq_full_dequant_kv with the same FP8_E4B15 flag; both must agree.
"""

from __future__ import annotations

from typing import Any

import torch

from gpu_verify.launch import Workspace, dequant_args, launch, store_args
from kvdoctor.dryrun.plans import plan_turboquant

E4B15_MAX = 1.75  # Triton clamps |x| at fp16 0x3F00 before the conversion


def decode_e4b15(raw: torch.Tensor) -> torch.Tensor:
    """fp8e4b15 bytes -> float32: sign bit 7, then bits 6..0 are fp16 bits 14..7."""
    bits = ((raw.to(torch.int32) & 0x7F) << 7) | ((raw.to(torch.int32) & 0x80) << 8)
    return bits.to(torch.int16).view(torch.float16).float()


def decode_e4nv(raw: torch.Tensor) -> torch.Tensor:
    return raw.contiguous().view(torch.float8_e4m3fn).float()


def _workspace(job, tokens: int) -> Workspace:
    c = job.constexprs
    blocks = -(-tokens // c["BLOCK_SIZE"]) + 1
    cache = torch.zeros(blocks, c["BLOCK_SIZE"], c["H"], c["stride_cache_head"], dtype=torch.uint8, device="cuda")
    table = torch.arange(1, blocks, dtype=torch.int32, device="cuda").unsqueeze(0).contiguous()
    return Workspace(cache, table, torch.tensor([tokens], dtype=torch.int32, device="cuda"))


def measure(kernels, dtype: str, fp8_e4b15: int, scales: list[float], tokens: int = 4096, heads: int = 8,
            head_dim: int = 128, seed: int = 0) -> list[dict[str, Any]]:  # fmt: skip
    """Relative key error ||k_hat - k|| / ||k|| for N(0, s) keys, per scale, on one fp8 path."""
    cap = (8, 0) if fp8_e4b15 else (9, 0)  # the plan only uses capability to pick FP8_E4B15
    store_job, _, dequant_job = plan_turboquant("turboquant_k8v4", dtype, head_dim, heads, cap, 16)
    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    rows = []
    for scale in scales:
        torch.manual_seed(seed)
        ws = _workspace(store_job, tokens)
        keys = (torch.randn(tokens * heads, head_dim, device="cuda") * scale).to(torch_dtype)
        args, grid = store_args(store_job, ws, keys=keys)
        result = launch(kernels.store._tq_fused_store_fp8, store_job, args, grid, str(kernels.path(store_job.source_file)))
        if result["status"] != "passed":
            rows.append({"scale": scale, "store": result})
            continue
        # cache [blocks, bs, H, slot]: token t lives at block table[t // bs], position t % bs
        raw = ws.cache[1:].reshape(-1, heads, ws.cache.shape[-1])[:tokens, :, :head_dim]
        decoded = decode_e4b15(raw) if fp8_e4b15 else decode_e4nv(raw)
        dargs, dgrid = dequant_args(dequant_job, ws)
        dres = launch(kernels.decode._tq_full_dequant_kv, dequant_job, dargs, dgrid,
                      str(kernels.path(dequant_job.source_file)))  # fmt: skip
        k_ref = keys.float().reshape(tokens, heads, head_dim)
        k_vllm = dargs["K_out_ptr"][0].permute(1, 0, 2).float()  # [tokens, H, D]
        rows.append({
            "scale": scale,
            "rel_error": round(float((decoded - k_ref).norm() / k_ref.norm()), 5),
            "rel_error_vllm_dequant": round(float((k_vllm - k_ref).norm() / k_ref.norm()), 5),
            "max_abs_error": round(float((decoded - k_ref).abs().max()), 5),
            "saturated_fraction": round(float((k_ref.abs() > E4B15_MAX).float().mean()), 5) if fp8_e4b15 else 0.0,
            "torch_vs_vllm_decode_max_diff": float((decoded.half().float() - k_vllm).abs().max()),
            "dequant": dres["status"],
        })  # fmt: skip
    return rows
