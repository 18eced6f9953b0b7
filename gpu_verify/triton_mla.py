"""Launch vLLM's Triton MLA decode kernels on a real GPU exactly as kvdoctor's dry run plans them.

    python3 -m gpu_verify.triton_mla --trees .gpu-carry/mla --out $OUT/triton-mla.json

For each vLLM tree, KV-cache dtype, model dtype and query heads per rank (16: the grouped stage 1 of
DeepSeek-V2-Lite on one GPU; 1: the plain stage 1 at TP = num_heads): the dry run (kvdoctor's compiler
child, for this GPU's capability and for sm_80) and a real launch of the same jobs
(kvdoctor.dryrun.plans_mla) with CUDA tensors bound by parameter name, as TritonMLAImpl.forward_mqa passes
them: q [B, H, 576] in the model dtype, the paged latent cache [blocks, 16, 1, 576] (float8_e4m3fn for fp8,
as the layer views it) and its first 512 columns as V, float32 attn_logits [B, H, splits, 513], then stage 2
into o [B, H, 512] and lse [B, H]. o and lse are compared with a float32 reference computed from the cache as
stored (fp8 rounding is not counted; a wrong constexpr, stride or argument would be). Each case also runs
with 4 KV splits (a 2048-token sequence's value) besides the plan's 1 (grouped stage 1), to show the split merge is right.
"""

from __future__ import annotations

import argparse
import dataclasses
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

from kvdoctor.dryrun.plans_mla import DECODE_ATTENTION_FILE, plan_triton_mla

TORCH = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp8e4nv": torch.float8_e4m3fn,
         "i32": torch.int32, "i64": torch.int64}  # fmt: skip
LORA, ROPE, PAGE = 512, 64, 16
SEQ_LENS = (40, 300, 1000)  # three requests of different lengths
CASES = [("auto", "bfloat16"), ("fp8", "bfloat16"), ("bfloat16", "bfloat16"), ("float16", "float16"),
         ("fp8", "float16")]  # fmt: skip
DTYPES = {"bfloat16": "bf16", "float16": "fp16"}
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: a smoke test under TRITON_INTERPRET=1


