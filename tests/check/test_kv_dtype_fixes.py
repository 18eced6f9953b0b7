"""A smaller KV dtype is offered as a fit fix only when it holds one request AND the check itself does not refuse it
on this GPU and release (issue 24, item 5: where the dry run's rules and the memory model meet)."""

from __future__ import annotations

from conftest import EXAMPLE_MODEL
from kvdoctor.check.run import CheckSettings, run_check
from kvdoctor.facts.collect import CheckOptions


def _check(gpu: str, kv_bytes: str):
    serve = ("vllm", "serve", str(EXAMPLE_MODEL), "--max-model-len", "32768", "--kv-cache-memory-bytes", kv_bytes)
    return run_check(CheckOptions(serve_argv=serve, gpu=gpu, vllm_version="0.25.1", offline=True, environ={}),
                     CheckSettings(compile=False))


def test_turboquant_k8v4_fits_on_an_a100_but_is_refused_as_the_founding_case_and_not_offered():
    report = _check("A100", "600M")
    facts = report.facts
    assert facts["memory.fit"] == "does_not_fit"
    assert "turboquant_k8v4: fits" in facts["memory.kv_dtypes_fitting"]
    assert facts["memory.kv_dtypes_refused"] == "turboquant_k8v4 (KVD101)"  # bf16 keys below SM89 (issue #39992)
    assert "turboquant_k8v4" not in facts["memory.kv_dtypes_working"]
    finding = next(f for f in report.findings if f.rule_id == "KVD181")
    offered = " ".join(f"{fix.title} {fix.flag}" for fix in finding.fixes)
    assert "turboquant_4bit_nc: fits" in offered and "turboquant_k8v4" not in offered
    assert "--kv-cache-dtype fp8" in offered  # fp8 fits and the selection serves it on SM80


def test_on_an_h100_k8v4_is_offered_too():
    facts = _check("H100", "600M").facts
    assert facts["memory.kv_dtypes_refused"] == "none" and "turboquant_k8v4: fits" in facts["memory.kv_dtypes_working"]


def test_a_fitting_configuration_asks_nothing():
    facts = _check("A100", "8G").facts
    assert facts["memory.fit"] == "fits" and facts.get("memory.kv_dtypes_working") is None
