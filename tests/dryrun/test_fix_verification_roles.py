"""Fix verification recompiles the kernel role that failed, and says so."""

from __future__ import annotations

from dryrun_support import dryrun_cache, founding_request, vllm_wheels  # noqa: F401 - fixtures
from kvdoctor.dryrun import kernel_roles_for, run_dry_runs


def test_roles_restrict_the_plan_to_the_failing_kernel(vllm_wheels, dryrun_cache):  # noqa: F811
    wheel = vllm_wheels["0.25.1"]
    base, fix = run_dry_runs(
        [founding_request(wheel), founding_request(wheel, model_dtype="float16", roles=("store",))],
        cache_dir=dryrun_cache,
    )
    assert base.status == "failed" and [k.role for k in base.kernels] == ["store", "decode", "decode"]
    assert fix.status == "passed" and [k.kernel for k in fix.kernels] == ["_tq_fused_store_fp8"]


def test_only_the_k8v4_conversion_kind_narrows_roles():
    assert kernel_roles_for("bf16_to_fp8e4b15_assert") == ("store",)
    assert kernel_roles_for("compile_error") is None and kernel_roles_for(None) is None


def test_founding_check_notes_which_kernel_was_recompiled(run_cli, vllm_wheels):  # noqa: F811
    result = run_cli("check", "--model", "Qwen/Qwen2.5-3B-Instruct", "--kv-cache-dtype", "turboquant_k8v4",
                     "--gpu", "A100", "--vllm-source", str(vllm_wheels["0.25.1"]), "--format", "json")
    founding = next(f for f in result.json()["findings"] if f["rule_id"] == "KVD101")
    fp16 = next(fix for fix in founding["fixes"] if fix["flag"] == "--dtype float16")
    assert fp16["verified"] == "verified"
    assert "_tq_fused_store_fp8 passed (only the store kernel" in fp16["verification_note"]
