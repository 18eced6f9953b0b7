"""Static and compiled verdicts share one explanation, and disagreements are said, not hidden."""

from __future__ import annotations

from kvdoctor.check.reconcile import reconcile_with_dry_run
from kvdoctor.rules.engine import evaluate_rules
from rules_support import rules, scenario_facts, typed_dry_run


def dry_run(status, kind=None, role="store"):
    failure = None
    if kind:
        failure = {"kind": kind, "innermost_type": "AssertionError", "innermost_message": "",
                   "triton_file": "triton/language/extra/cuda/utils.py", "triton_line": 94,
                   "triton_function": "convert_custom_float8", "kernel_file": "vllm/v1/attention/ops/triton_turboquant_store.py",
                   "kernel_line": 192, "kernel_source_line": "k_fp8 = k_vals.to(tl.float8e4b15)"}
    kernel = {"kernel": "_tq_fused_store_fp8" if role == "store" else "kvdoctor_probe_fp8_convert", "role": role,
              "status": "failed" if kind else "passed", "failure": failure}
    return {"status": status, "source_label": "test kernels", "kernels": [kernel]}


def judge(run, **scenario):
    facts = scenario_facts(dry_run=run, **scenario)
    findings = evaluate_rules(rules(), facts)
    return {f.rule_id: f for f in reconcile_with_dry_run(findings, rules(), facts, typed_dry_run(run))}


def test_compile_evidence_joins_the_static_finding():
    findings = judge(dry_run("failed", "bf16_to_fp8e4b15_assert"), kv="turboquant_k8v4", gpu="A100", vllm="0.25.1")
    evidence = "\n".join(findings["KVD101"].evidence)
    assert "raised in triton/language/extra/cuda/utils.py:94 in convert_custom_float8" in evidence
    assert "KVD900" not in findings


def test_compile_failure_the_rules_did_not_predict_fires_the_rule_that_explains_it():
    findings = judge(dry_run("failed", "bf16_to_fp8e4b15_assert"), kv="turboquant_k8v4", gpu="A100", vllm="0.26.0")
    assert findings["KVD101"].status == "fired"
    assert any("did not predict" in line for line in findings["KVD101"].evidence)


def test_rule_predicting_a_failure_the_real_compile_does_not_show_is_flagged_stale():
    findings = judge(dry_run("passed"), kv="turboquant_k8v4", gpu="A100", vllm="0.25.1")
    assert any(line.startswith("DISAGREEMENT") for line in findings["KVD101"].evidence)


def test_probe_kernel_never_overrules_a_rule_that_says_no():
    # fp8 KV on an A10 with FlashInfer: vLLM serves it; the probe's e4m3 cast fails regardless
    run = dry_run("failed", "fp8e4nv_unsupported_arch", role="probe")
    findings = judge(run, kv="fp8", gpu="A10", vllm="0.27.0", flashinfer="0.5.2")
    assert "KVD110" not in findings and "KVD111" not in findings and "KVD900" not in findings
