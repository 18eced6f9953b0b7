"""Reports the format tests render: the issue's real deployment judged by the real rules (no GPU needed)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kvdoctor.check.run import CheckSettings, run_check
from kvdoctor.facts.collect import CheckOptions
from kvdoctor.model.dry_run import from_json
from kvdoctor.model.report import Report

EXAMPLE_MODEL = Path(__file__).resolve().parents[1] / "examples" / "qwen2.5-3b-instruct"
IGNORE_REASON = "key error measured on our eval set, accepted until the L4 pool is ready"

# The shape kvdoctor.dryrun.to_json gives a failed k8v4 compile on SM80 (bf16 keys, Triton's e4b15 assert).
FAILED_DRY_RUN_JSON = {
    "status": "failed",
    "source_label": "vllm-0.25.1 wheel",
    "vllm_version": "0.25.1",
    "triton_version": "3.7.1",
    "reason": "_tq_fused_store_fp8 failed (bf16_to_fp8e4b15_assert) for this target",
    "seconds": 1.25,
    "failure_kind": "bf16_to_fp8e4b15_assert",
    "request": {"kv_cache_dtype": "turboquant_k8v4", "model_dtype": "bfloat16", "head_dim": 128, "num_kv_heads": 2,
                "capability": [8, 0], "block_size": 16, "vllm_version": "0.25.1"},
    "kernels": [
        {"kernel": "_tq_fused_store_fp8", "role": "store", "source_file": "vllm/v1/attention/ops/triton_turboquant_store.py",
         "status": "failed", "seconds": 0.05, "cached": False,
         "inputs": {"target": "cuda:80"}, "note": None,
         "failure": {"kind": "bf16_to_fp8e4b15_assert", "exc_type": "triton.compiler.errors.CompilationError",
                     "innermost_type": "AssertionError", "triton_function": "convert_custom_float8",
                     "kernel_line": 97, "kernel_source_line": "k_fp8 = k_vals.to(tl.float8e4b15)"}},
        {"kernel": "_tq_decode_stage1", "role": "decode", "source_file": "vllm/v1/attention/ops/triton_turboquant_decode.py",
         "status": "passed", "seconds": 0.4, "cached": True,
         "inputs": {"target": "cuda:80"}, "failure": None, "note": None},
    ],
}

FAILED_DRY_RUN = from_json(FAILED_DRY_RUN_JSON)


def issue_report(tmp_path: Path, gpu: str = "A100", ignored: dict[str, str] | None = None, **changes) -> Report:
    """kvdoctor check of Qwen2.5-3B (bf16) + turboquant_k8v4 on vLLM 0.25.1, rules only."""
    options = CheckOptions(
        model=str(EXAMPLE_MODEL), kv_cache_dtype=changes.pop("kv_cache_dtype", "turboquant_k8v4"), gpu=gpu,
        vllm_version=changes.pop("vllm_version", "0.25.1"), cache_dir=tmp_path,
        environ={"VLLM_USE_V2_MODEL_RUNNER": "0"},  # the V1 runner, where the founding case also shows the 'auto' bug
    )
    report = run_check(options, CheckSettings(compile=False, ignored=ignored or {}))
    return replace(report, **changes)


def failing_report(tmp_path: Path) -> Report:
    """The issue's deployment with KVD104 ignored by config and a failed dry-run compile attached."""
    return issue_report(tmp_path, ignored={"KVD104": IGNORE_REASON}, dry_run=FAILED_DRY_RUN)


def passing_report(tmp_path: Path) -> Report:
    """An MSE preset on an L4 with a fixed vLLM: nothing fires."""
    return issue_report(tmp_path, gpu="L4", kv_cache_dtype="turboquant_4bit_nc", vllm_version="0.27.0")
