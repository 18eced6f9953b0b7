"""Launch vLLM's Triton attention kernels on a real GPU exactly as kvdoctor's dry run plans them.

    python3 -m gpu_verify.triton_attention --trees .gpu-carry/attn --out $OUT/triton-attention.json

For each vLLM tree, KV-cache dtype and model dtype: the dry run (kvdoctor's compiler child, target = this
GPU's capability and sm_80) and a real launch of the same jobs (kvdoctor.dryrun.plans_attention) with CUDA
tensors bound by parameter name: the KV-cache store writes the cache, unified attention 2D reads it for a
causal prefill, the 3D split kernel plus reduce_segments for one decode token. Outputs are compared with a
float32 reference computed from the cache as stored, so a wrong constexpr or argument shows as an error.
"""

from __future__ import annotations

import argparse
import datetime
import inspect
import json
import math
import platform
import sys
import time
from pathlib import Path
from typing import Any

import torch

from kvdoctor.dryrun.plans_attention import NUM_PAR_SOFTMAX_SEGMENTS, plan_triton_attention

TORCH = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp8e4nv": torch.float8_e4m3fn}
HEAD_DIM, KV_HEADS, Q_HEADS, BLOCK = 128, 2, 16, 16  # Qwen2.5-3B-Instruct
TOKENS = 40


def _load(tree: Path):
    import importlib.util

    import triton
    import triton.language as tl

    from kvdoctor.dryrun import stand_ins

    stand_ins.install(triton, tl)
    modules = {}
    for rel in ("vllm/v1/attention/ops/triton_attention_helpers.py", "vllm/v1/attention/ops/triton_unified_attention.py",
                "vllm/v1/attention/ops/triton_reshape_and_cache_flash.py"):  # fmt: skip
        name = rel[:-3].replace("/", ".")
        spec = importlib.util.spec_from_file_location(name, tree / rel)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        modules[rel.rsplit("/", 1)[-1][:-3]] = module
    return modules


