"""The founding case (vllm-project/vllm#39992) in its three forms: what is primary, what misleads, what hides."""

from __future__ import annotations

from pathlib import Path

from kvdoctor.explain.explain import explain_log

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"


def test_full_triton_traceback_names_the_bf16_fp8_conversion():
    report = explain_log(str(LOGS / "founding_triton_full.log"))
    primary = report.extra["primary"]
    assert primary["rule_id"] == "KVD101"
    assert primary["exception_type"] == "AssertionError"
    assert primary["where"].endswith("triton/language/extra/cuda/utils.py:71 in convert_custom_float8")
    kvd101 = report.findings[0]
    assert any("k_fp8 = k_vals.to(tl.float8e4b15)" in line for line in kvd101.evidence)
    assert "Engine core initialization failed" in report.extra["misleading"]
    assert report.facts["gpu.capability"] == 8.0 and report.facts["model.dtype"] == "bfloat16"
    assert report.extra["check_command"] == (  # the run's own command, from vLLM's non-default args record
        "kvdoctor check --gpu 'A100 80GB' --vllm-version 0.24.1 -- vllm serve Qwen/Qwen2.5-3B-Instruct "
        "--kv-cache-dtype turboquant_k8v4 --max-model-len 8192"
    )
    # the fixes are the rule's own, so explain and check agree
    assert any(fix.version == "vllm>=0.27.0" for fix in kvd101.fixes)


def test_auto_message_alone_on_0_25_is_primary_but_kvd101_hides_underneath():
    report = explain_log(str(LOGS / "founding_auto_only_0251.log"))
    assert report.extra["primary"]["rule_id"] == "KVD102"
    assert "KVD101" in report.extra["inferred"]
    hidden = next(f for f in report.findings if f.rule_id == "KVD101")
    assert hidden.evidence[0].startswith("Not seen in the log")
    assert any("KVD101" in n and "hiding underneath" in n for n in report.notes)
    assert "Worker failed with error" in report.extra["misleading"]


def test_auto_message_on_a_fixed_configuration_does_not_invent_kvd101():
    report = explain_log(str(LOGS / "turboquant_auto_hybrid_50709.log"))
    assert report.extra["primary"]["rule_id"] == "KVD102"
    assert "KVD101" not in {f.rule_id for f in report.findings}


def test_interleaved_processes_the_assertion_wins_over_the_auto_wrapper():
    report = explain_log(str(LOGS / "founding_interleaved.log"))
    assert report.extra["primary"]["rule_id"] == "KVD101"
    assert report.extra["primary"]["stream"] == "Worker_TP0 pid=301"
    secondary = {s["rule_id"] for s in report.extra["secondary"]}
    assert "KVD102" in secondary
    misleading = report.extra["misleading"]
    assert "Worker failed with error 'Unknown TurboQuant cache dtype: 'auto'" in misleading
    assert "is a wrapper" in misleading and "KVD102" in misleading
    streams = {c["stream"] for c in report.extra["exceptions"]}
    assert {"Worker_TP0 pid=301", "Worker_TP1 pid=302", "EngineCore_DP0 pid=188"} <= streams
