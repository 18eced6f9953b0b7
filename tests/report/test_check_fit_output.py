"""check's json and prometheus formats carry the KV-cache fit as vLLM will log it (available KV memory, its band,
'GPU KV cache size: N tokens', 'Maximum concurrency for M tokens per request: X') and its inputs (weights' bytes and
source), the same values as the memory.* facts; the JSON validates against report.schema.json 1.3 and the metrics
parse as Prometheus text exposition."""

import json
import re
from pathlib import Path

import jsonschema
import pytest

REPO = Path(__file__).resolve().parents[2]
QWEN = REPO / "examples" / "qwen2.5-3b-instruct"
BASE = ("check", "--model", str(QWEN), "--vllm-version", "0.33.0", "--no-compile")
CASES = {
    "fits": ("--gpu", "A100"),
    "does_not_fit": ("--gpu", "T4", "--gpu-memory-utilization", "0.45"),
    "not_modelled": ("--gpu", "A100", "--kv-cache-dtype", "int8_per_token_head"),
}
# one sample line of the text exposition format: name, optional {label="value",...}, a float
SAMPLE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*",?)*\})? '
                    r'(-?[0-9.]+(e[+-]?[0-9]+)?|NaN|[+-]Inf)$')  # fmt: skip


def _json(run_cli, *flags: str) -> dict:
    out = run_cli(*BASE, *flags, "--format", "json")
    assert out.code in (0, 1), out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("case", CASES)
def test_json_fit_equals_the_facts_and_validates(run_cli, report_schema, case):
    report = _json(run_cli, *CASES[case])
    jsonschema.validate(report, report_schema)
    assert report["schema_version"] == "1.3"
    fit, facts = report["fit"], report["facts"]
    assert fit["state"] == facts["memory.fit"] == case
    assert fit["available_kv_bytes"] == facts["memory.kv_budget_bytes"]
    assert fit["available_kv_gib"] == facts["memory.kv_budget_gib"] and fit["band_gib"] == facts["memory.band_gib"]
    assert fit["kv_cache_tokens"] == facts["memory.kv_tokens"]
    assert fit["max_concurrency"] == facts["memory.max_concurrency"]
    assert fit["inputs"]["weights_bytes"] == facts["memory.weights_bytes"]
    if case == "not_modelled":
        assert not fit["judged"] and "int8_per_token_head" in fit["why_not"] and fit["vllm_log"] == []
        return
    tokens, concurrency = fit["kv_cache_tokens"], fit["max_concurrency"]
    assert fit["judged"] and fit["max_model_len"] == 32768
    # 0.33.0 logs one line (kv_cache_utils.py:1147; data/kv_memory.yaml kv_cache.capacity_log)
    assert fit["vllm_log"] == [f"GPU KV cache size: {tokens:,} tokens, "
                               f"Maximum concurrency for 32,768 tokens per request: {concurrency:.2f}x"]  # fmt: skip
    assert fit["inputs"]["weights_estimated"] is True  # examples/ holds config.json only
    assert fit["inputs"]["weights_source"].startswith("estimated from config.json")
    assert fit["inputs"]["weights_bytes"] > 5 * 2**30  # Qwen2.5-3B in bf16
    if case == "does_not_fit":
        assert fit["vllm_error"] == facts["memory.error"] and "memory" in fit["vllm_error"]  # vLLM's own words
        assert report["verdict"] == "FAIL" and "KVD181" in [f["rule_id"] for f in report["findings"]]
    else:
        assert fit["vllm_error"] is None and tokens > 32768 and concurrency > 1


def test_old_fields_stay(run_cli, report_schema):
    report = _json(run_cli, *CASES["fits"])
    assert {"schema_version", "tool", "command", "verdict", "facts", "findings", "dry_run", "notes"} <= set(report)
    assert report["facts"]["memory.vllm_log"].startswith("GPU KV cache size: ")


