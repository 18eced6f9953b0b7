"""Real compiles of vLLM's TurboQuant kernels from released wheels, for the founding issue's targets."""

from __future__ import annotations

import dataclasses
import json

import pytest
from dryrun_support import dryrun_cache, founding_request, vllm_wheels  # noqa: F401  (fixtures)

from kvdoctor.dryrun import dry_run_applies, run_dry_run, run_dry_runs, to_json

pytestmark = pytest.mark.vllm_wheel


def _by_kernel(report):
    return {k.kernel: k for k in report.kernels}


def test_founding_case_fails_with_the_bf16_e4b15_assertion(vllm_wheels, dryrun_cache):
    report = run_dry_run(founding_request(vllm_wheels["0.25.1"]), cache_dir=dryrun_cache)

    assert report.status == "failed"
    assert report.failure_kind == "bf16_to_fp8e4b15_assert"
    assert report.vllm_version == "0.25.1"
    assert "vLLM 0.25.1 kernels from" in report.source_label
    store = _by_kernel(report)["_tq_fused_store_fp8"]
    assert store.status == "failed" and store.role == "store"
    assert store.source_file == "vllm/v1/attention/ops/triton_turboquant_store.py"
    assert store.inputs["signature"]["Key_ptr"] == "*bf16"
    assert store.inputs["constexprs"]["FP8_E4B15"] == 1
    failure = store.failure
    assert failure.innermost_type == "AssertionError"
    assert failure.exc_type.endswith("CompilationError")
    assert failure.triton_function == "convert_custom_float8"
    assert failure.triton_file == "triton/language/extra/cuda/utils.py"
    assert "float8e4b15" in failure.kernel_source_line
    assert failure.kernel_file == store.source_file and failure.kernel_line > 100


def test_decode_kernels_compile_for_sm80_in_bf16_and_fp16(vllm_wheels, dryrun_cache):
    for dtype in ("bfloat16", "float16"):
        report = run_dry_run(founding_request(vllm_wheels["0.25.1"], model_dtype=dtype), cache_dir=dryrun_cache)
        kernels = _by_kernel(report)
        for name in ("_tq_decode_stage1", "_tq_full_dequant_kv"):
            assert kernels[name].role == "decode"
            assert kernels[name].status == "passed", (dtype, name, kernels[name].failure)
        assert kernels["_tq_decode_stage1"].inputs["signature"]["Q_rot_ptr"] == {"bfloat16": "*bf16"}.get(dtype, "*fp16")


@pytest.mark.parametrize(
    ("version", "changes"),
    [
        ("0.25.1", {"model_dtype": "float16"}),
        ("0.25.1", {"capability": (9, 0)}),
        ("0.26.0", {}),
        ("0.26.0", {"capability": (9, 0)}),
        ("0.25.1", {"kv_cache_dtype": "turboquant_4bit_nc"}),
    ],
)
def test_configurations_without_the_bug_pass(vllm_wheels, dryrun_cache, version, changes):
    report = run_dry_run(founding_request(vllm_wheels[version], **changes), cache_dir=dryrun_cache)

    assert report.status == "passed", [(k.kernel, k.status, k.failure) for k in report.kernels]
    assert report.vllm_version == version
    assert len(report.kernels) == 3 and report.failure_kind is None


def test_nc_preset_compiles_the_mse_store_kernel_with_fp32_inputs(vllm_wheels, dryrun_cache):
    report = run_dry_run(founding_request(vllm_wheels["0.25.1"], kv_cache_dtype="turboquant_4bit_nc"),
                         cache_dir=dryrun_cache)  # fmt: skip
    store = report.kernels[0]
    assert store.kernel == "_tq_fused_store_mse"
    assert set(store.inputs["signature"].values()) == {"*fp32", "*u8", "*i64"}
    assert store.inputs["constexprs"]["KPS"] == 128 * 4 // 8 + 2


def test_fix_requests_for_the_founding_case(vllm_wheels, dryrun_cache):
    # kvdoctor.check.fix_verify changes the request as a rule's fix says and compiles it in the same batch
    base = founding_request(vllm_wheels["0.25.1"])
    candidates = [
        ("dtype-float16", {"model_dtype": "float16"}),
        ("mse-preset", {"kv_cache_dtype": "turboquant_4bit_nc"}),
        ("upgrade-vllm", {"vllm_source": str(vllm_wheels["0.26.0"])}),
        ("other-ampere", {"capability": (8, 6)}),
    ]
    reports = run_dry_runs([dataclasses.replace(base, **changes) for _, changes in candidates], cache_dir=dryrun_cache)

    status = {fix_id: {"passed": "verified", "failed": "not_verified"}[r.status] for (fix_id, _), r in zip(candidates, reports)}
    assert status == {"dtype-float16": "verified", "mse-preset": "verified", "upgrade-vllm": "verified",
                      "other-ampere": "not_verified"}  # fmt: skip
    upgrade = reports[2]
    assert upgrade.vllm_version == "0.26.0" and upgrade.request.vllm_source == candidates[2][1]["vllm_source"]
    assert reports[3].failure_kind == "bf16_to_fp8e4b15_assert"
    with pytest.raises(TypeError):  # a field no request has is refused (rules.yaml's loader names the allowed ones)
        dataclasses.replace(base, gpu="H100")


def test_report_is_plain_json(vllm_wheels, dryrun_cache):
    report = run_dry_run(founding_request(vllm_wheels["0.25.1"]), cache_dir=dryrun_cache)
    data = json.loads(json.dumps(to_json(report)))

    assert data["failure_kind"] == "bf16_to_fp8e4b15_assert"
    assert data["request"]["capability"] == [8, 0]
    assert data["kernels"][0]["failure"]["innermost_type"] == "AssertionError"


def test_kv_dtypes_without_a_kernel_are_skipped(vllm_wheels, dryrun_cache):
    assert dry_run_applies("turboquant_k8v4") and dry_run_applies("fp8_e5m2")
    assert not dry_run_applies("auto") and not dry_run_applies("nvfp4")
    report = run_dry_run(founding_request(vllm_wheels["0.25.1"], kv_cache_dtype="auto"), cache_dir=dryrun_cache)
    assert report.status == "skipped" and report.kernels == () and "auto" in report.reason
