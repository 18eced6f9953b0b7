"""Compile plans mirror vLLM's launchers; failures are classified by their innermost cause."""

from __future__ import annotations

import pytest

from kvdoctor.dryrun.classify import classify_kind, exception_chain
from kvdoctor.dryrun.plans import fp8_e4b15_flag, plan_probe, plan_turboquant


@pytest.mark.parametrize(("cap", "flag"), [((7, 5), 1), ((8, 0), 1), ((8, 6), 1), ((8, 9), 0), ((9, 0), 0), ((12, 0), 0)])
def test_e4b15_below_sm89_like_vllm(cap, flag):
    assert fp8_e4b15_flag(cap) == flag


@pytest.mark.parametrize(
    ("preset", "store", "kps", "vqb", "mse_bits"),
    [
        ("turboquant_k8v4", "_tq_fused_store_fp8", 128, 4, 0),
        ("turboquant_4bit_nc", "_tq_fused_store_mse", 66, 4, 4),
        ("turboquant_k3v4_nc", "_tq_fused_store_mse", 50, 4, 3),
        ("turboquant_3bit_nc", "_tq_fused_store_mse", 50, 3, 3),
    ],
)
def test_presets_map_to_vllm_constexprs(preset, store, kps, vqb, mse_bits):
    jobs = plan_turboquant(preset, "bf16", 128, 4, (8, 0), 16)
    assert [j.kernel for j in jobs] == [store, "_tq_decode_stage1", "_tq_full_dequant_kv"]
    consts = jobs[0].constexprs
    assert consts["KPS"] == kps and consts["VQB"] == vqb
    slot = consts["stride_cache_head"]
    assert slot % 2 == 0 and slot >= kps + consts["VAL_DATA_BYTES"] + 4
    assert consts["stride_cache_block"] == 16 * 4 * slot
    assert jobs[1].constexprs["MSE_BITS"] == mse_bits and jobs[2].constexprs["MSE_BITS"] == mse_bits
    assert (jobs[0].num_warps, jobs[0].num_stages) == (4, 1) and jobs[1].num_warps == 1


def test_k8v4_store_and_query_take_the_model_dtype():
    store, stage1, dequant = plan_turboquant("turboquant_k8v4", "bf16", 64, 2, (8, 0), 32)
    assert store.signature["Key_ptr"] == store.signature["Value_ptr"] == "*bf16"
    assert stage1.signature["Q_rot_ptr"] == "*bf16" and dequant.signature["K_out_ptr"] == "*fp16"
    assert list(store.signature) == list(store.expected_args)


def test_probe_format_per_kv_dtype():
    fmt = lambda kv, cap: plan_probe(kv, "bf16", 128, cap)[0].constexprs["FP8_FORMAT"]  # noqa: E731
    assert fmt("turboquant_k8v4", (8, 0)) == 1 and fmt("turboquant_k8v4", (9, 0)) == 2
    assert fmt("fp8", (9, 0)) == 2 and fmt("fp8_e4m3", (8, 9)) == 2 and fmt("fp8_e5m2", (8, 0)) == 3
    assert fmt("turboquant_3bit_nc", (8, 0)) == 0


@pytest.mark.parametrize(
    ("messages", "inner", "function", "kind"),
    [
        ([""], "AssertionError", "convert_custom_float8", "bf16_to_fp8e4b15_assert"),
        (["fp8e4nv data type is not supported on CUDA arch < 89"], "AssertionError", "cast", "fp8e4nv_unsupported_arch"),
        (["type fp8e4nv not supported in this architecture. The supported fp8 dtypes are ('fp8e4b15', 'fp8e5')"],
         "ValueError", "to_ir", "fp8e4nv_unsupported_arch"),
        (["ptxas fatal : Value 'sm_100' is not defined for option 'gpu-name'"], "RuntimeError", None,
         "ptxas_unknown_target"),
        (["ptxas error : Feature 'min.f16 or min.f16x2' requires .target sm_80 or higher"],
         "triton.runtime.errors.PTXASError", None, "ptxas_error"),
        (["unsupported tensor index"], "ValueError", "visit_Subscript", "compile_error"),
    ],
)  # fmt: skip
def test_classify_kind(messages, inner, function, kind):
    assert classify_kind(messages, inner, function) == kind


def test_exception_chain_reaches_the_innermost_cause_without_looping():
    try:
        try:
            raise AssertionError("inner")
        except AssertionError as inner:
            raise RuntimeError("outer") from inner
    except RuntimeError as outer:
        outer.__cause__.__context__ = outer  # a cycle must not hang the walk
        chain = exception_chain(outer)
    assert [type(e).__name__ for e in chain] == ["RuntimeError", "AssertionError"]