def _load(tree: Path):
    import importlib.util

    import triton
    import triton.language as tl

    from kvdoctor.dryrun import stand_ins

    stand_ins.install(triton, tl)
    name = DECODE_ATTENTION_FILE[:-3].replace("/", ".")
    spec = importlib.util.spec_from_file_location(name, tree / DECODE_ATTENTION_FILE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _bind(fn, job, values: dict[str, Any]) -> dict[str, Any]:
    kwargs = {}
    for name, param in inspect.signature(fn.fn).parameters.items():
        if name in job.constexprs:
            kwargs[name] = job.constexprs[name]
        elif name in values:
            kwargs[name] = values[name]
        elif param.default is inspect.Parameter.empty:
            raise KeyError(f"{job.kernel}: no value for {name}")
    return kwargs


def _check_dtype(job, values):
    for name, sig in job.signature.items():
        if sig.startswith("*") and name in values:
            assert values[name].dtype == TORCH[sig[1:]], f"{job.kernel}.{name}: {values[name].dtype} vs {sig}"


def _reference(q, cache, table, seq_lens, scale):
    """o [B, H, LORA] and lse [B, H] in float32 from the cache as stored."""
    outs, lses = [], []
    flat = cache.float().view(-1, LORA + ROPE)
    for b, length in enumerate(seq_lens):
        pages = table[b, : math.ceil(length / PAGE)].long()
        rows = (pages[:, None] * PAGE + torch.arange(PAGE, device=q.device)[None, :]).flatten()[:length]
        kv = flat[rows]  # [T, 576]
        scores = q[b].float() @ kv.T * scale  # [H, T]
        outs.append(scores.softmax(-1) @ kv[:, :LORA])
        lses.append(torch.logsumexp(scores, -1))
    return torch.stack(outs), torch.stack(lses)


def run_case(module, version: str, kv: str, dtype: str, heads: int, cap: tuple[int, int], splits: int) -> dict:
    import triton  # noqa: F401 - the module's launches need it imported

    jobs = plan_triton_mla(kv, DTYPES[dtype], LORA, ROPE, heads, cap, PAGE)
    if splits != jobs[0].constexprs["NUM_KV_SPLITS"]:
        jobs = [dataclasses.replace(j, constexprs=j.constexprs | {"NUM_KV_SPLITS": splits}) for j in jobs]
    stage1, stage2 = jobs
    mdt, cdt = TORCH[stage1.signature["Q"][1:]], TORCH[stage1.signature["K_Buffer"][1:]]
    dev, batch = DEVICE, len(SEQ_LENS)
    gen = torch.Generator(device=dev).manual_seed(0)
    pages_per_seq = math.ceil(max(SEQ_LENS) / PAGE)
    blocks = batch * pages_per_seq + 1
    cache = (torch.randn(blocks, PAGE, LORA + ROPE, device=dev, generator=gen) * 0.5).to(cdt)
    table = (torch.randperm(blocks - 1, device=dev, generator=gen)[: batch * pages_per_seq] + 1)
    table = table.view(batch, pages_per_seq).to(torch.int32).contiguous()
    seq = torch.tensor(SEQ_LENS, dtype=torch.int32, device=dev)
    q = (torch.randn(batch, heads, LORA + ROPE, device=dev, generator=gen) * 0.5).to(mdt)
    o = torch.zeros(batch, heads, LORA, dtype=mdt, device=dev)
    lse = torch.zeros(batch, heads, dtype=mdt, device=dev)
    logits = torch.empty(batch, heads, splits, LORA + 1, dtype=torch.float32, device=dev)
    k_buffer = cache.unsqueeze(2)  # [blocks, PAGE, 1, 576], as forward_mqa adds the head dim
    v_buffer = k_buffer[..., :LORA]
    one = torch.ones((), dtype=torch.float32, device=dev)
    scale = 1.0 / math.sqrt(128 + ROPE)  # DeepSeek-V2: qk_nope_head_dim 128 + rope 64 (yarn mscale aside)
    values = {"Q": q, "K_Buffer": k_buffer, "V_Buffer": v_buffer, "sm_scale": scale, "Req_to_tokens": table,
              "B_Seqlen": seq, "Att_Out": logits, "stride_req_to_tokens_b": table.stride(0),
              "stride_qbs": q.stride(0), "stride_qh": q.stride(1), "stride_buf_kpbs": k_buffer.stride(0),
              "stride_buf_kbs": k_buffer.stride(-3), "stride_buf_kh": k_buffer.stride(-2),
              "stride_buf_vpbs": v_buffer.stride(0), "stride_buf_vbs": v_buffer.stride(-3),
              "stride_buf_vh": v_buffer.stride(-2), "stride_mid_ob": logits.stride(0),
              "stride_mid_oh": logits.stride(1), "stride_mid_os": logits.stride(2), "k_scale": one, "v_scale": one}  # fmt: skip
    record: dict[str, Any] = {"version": version, "kv_cache_dtype": kv, "model_dtype": dtype, "heads": heads,
                              "num_kv_splits": splits, "target": f"sm_{cap[0]}{cap[1]}", "launches": {}}  # fmt: skip

    def launch(job, grid, vals) -> bool:
        started = time.perf_counter()
        try:
            _check_dtype(job, vals)
            fn = getattr(module, job.kernel)
            fn[grid](**_bind(fn, job, vals), num_warps=job.num_warps, num_stages=job.num_stages)
            if DEVICE == "cuda":
                torch.cuda.synchronize()
            entry = {"status": "passed"}
        except Exception as exc:  # noqa: BLE001 - a failed launch is a result
            entry = {"status": "failed", "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        entry["seconds"] = round(time.perf_counter() - started, 3)
        record["launches"][f"{job.kernel}/{job.role}"] = entry
        return entry["status"] == "passed"

    c = stage1.constexprs
    rows = triton.cdiv(heads, min(c["BLOCK_H"], c["kv_group_num"])) if "BLOCK_H" in c else heads
    if not launch(stage1, (batch, rows, splits), values):
        return record
    vals2 = {"Mid_O": logits, "o": o, "lse": lse, "B_Seqlen": seq, "stride_mid_ob": logits.stride(0),
             "stride_mid_oh": logits.stride(1), "stride_mid_os": logits.stride(2), "stride_obs": o.stride(0),
             "stride_oh": o.stride(1), "stride_lse_bs": lse.stride(0)}  # fmt: skip
    if launch(stage2, (batch, heads), vals2):
        ref_o, ref_lse = _reference(q, cache, table, SEQ_LENS, scale)
        record["max_abs_error_o"] = float((o.float() - ref_o).abs().max())
        record["max_abs_error_lse"] = float((lse.float() - ref_lse).abs().max())
        record["max_abs_o"] = float(ref_o.abs().max())
    return record


def dry_runs(trees: dict[str, Path], caps) -> list[dict[str, Any]]:
    from kvdoctor.dryrun import DryRunRequest, run_dry_runs

    requests = [DryRunRequest(kv, dtype, LORA + ROPE, 1, cap, PAGE, vllm_source=str(tree), backend="TRITON_MLA",
                              num_q_heads=heads, kv_lora_rank=LORA)
                for tree in trees.values() for kv, dtype in CASES for heads in (16, 1) for cap in caps]  # fmt: skip
    out = []
    for cap in caps:  # one batch per target, as kvdoctor check does
        reports = run_dry_runs([r for r in requests if tuple(r.capability) == cap], use_cache=False, timeout_s=500)
        out += [{"version": r.vllm_version, "kv_cache_dtype": r.request.kv_cache_dtype,
                 "model_dtype": r.request.model_dtype, "heads": r.request.num_q_heads,
                 "target": "sm_%d%d" % tuple(r.request.capability), "status": str(r.status),
                 "kernels": {f"{k.kernel}/{k.role}": [str(k.status), k.failure.kind if k.failure else None]
                             for k in r.kernels}} for r in reports]  # fmt: skip
    return out


def compare(launches: list[dict], dry: list[dict]) -> dict[str, Any]:
    """Per kernel: the dry run's status for this GPU's target against the launch's (plan's split count only)."""
    index = {(d["version"], d["kv_cache_dtype"], d["model_dtype"], d["heads"], d["target"]): d for d in dry}
    agree, disagree = 0, []
    for case in launches:
        if case["num_kv_splits"] != 1:
            continue
        d = index.get((case["version"], case["kv_cache_dtype"], case["model_dtype"], case["heads"], case["target"]))
        for name, entry in case["launches"].items():
            verdict = (d or {}).get("kernels", {}).get(name, [None])[0]
            if verdict == entry["status"]:
                agree += 1
            else:
                disagree.append({"case": case, "kernel": name, "dry_run": verdict})
    return {"agree": agree, "disagree": disagree}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trees", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    import triton

    trees = {p.name: p for p in sorted(args.trees.iterdir()) if (p / DECODE_ATTENTION_FILE).is_file()}
    cap = torch.cuda.get_device_capability()
    started = time.perf_counter()
    launches = []
    for version, tree in trees.items():
        module = _load(tree)
        for kv, dtype in CASES:
            for heads in (16, 1):
                for splits in (1, 4) if heads > 1 else (1,):
                    launches.append(run_case(module, version, kv, dtype, heads, cap, splits))
    launch_s = time.perf_counter() - started
    dry = dry_runs(trees, [tuple(cap), (8, 0)])
    record = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "gpu": torch.cuda.get_device_name(), "capability": list(cap), "torch": torch.__version__,
              "triton": triton.__version__, "python": platform.python_version(), "launch_seconds": round(launch_s, 1),
              "comparison": compare(launches, dry), "launches": launches, "dry_runs": dry}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1))
    for case in launches:
        print(case["version"], case["kv_cache_dtype"], case["model_dtype"], case["heads"], case["num_kv_splits"],
              {k: v["status"] for k, v in case["launches"].items()},
              round(case.get("max_abs_error_o", -1), 4), round(case.get("max_abs_error_lse", -1), 4))  # fmt: skip
    for d in dry:
        print("dry", d["version"], d["kv_cache_dtype"], d["model_dtype"], d["heads"], d["target"], d["status"])
    print("comparison", json.dumps(record["comparison"])[:2000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
