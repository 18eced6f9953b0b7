"""Compile plans mirror vLLM's launchers; failures are classified by their innermost cause."""

from __future__ import annotations

import pytest

from kvdoctor.dryrun.classify import classify_kind, exception_chain
from kvdoctor.dryrun.plans import fp8_e4b15_flag, plan_probe, plan_turboquant
from kvdoctor.dryrun.plans_attention import plan_triton_attention


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


# Release boundaries of the launches (kvdoctor/data/kernel_layouts.yaml)
@pytest.mark.parametrize(("version", "widen"), [("0.25.1", 0), ("0.26.0", 1), ("0.34.0", 1), (None, 0), ("tree", 0)])
def test_k8v4_probe_widens_keys_from_the_release_that_does(version, widen):
    job = plan_probe("turboquant_k8v4", "bf16", 128, (8, 0), version)[0]
    assert job.constexprs["WIDEN_FIRST"] == widen
    assert plan_probe("fp8", "bf16", 128, (8, 0), version)[0].constexprs["WIDEN_FIRST"] == 0


@pytest.mark.parametrize(("version", "none_pointers"), [("0.24.0", False), ("0.25.0", True), (None, True)])
def test_unused_attention_pointers_are_none_from_0_25_and_for_an_unknown_release(version, none_pointers):
    _, attention_2d, _, _ = plan_triton_attention("fp8", "bf16", 128, 8, 32, (9, 0), 16, version)
    assert (attention_2d.constexprs.get("k_scale_cache_ptr", "absent") is None) == none_pointers
    assert (attention_2d.constexprs.get("segm_output_ptr", "absent") is None) == none_pointers


@pytest.mark.parametrize(("version", "capability", "tuned"),
                         [("0.23.0", (10, 0), False), ("0.24.0", (10, 0), True), ("0.24.0", (9, 0), False),
                          (None, (10, 0), False)])  # fmt: skip
def test_256_wide_heads_on_sm10x_prefill_are_tuned_from_0_24(version, capability, tuned):
    _, attention_2d, attention_3d, _ = plan_triton_attention("auto", "bf16", 256, 8, 32, capability, 16, version)
    assert ((attention_2d.num_warps, attention_2d.num_stages) == (8, 2)) == tuned
    assert attention_2d.constexprs["TILE_SIZE"] == (128 if tuned else 32) and attention_3d.num_warps == 4


# vLLM's start-up guards (kvdoctor/data/constructor_guards.yaml): the fallback speaks the pack's words
GUARD_KV_DTYPES = ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2")


@pytest.mark.parametrize("backend", ["TRITON_ATTN", "TRITON_MLA"])
def test_guard_fallback_says_what_the_pack_recorded_from_the_first_release_with_the_guard(backend):
    from kvdoctor.base.versions import release_numbers
    from kvdoctor.data.constructor_guards import constructor_guards
    from kvdoctor.vllm_pack import load_selection, releases_with
    from kvdoctor.vllm_pack.select import constructor_guard

    guard = constructor_guards()[backend]
    since = release_numbers(guard.since)
    compared = 0
    for version in releases_with("backend_replay"):
        for capability in [(7, 0), (7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0)]:
            if load_selection(version, capability) is None:
                continue
            for kv in GUARD_KV_DTYPES:
                recorded = constructor_guard(version, backend, capability, kv)
                expected = guard.fallback_message(kv, capability) if release_numbers(version) >= since else None
                assert (recorded and recorded[1]) == expected, (version, capability, kv)
                compared += recorded is not None
    assert compared > 20


def _guard_request(kv_cache_dtype: str, capability: tuple[int, int]):
    from kvdoctor.model.dry_run import DryRunRequest

    return DryRunRequest(kv_cache_dtype, "bfloat16", 128, 8, capability, vllm_version="9.9.9", backend="TRITON_ATTN")


def test_a_release_the_pack_lacks_gets_the_guard_from_its_own_source(tmp_path):
    from kvdoctor.dryrun.guards import guard_result
    from kvdoctor.dryrun.kernel_source import KernelSource

    backend = tmp_path / "triton_attn.py"
    backend.write_text("if kv_cache_dtype.startswith('fp8') and cap < (8, 9):\n    raise ValueError(\n"
                       "        f'FP8 KV cache ... on {dev}; native FP8 (fp8e4nv) requires SM89+.'\n    )\n")
    source = KernelSource("a tree", "9.9.9", {"vllm/v1/attention/backends/triton_attn.py": backend})
    result = guard_result("triton_attention", _guard_request("fp8", (8, 0)), source)
    assert result.kernel == "TritonAttentionImpl.__init__" and result.failure.kind == "triton_attn_fp8_guard"
    assert result.failure.kernel_line == 2 and result.failure.kernel_source_line == "raise ValueError("
    assert result.failure.message.startswith("FP8 KV cache is not supported by the Triton attention backend on "
                                             "this GPU (compute capability 8.0)")  # fmt: skip
    assert guard_result("triton_attention", _guard_request("fp8", (8, 9)), source) is None  # SM89 passes
    backend.write_text("# a release without the guard\n")
    assert guard_result("triton_attention", _guard_request("fp8", (8, 0)), source) is None
