"""Launch one dry-run CompileJob on the GPU with real tensors: same kernel, dtypes and constexprs.

The tensors follow vLLM's launchers: keys/values [N*H, D], a uint8 cache [blocks, block_size, H, slot],
int64 slot mapping, int32 block table and sequence lengths. A plan's decode kernels read the cache its store
kernel has just written (or random bytes when the store did not launch).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import torch

from kvdoctor.dryrun.classify import describe_failure
from kvdoctor.dryrun.plans import CompileJob

TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "u8": torch.uint8,
                "i64": torch.int64, "i32": torch.int32}  # fmt: skip
TOKENS = 48  # three cache blocks of 16


@dataclass
class Workspace:
    """Tensors a plan's kernels share: the cache the store writes and the decode kernels read."""

    cache: torch.Tensor
    block_table: torch.Tensor
    seq_lens: torch.Tensor


def new_workspace(job: CompileJob, tokens: int = TOKENS, seed: int = 0) -> Workspace:
    c = job.constexprs
    block_size = c["BLOCK_SIZE"]
    heads = c.get("H", c.get("NUM_KV_HEADS"))
    slot = c["stride_cache_head"] if "stride_cache_head" in c else None
    if slot is None:
        raise ValueError("a plan's first job must be its store kernel")
    blocks = -(-tokens // block_size) + 1
    gen = torch.Generator(device="cuda").manual_seed(seed)
    cache = torch.randint(0, 256, (blocks, block_size, heads, slot), dtype=torch.uint8, device="cuda", generator=gen)
    # block 0 left unused so a wrong block table shows up
    table = torch.arange(1, blocks, dtype=torch.int32, device="cuda").unsqueeze(0).contiguous()
    seq_lens = torch.tensor([tokens], dtype=torch.int32, device="cuda")
    return Workspace(cache, table, seq_lens)


def _pointer(sig: str) -> torch.dtype:
    return TORCH_DTYPES[sig.lstrip("*")]


def _rand(shape: tuple[int, ...], dtype: torch.dtype, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(shape, device="cuda", dtype=torch.float32) * scale).to(dtype)


def store_args(job: CompileJob, ws: Workspace, keys: torch.Tensor | None = None) -> tuple[dict[str, Any], tuple]:
    """Runtime arguments and grid of a store kernel (fp8 or MSE) for ws."""
    c, sig = job.constexprs, job.signature
    heads, dim = c["H"], c["D"]
    tokens = int(ws.seq_lens[0])
    nh = tokens * heads
    slots = (ws.block_table[0].repeat_interleave(c["BLOCK_SIZE"]).long() * c["BLOCK_SIZE"]
             + torch.arange(c["BLOCK_SIZE"], device="cuda").repeat(ws.block_table.shape[1]))[:tokens].contiguous()  # fmt: skip
    flat = ws.cache.view(-1)
    if job.kernel == "_tq_fused_store_fp8":
        key = keys if keys is not None else _rand((nh, dim), _pointer(sig["Key_ptr"]))
        args = {"Key_ptr": key.reshape(nh, dim).contiguous(), "Value_ptr": _rand((nh, dim), _pointer(sig["Value_ptr"])),
                "KV_cache_ptr": flat, "Slot_mapping_ptr": slots}  # fmt: skip
    else:
        y = torch.nn.functional.normalize(torch.randn(nh, dim, device="cuda"), dim=1)
        mids = torch.sort(torch.randn(c["N_CENTROIDS"] - 1, device="cuda") * 0.1).values
        args = {"Y_ptr": y, "Norms_ptr": torch.rand(nh, device="cuda") + 0.5, "Value_ptr": _rand((nh, dim), torch.float32),
                "Midpoints_ptr": mids, "KV_cache_ptr": flat, "Slot_mapping_ptr": slots}  # fmt: skip
    return args, (nh,)


def _stage1_args(job: CompileJob, ws: Workspace) -> tuple[dict[str, Any], tuple]:
    c, sig = job.constexprs, job.signature
    batch, hq = 1, c["NUM_KV_HEADS"] * c["KV_GROUP_SIZE"]
    q = _rand((batch, hq, c["HEAD_DIM"]), _pointer(sig["Q_rot_ptr"]))
    mid = torch.empty(batch, hq, c["NUM_KV_SPLITS"], c["HEAD_DIM"] + 1, dtype=torch.float32, device="cuda")
    centroids = torch.sort(torch.randn(2 ** c["MSE_BITS"], device="cuda") * 0.1).values
    args = {"Q_rot_ptr": q, "KV_cache_ptr": ws.cache, "Block_table_ptr": ws.block_table, "Seq_lens_ptr": ws.seq_lens,
            "Centroids_ptr": centroids, "Mid_o_ptr": mid, "stride_qb": q.stride(0), "stride_qh": q.stride(1),
            "stride_cache_block": ws.cache.stride(0), "stride_cache_pos": ws.cache.stride(1),
            "stride_cache_head": ws.cache.stride(2), "stride_bt_b": ws.block_table.stride(0),
            "stride_mid_b": mid.stride(0), "stride_mid_h": mid.stride(1), "stride_mid_s": mid.stride(2)}  # fmt: skip
    return args, (batch, hq, c["NUM_KV_SPLITS"])


def dequant_args(job: CompileJob, ws: Workspace) -> tuple[dict[str, Any], tuple]:
    """Runtime arguments and grid of _tq_full_dequant_kv for ws; K_out/V_out are [1, H, tokens, D] fp16."""
    c = job.constexprs
    heads, dim, tokens = c["NUM_KV_HEADS"], c["HEAD_DIM"], int(ws.seq_lens[0])
    k_out = torch.zeros(1, heads, tokens, dim, dtype=torch.float16, device="cuda")
    v_out = torch.zeros_like(k_out)
    centroids = torch.sort(torch.randn(max(2 ** c["MSE_BITS"], 1), device="cuda") * 0.1).values
    args = {"KV_cache_ptr": ws.cache, "Block_table_ptr": ws.block_table, "Centroids_ptr": centroids,
            "K_out_ptr": k_out, "V_out_ptr": v_out, "stride_ko_b": k_out.stride(0), "stride_ko_h": k_out.stride(1),
            "stride_ko_s": k_out.stride(2), "stride_vo_b": v_out.stride(0), "stride_vo_h": v_out.stride(1),
            "stride_vo_s": v_out.stride(2), "stride_cache_block": ws.cache.stride(0),
            "stride_cache_pos": ws.cache.stride(1), "stride_cache_head": ws.cache.stride(2),
            "stride_bt_b": ws.block_table.stride(0)}  # fmt: skip
    return args, (tokens, heads)


def _probe_args(job: CompileJob) -> tuple[dict[str, Any], tuple]:
    block = job.constexprs["BLOCK"]
    return {"In_ptr": _rand((block,), _pointer(job.signature["In_ptr"])),
            "Out_ptr": torch.zeros(block, dtype=torch.uint8, device="cuda")}, (1,)  # fmt: skip


def job_args(job: CompileJob, ws: Workspace | None) -> tuple[dict[str, Any], tuple]:
    if job.role == "probe":
        return _probe_args(job)
    if job.role == "store":
        return store_args(job, ws)
    if job.kernel == "_tq_decode_stage1":
        return _stage1_args(job, ws)
    return dequant_args(job, ws)


def check_signature(job: CompileJob, args: dict[str, Any]) -> None:
    """The tensors carry exactly the dtypes the dry run compiled for (a runner bug otherwise)."""
    for name, sig in job.signature.items():
        if sig == "constexpr":
            continue
        value = args[name]
        if sig.startswith("*"):
            assert value.dtype == _pointer(sig), f"{job.kernel}.{name}: {value.dtype} but compiled as {sig}"
        else:
            assert isinstance(value, int), f"{job.kernel}.{name}: {value!r} but compiled as {sig}"
    for name, value in job.constexprs.items():
        if name in args:
            assert args[name] == value, f"{job.kernel}.{name}: launch {args[name]} != dry-run constexpr {value}"


def launch(fn: Any, job: CompileJob, args: dict[str, Any], grid: tuple, kernel_path: str) -> dict[str, Any]:
    """Compile (JIT, for this GPU) and run fn with args and the job's constexprs; status and failure."""
    import triton

    check_signature(job, args)
    options = {"num_warps": job.num_warps}
    if job.num_stages is not None:
        options["num_stages"] = job.num_stages
    consts = {k: v for k, v in job.constexprs.items() if k not in args}
    started = time.perf_counter()
    try:
        fn[grid](**args, **consts, **options)
        torch.cuda.synchronize()
        status, failure = "passed", None
    except Exception as exc:
        status = "failed"
        failure = describe_failure(exc, kernel_path, job.source_file, os.path.dirname(triton.__file__))
    return {"status": status, "failure": failure, "seconds": round(time.perf_counter() - started, 3)}
