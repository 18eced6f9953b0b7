"""Without vLLM, kvdoctor compiles its own probe kernel: the same fp8 conversion, clearly labelled."""

from __future__ import annotations

import pytest
from dryrun_support import dryrun_cache  # noqa: F401  (fixture)

import kvdoctor.dryrun.kernel_source as kernel_source
from kvdoctor.dryrun import DryRunRequest, run_dry_run


@pytest.fixture(autouse=True)
def no_vllm(monkeypatch):
    monkeypatch.setattr(kernel_source, "installed_source", lambda: None)


def _probe(kv, dtype, cap, cache_dir):
    return run_dry_run(DryRunRequest(kv, dtype, 128, 8, cap), cache_dir=cache_dir)


def test_bf16_probe_on_sm80_fails_like_vllms_kernel(dryrun_cache):
    report = _probe("turboquant_k8v4", "bfloat16", (8, 0), dryrun_cache)

    assert report.status == "failed" and report.failure_kind == "bf16_to_fp8e4b15_assert"
    assert report.source_label.startswith("kvdoctor probe kernel, not vLLM's")
    assert report.vllm_version is None
    (probe,) = report.kernels
    assert probe.role == "probe" and probe.inputs["constexprs"]["FP8_FORMAT"] == 1
    assert probe.failure.triton_function == "convert_custom_float8"
    assert "float8e4b15" in probe.failure.kernel_source_line


@pytest.mark.parametrize(
    ("kv", "dtype", "cap"),
    [
        ("turboquant_k8v4", "bfloat16", (9, 0)),
        ("turboquant_k8v4", "float16", (8, 0)),
        ("turboquant_4bit_nc", "bfloat16", (8, 0)),
        ("fp8_e5m2", "bfloat16", (8, 0)),
    ],
)
def test_probe_passes_where_the_conversion_exists(dryrun_cache, kv, dtype, cap):
    report = _probe(kv, dtype, cap, dryrun_cache)
    assert report.status == "passed", report.kernels[0].failure


def test_fp8_e4m3_probe_below_sm89_reports_the_arch(dryrun_cache):
    report = _probe("fp8", "bfloat16", (8, 6), dryrun_cache)
    assert report.failure_kind == "fp8e4nv_unsupported_arch"
    assert report.kernels[0].failure.innermost_type == "ValueError"
