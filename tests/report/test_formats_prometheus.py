import pytest
from formats_support import failing_report, passing_report

from kvdoctor.report.check import prometheus

parser = pytest.importorskip("prometheus_client.parser")


def _samples(text: str) -> dict[str, list]:
    families = {f.name: f for f in parser.text_string_to_metric_families(text)}
    assert all(f.type == "gauge" for f in families.values())
    return {name: f.samples for name, f in families.items()}


def test_textfile_metrics_parse_and_count(tmp_path):
    samples = _samples(prometheus.render(failing_report(tmp_path)))
    verdict = {s.labels["verdict"]: s.value for s in samples["kvdoctor_verdict"]}
    assert verdict == {"PASS": 0, "WARN": 0, "FAIL": 1}
    labels = samples["kvdoctor_verdict"][0].labels
    assert (labels["gpu"], labels["kv_cache_dtype"], labels["vllm_version"]) == ("A100 80GB", "turboquant_k8v4", "0.25.1")
    gating = {s.labels["severity"]: s.value for s in samples["kvdoctor_findings"]}
    assert gating == {"info": 0, "warning": 0, "error": 2}  # KVD104 is ignored by config
    rules = {s.labels["rule_id"]: (s.labels["state"], s.value) for s in samples["kvdoctor_rule"]}
    flagged = {rule_id: value for rule_id, value in rules.items() if value[0] != "passed"}
    assert flagged == {"KVD101": ("fired", 1), "KVD102": ("fired", 1), "KVD104": ("ignored", 0)}
    assert rules["KVD103"] == ("passed", 0)  # one series per rule, passing ones included
    assert samples["kvdoctor_dry_run_seconds"][0].value == 1.25
    kernels = {s.labels["kernel"]: s.value for s in samples["kvdoctor_kernel_compile_ok"]}
    assert kernels == {"_tq_fused_store_fp8": 0, "_tq_decode_stage1": 1}


def test_pass_report(tmp_path):
    samples = _samples(prometheus.render(passing_report(tmp_path)))
    assert {s.labels["verdict"]: s.value for s in samples["kvdoctor_verdict"]}["PASS"] == 1
    assert {s.labels["state"] for s in samples["kvdoctor_rule"]} == {"passed"}
    assert all(s.value == 0 for s in samples["kvdoctor_rule"])
    assert samples["kvdoctor_dry_run_seconds"][0].labels["status"] == "none"