def _families(text: str) -> dict:
    parser = pytest.importorskip("prometheus_client.parser")
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


@pytest.mark.parametrize("case", CASES)
def test_prometheus_fit_gauges_parse_and_carry_the_figures(run_cli, case):
    text = run_cli(*BASE, *CASES[case], "--format", "prometheus").stdout
    facts = _json(run_cli, *CASES[case])["facts"]
    for line in text.splitlines():  # strict: every line a HELP, a TYPE gauge or a sample
        assert line.startswith(("# HELP ", "# TYPE ")) or SAMPLE.match(line), line
        if line.startswith("# TYPE "):
            assert line.endswith(" gauge"), line
    families = _families(text)
    states = {s.labels["state"]: s.value for s in families["kvdoctor_kv_cache_fit"].samples}
    assert states == {s: float(s == case) for s in ("fits", "within_band", "does_not_fit", "no_memory", "not_modelled")}
    values = {name: [s for s in f.samples] for name, f in families.items()}
    if case == "not_modelled":  # no budget, no tokens: absent series, never a 0 that reads as 'no memory'
        assert not values["kvdoctor_kv_cache_available_bytes"] and not values["kvdoctor_kv_cache_tokens"]
        return
    (available,) = values["kvdoctor_kv_cache_available_bytes"]
    assert available.value == facts["memory.kv_budget_bytes"]  # exact bytes, not 7.11391e+10
    assert available.labels["gpu"] and available.labels["vllm_version"] == "0.33.0"
    (weights,) = values["kvdoctor_model_weights_bytes"]
    assert weights.value == facts["memory.weights_bytes"] and weights.labels["estimated"] == "true"
    assert weights.labels["source"].startswith("estimated from config.json")
    (band,) = values["kvdoctor_kv_cache_band_bytes"]
    assert band.value == round(facts["memory.band_gib"] * 2**30)
    (tokens,) = values["kvdoctor_kv_cache_tokens"]
    assert tokens.value == facts["memory.kv_tokens"]
    (concurrency,) = values["kvdoctor_kv_cache_max_concurrency"]
    assert concurrency.value == facts["memory.max_concurrency"]
    assert concurrency.labels["max_model_len"] == str(facts["context.max_model_len"])


def test_an_undecided_figure_has_no_sample(run_cli):
    """No --gpu: the GPU's memory is unknown, so there is no budget: its series has no sample (absent, not 0)."""
    out = run_cli("check", "--model", str(QWEN), "--vllm-version", "0.33.0", "--no-compile", "--format", "prometheus")
    families = _families(out.stdout)
    assert families["kvdoctor_kv_cache_available_bytes"].samples == []
    assert {s.labels["state"]: s.value for s in families["kvdoctor_kv_cache_fit"].samples}["not_modelled"] == 1


def test_a_checkpoint_sized_by_its_index_names_that_source(run_cli, report_schema, tmp_path):
    """Weights from the checkpoint's own safetensors index: exact, not estimated, and said so in both formats."""
    (tmp_path / "config.json").write_text((QWEN / "config.json").read_text())
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 6171000000},
                                                                       "weight_map": {}}))  # fmt: skip
    flags = ("check", "--model", str(tmp_path), "--gpu", "A100", "--vllm-version", "0.33.0", "--no-compile")
    report = json.loads(run_cli(*flags, "--format", "json").stdout)
    jsonschema.validate(report, report_schema)
    inputs = report["fit"]["inputs"]
    assert inputs["weights_bytes"] == 6171000000 and inputs["weights_estimated"] is False
    assert inputs["weights_source"] == report["facts"]["checkpoint.weights_source"]
    assert "safetensors.index.json" in inputs["weights_source"]
    (weights,) = _families(run_cli(*flags, "--format", "prometheus").stdout)["kvdoctor_model_weights_bytes"].samples
    assert weights.value == 6171000000 and weights.labels["estimated"] == "false"
    assert weights.labels["source"] == inputs["weights_source"]