def _bind(fn, job, values: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments for fn: constexprs from the job, runtime values from `values`, by parameter name."""
    kwargs = {}
    for name, param in inspect.signature(fn.fn).parameters.items():
        if name in job.constexprs:
            kwargs[name] = job.constexprs[name]
        elif name in job.signature:
            kwargs[name] = values[name]
        elif param.default is inspect.Parameter.empty:
            raise KeyError(f"{job.kernel}: no value for {name}")
    return kwargs


def _check_dtype(job, values):
    for name, sig in job.signature.items():
        if sig.startswith("*") and name in values and values[name] is not None:
            want = TORCH.get(sig[1:], {"i32": torch.int32, "i64": torch.int64}.get(sig[1:]))
            assert values[name].dtype == want, f"{job.kernel}.{name}: {values[name].dtype} vs {sig}"


def _reference(q, k, v, causal_from: int) -> torch.Tensor:
    """Causal attention in float32: q [Tq, Hq, D] are the last Tq of k/v's T positions."""
    tq, hq, d = q.shape
    t = k.shape[0]
    per_kv = hq // k.shape[1]
    kk = k.float().repeat_interleave(per_kv, dim=1)
    vv = v.float().repeat_interleave(per_kv, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q.float(), kk) / math.sqrt(d)
    pos_q = torch.arange(causal_from, causal_from + tq, device=q.device)[:, None]
    scores = scores.masked_fill(torch.arange(t, device=q.device)[None, :] > pos_q, float("-inf"))
    return torch.einsum("hqk,khd->qhd", scores.softmax(-1), vv)


def run_case(modules, version: str, kv: str, dtype: str, cap: tuple[int, int]) -> dict[str, Any]:
    import triton

    jobs = plan_triton_attention(kv, {"bfloat16": "bf16", "float16": "fp16"}[dtype], HEAD_DIM, KV_HEADS, Q_HEADS,
                                 cap, BLOCK, version)  # fmt: skip
    store, attn2d, attn3d, reduce = jobs
    mdt, cdt = TORCH[store.signature["key_ptr"][1:]], TORCH[store.signature["key_cache_ptr"][1:]]
    dev = "cuda"
    blocks = TOKENS // BLOCK + 2
    key = torch.randn(TOKENS, KV_HEADS, HEAD_DIM, device=dev).to(mdt)
    value = torch.randn(TOKENS, KV_HEADS, HEAD_DIM, device=dev).to(mdt)
    kc = torch.zeros(blocks, BLOCK, KV_HEADS, HEAD_DIM, device=dev, dtype=torch.uint8).view(cdt) if cdt.itemsize == 1 \
        else torch.zeros(blocks, BLOCK, KV_HEADS, HEAD_DIM, device=dev, dtype=cdt)
    vc = torch.zeros_like(kc)
    table = torch.arange(1, blocks, dtype=torch.int32, device=dev)[None, :].contiguous()  # block 0 unused
    slots = (table[0].long().repeat_interleave(BLOCK) * BLOCK + torch.arange(BLOCK, device=dev).repeat(blocks - 1))[:TOKENS].contiguous()
    one = torch.ones(1, dtype=torch.float32, device=dev)
    results: dict[str, Any] = {"version": version, "kv_cache_dtype": kv, "model_dtype": dtype,
                               "target": f"sm_{cap[0]}{cap[1]}", "launches": {}}  # fmt: skip

    def launch(job, fn, values, grid, check=None):
        started = time.perf_counter()
        try:
            _check_dtype(job, values)
            kwargs = _bind(fn, job, values)
            options = {"num_warps": job.num_warps} | ({"num_stages": job.num_stages} if job.num_stages else {})
            fn[grid](**kwargs, **options)
            torch.cuda.synchronize()
            entry = {"status": "passed"}
            if check is not None:
                entry["max_abs_error"] = float(check())
        except Exception as exc:  # noqa: BLE001 - a failed launch is a result
            entry = {"status": "failed", "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        entry["seconds"] = round(time.perf_counter() - started, 3)
        results["launches"][f"{job.kernel}/{job.role}"] = entry
        return entry["status"] == "passed"

    store_values = {"key_ptr": key, "value_ptr": value, "key_cache_ptr": kc, "value_cache_ptr": vc,
                    "slot_mapping_ptr": slots, "k_scale": one, "v_scale": one, "key_stride": key.stride(0),
                    "value_stride": value.stride(0), "block_stride": kc.stride(0), "head_stride": kc.stride(2),
                    "dim_stride_k": 0, "dim_stride_v": 0, "page_stride": kc.stride(1)}  # fmt: skip

    def store_error():
        got = kc.view(-1, KV_HEADS, HEAD_DIM)[slots].float()
        return (got - key.to(cdt).float()).abs().max()

    grid = (TOKENS, triton.cdiv(KV_HEADS * HEAD_DIM, store.constexprs["TILE_SIZE"]))
    if not launch(store, modules["triton_reshape_and_cache_flash"].reshape_and_cache_kernel_flash, store_values,
                  grid, store_error):  # fmt: skip
        return results
    k_stored = kc.view(-1, KV_HEADS, HEAD_DIM)[slots]
    v_stored = vc.view(-1, KV_HEADS, HEAD_DIM)[slots]
    fn = modules["triton_unified_attention"].kernel_unified_attention

    def attn_values(q, out, cu, seq, segm=None):
        values = {"output_ptr": out, "query_ptr": q, "key_cache_ptr": kc, "value_cache_ptr": vc, "block_tables_ptr": table,
                  "seq_lens_ptr": seq, "scale": 1.0 / math.sqrt(HEAD_DIM), "k_scale": one, "v_scale": one,
                  "out_scale": 1.0, "softcap": 0, "block_table_stride": table.stride(0), "query_stride_0": q.stride(0),
                  "query_stride_1": q.stride(1), "output_stride_0": out.stride(0), "output_stride_1": out.stride(1),
                  "qq_bias_stride_0": 0, "stride_k_cache_0": kc.stride(0), "stride_k_cache_1": kc.stride(1),
                  "stride_k_cache_2": kc.stride(2), "stride_v_cache_0": vc.stride(0), "stride_v_cache_1": vc.stride(1),
                  "stride_v_cache_2": vc.stride(2), "query_start_len_ptr": cu, "num_seqs": 1,
                  "rswa_prefix_lens_ptr": seq}  # fmt: skip
        for name in ("stride_ks_blk", "stride_ks_slot", "stride_ks_head", "stride_vs_blk", "stride_vs_slot", "stride_vs_head"):
            values[name] = 0
        stand_in = segm or (out, out, out)
        values |= {"segm_output_ptr": stand_in[0], "segm_max_ptr": stand_in[1], "segm_expsum_ptr": stand_in[2],
                   "k_scale_cache_ptr": kc, "v_scale_cache_ptr": vc}  # fmt: skip
        return {k: v for k, v in values.items() if attn_job_wants(k)}

    seq = torch.tensor([TOKENS], dtype=torch.int32, device=dev)
    # 2D: causal prefill of all TOKENS
    q = torch.randn(TOKENS, Q_HEADS, HEAD_DIM, device=dev).to(mdt)
    out = torch.zeros_like(q)
    cu = torch.tensor([0, TOKENS], dtype=torch.int32, device=dev)
    attn_job_wants = lambda name: attn2d.signature.get(name) not in (None, "constexpr")  # noqa: E731
    block_q = attn2d.constexprs["BLOCK_Q"]
    launch(attn2d, fn, attn_values(q, out, cu, seq), (TOKENS // block_q + 1, KV_HEADS),
           lambda: (out.float() - _reference(q, k_stored, v_stored, 0)).abs().max())  # fmt: skip
    # 3D: one decode token attending to all TOKENS, then reduce_segments
    q1 = torch.randn(1, Q_HEADS, HEAD_DIM, device=dev).to(mdt)
    out1 = torch.zeros_like(q1)
    cu1 = torch.tensor([0, 1], dtype=torch.int32, device=dev)
    pad = attn3d.constexprs["HEAD_SIZE_PADDED"]
    segm = (torch.empty(1, Q_HEADS, NUM_PAR_SOFTMAX_SEGMENTS, pad, device=dev),
            torch.empty(1, Q_HEADS, NUM_PAR_SOFTMAX_SEGMENTS, device=dev),
            torch.empty(1, Q_HEADS, NUM_PAR_SOFTMAX_SEGMENTS, device=dev))  # fmt: skip
    attn_job_wants = lambda name: attn3d.signature.get(name) not in (None, "constexpr")  # noqa: E731
    if launch(attn3d, fn, attn_values(q1, out1, cu1, seq, segm), (1 // attn3d.constexprs["BLOCK_Q"] + 1, KV_HEADS,
              NUM_PAR_SOFTMAX_SEGMENTS)):  # fmt: skip
        values = {"output_ptr": out1, "segm_output_ptr": segm[0], "segm_max_ptr": segm[1], "segm_expsum_ptr": segm[2],
                  "seq_lens_ptr": seq, "num_seqs": 1, "out_scale_inv": 1.0, "output_stride_0": out1.stride(0),
                  "output_stride_1": out1.stride(1), "block_table_stride": table.stride(0), "query_start_len_ptr": cu1}  # fmt: skip
        launch(reduce, fn_reduce(modules), values, (1, Q_HEADS),
               lambda: (out1.float() - _reference(q1, k_stored, v_stored, TOKENS - 1)).abs().max())  # fmt: skip
    return results


def fn_reduce(modules):
    return modules["triton_unified_attention"].reduce_segments


def dry_runs(trees: dict[str, Path], cases, caps) -> list[dict[str, Any]]:
    from kvdoctor.dryrun import DryRunRequest, run_dry_runs

    requests = [DryRunRequest(kv, dtype, HEAD_DIM, KV_HEADS, cap, BLOCK, vllm_source=str(trees[v]), backend="TRITON_ATTN",
                              num_q_heads=Q_HEADS) for v in trees for kv, dtype in cases for cap in caps]  # fmt: skip
    reports = run_dry_runs(requests, use_cache=False, timeout_s=300)
    return [{"version": r.vllm_version, "kv_cache_dtype": r.request.kv_cache_dtype, "model_dtype": r.request.model_dtype,
             "target": "sm_%d%d" % tuple(r.request.capability), "status": r.status,
             "kernels": {f"{k.kernel}/{k.role}": [k.status, k.failure.kind if k.failure else None] for k in r.kernels}}
            for r in reports]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trees", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    import triton

    trees = {p.name: p for p in sorted(args.trees.iterdir()) if (p / "vllm").is_dir()}
    cap = torch.cuda.get_device_capability()
    cases = [("auto", "bfloat16"), ("fp8", "bfloat16"), ("fp8_e5m2", "bfloat16"), ("float16", "float16")]
    started = time.perf_counter()
    launches = []
    for version, tree in trees.items():
        modules = _load(tree)
        for kv, dtype in cases:
            launches.append(run_case(modules, version, kv, dtype, cap))
    launch_s = time.perf_counter() - started
    dry = dry_runs(trees, cases, [cap, (8, 0)])
    record = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "gpu": torch.cuda.get_device_name(), "capability": list(cap), "torch": torch.__version__,
              "triton": triton.__version__, "python": platform.python_version(), "launch_seconds": round(launch_s, 1),
              "launches": launches, "dry_runs": dry}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1))
    for case in launches:
        print(case["version"], case["kv_cache_dtype"], case["model_dtype"], case["target"],
              {k: (v["status"], round(v.get("max_abs_error", -1), 4)) for k, v in case["launches"].items()})
    for d in dry:
        print("dry", d["version"], d["kv_cache_dtype"], d["model_dtype"], d["target"], d["status"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
