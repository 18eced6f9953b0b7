"""The dry-run result stays typed through every stage, and every stage names the same deciding kernel."""

from __future__ import annotations

import json

from rules_support import rules, scenario_facts

from kvdoctor.facts.derive import derive_dryrun_facts
from kvdoctor.model.dry_run import (
    CompileFailure,
    DryRunReport,
    DryRunRequest,
    KernelResult,
    Status,
    from_json,
    to_json,
)
from kvdoctor.check.reconcile import compile_evidence, reconcile_with_dry_run
from kvdoctor.rules.engine import evaluate_rules

REQUEST = DryRunRequest("turboquant_4bit_nc", "bfloat16", 128, 2, (9, 0), vllm_version="0.33.0")
STORE = "vllm/v1/attention/ops/triton_turboquant_store.py"
DECODE = "vllm/v1/attention/ops/triton_turboquant_decode.py"


def layout_skip_then_ptxas() -> DryRunReport:
    """A store kernel skipped for a changed layout, then a decode kernel failing in ptxas."""
    skipped = KernelResult("_tq_fused_store_mse", "store", STORE, Status.SKIPPED, 0.0, False, {},
                           CompileFailure("layout_changed", message="unknown parameter NEW_ARG"), "layout changed")  # fmt: skip
    failed = KernelResult("_tq_decode_stage1", "decode", DECODE, Status.FAILED, 0.3, False, {},
                          CompileFailure("ptxas_error", innermost_type="PTXASError", innermost_message="ptxas fatal"))  # fmt: skip
    return DryRunReport(Status.FAILED, REQUEST, (skipped, failed), "vLLM 0.33.0 kernels", "0.33.0", "3.7.1",
                        "_tq_decode_stage1 failed (ptxas_error) for this target", 0.4)  # fmt: skip


def test_json_rules_and_evidence_agree_on_the_failing_kernel():
    report = layout_skip_then_ptxas()
    kinds = {kind for r in rules() for kind in r.compile_kinds}
    facts = derive_dryrun_facts(report, kinds)

    assert to_json(report)["failure_kind"] == "ptxas_error"
    assert facts["dryrun.failure_kind"] == "ptxas_error"
    assert facts["dryrun.failed_kernel"] == "_tq_decode_stage1"
    assert facts["dryrun.innermost"] == "PTXASError: ptxas fatal"

    flat = scenario_facts(kv="turboquant_4bit_nc", gpu="H100", vllm="0.33.0") | facts
    findings = {f.rule_id: f for f in reconcile_with_dry_run(evaluate_rules(rules(), flat), rules(), flat, report)}
    unexplained = [f for f in findings.values() if "_tq_decode_stage1" in f.cause]
    assert unexplained and all("_tq_fused_store_mse" not in f.cause for f in unexplained)


def test_a_skip_with_a_failure_decides_only_when_nothing_failed():
    report = layout_skip_then_ptxas()
    only_skip = DryRunReport(Status.SKIPPED, REQUEST, report.kernels[:1], "x", "0.33.0", None, "skipped", 0.0)
    assert only_skip.failure_kind == "layout_changed" and only_skip.deciding_kernel.kernel == "_tq_fused_store_mse"
    passed = DryRunReport(Status.PASSED, REQUEST, (), "x", "0.33.0", None, None, 0.0)
    assert passed.deciding_kernel is None and passed.failure_kind is None


def test_json_round_trip_keeps_types_and_values():
    report = layout_skip_then_ptxas()
    data = json.loads(json.dumps(to_json(report)))
    back = from_json(data)
    assert back == report
    assert isinstance(back.status, Status) and back.kernels[1].status is Status.FAILED
    assert data["status"] == "failed" and data["kernels"][0]["status"] == "skipped"


def test_compile_evidence_names_each_kernel_in_its_status_words():
    lines = compile_evidence(layout_skip_then_ptxas())
    assert "compiled _tq_fused_store_mse (store): skipped" in lines
    assert "compiled _tq_decode_stage1 (decode): failed" in lines
    assert "  innermost cause: PTXASError: ptxas fatal" in lines
    assert "  layout_changed: unknown parameter NEW_ARG" in lines  # a skip has no exception to name
    assert not any("innermost cause: None" in line for line in lines)
