from __future__ import annotations

import textwrap

import pytest

from kvdoctor.data.fact_names import is_fact_name
from kvdoctor.base.errors import RulesFileError
from kvdoctor.rules.conditions import ConditionError, parse_condition
from kvdoctor.rules.engine import evaluate_rules, fill
from kvdoctor.rules.loader import load_rules


def cond(raw):
    return parse_condition(raw, is_fact_name)


def test_three_valued_logic():
    rule = cond({"all": [{"fact": "gpu.capability", "lt": 8.9}, {"fact": "serve.kv_cache_dtype", "eq": "fp8"}]})
    assert rule.evaluate({"gpu.capability": 8.0, "serve.kv_cache_dtype": "fp8"}) is True
    assert rule.evaluate({"gpu.capability": 9.0, "serve.kv_cache_dtype": "fp8"}) is False
    assert rule.evaluate({"gpu.capability": None, "serve.kv_cache_dtype": "fp8"}) is None
    assert rule.evaluate({"gpu.capability": None, "serve.kv_cache_dtype": "auto"}) is False  # known false wins
    either = cond({"any": [{"fact": "gpu.capability", "lt": 8.0}, {"fact": "flashinfer.installed", "eq": False}]})
    assert either.evaluate({"gpu.capability": 7.5, "flashinfer.installed": None}) is True
    assert either.evaluate({"gpu.capability": 8.6, "flashinfer.installed": None}) is None
    assert cond({"not": {"fact": "model.is_mla", "eq": True}}).evaluate({"model.is_mla": None}) is None


@pytest.mark.parametrize(
    "raw, fact_value, expected",
    [
        ({"fact": "vllm.version", "version": ">=0.20.0,<0.26.0"}, "0.25.1", True),
        ({"fact": "vllm.version", "version": ">=0.20.0,<0.26.0"}, "0.26.0", False),
        ({"fact": "vllm.version", "version": ">=0.20.0,<0.26.0"}, "0.25.2.dev45+gabcdef", True),  # nightly builds count
        ({"fact": "vllm.version", "version": ">=0.20.0"}, "not-a-version", None),
        ({"fact": "serve.kv_cache_dtype", "prefix": ["fp8", "nvfp4"]}, "nvfp4_4over6", True),
        ({"fact": "serve.kv_cache_dtype", "in": ["fp8", "fp8_e4m3"]}, "fp8_e5m2", False),
        ({"fact": "model.architectures", "contains": "JambaForCausalLM"}, ["JambaForCausalLM"], True),
        ({"fact": "model.kv_cache_quant_algo", "matches": "(?i)fp8"}, "FP8", True),
        ({"fact": "gpu.capability", "ge": 8.9}, 8.9, True),
        ({"fact": "gpu.capability", "known": False}, None, True),
    ],
)
def test_operators(raw, fact_value, expected):
    assert cond(raw).evaluate({raw["fact"]: fact_value}) is expected


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"fact": "gpu.capabilty", "lt": 8}, "unknown fact name 'gpu.capabilty'"),
        ({"fact": "gpu.capability", "lt": "eight"}, "needs a number"),
        ({"fact": "vllm.version", "version": ">=0.2O"}, "bad version specifier"),
        ({"fact": "model.model_type", "matches": "("}, "bad regex"),
        ({"fact": "gpu.capability", "lt": 8, "gt": 7}, "exactly one operator"),
        ({"every": []}, "unknown condition key"),
        ({"all": []}, "non-empty list"),
        ({"fact": "gpu.capability", "between": [7, 8]}, "unknown operator"),
    ],
)
def test_malformed_conditions(raw, message):
    with pytest.raises(ConditionError, match=message.replace("(", r"\(")):
        cond(raw)


def write(tmp_path, text):
    path = tmp_path / "rules.yaml"
    path.write_text(textwrap.dedent(text))
    return path


GOOD = """
rules:
  - id: ORG001
    title: "Our fleet pins fp8 on {gpu.name}"
    severity: warning
    when: {fact: serve.kv_cache_dtype, eq: fp8}
    cause: "SM {gpu.capability} with {serve.kv_cache_dtype}"
    references: [https://example.org/runbook]
"""


def test_org_rules_load_and_fill_placeholders(tmp_path):
    (rule,) = load_rules([write(tmp_path, GOOD)], is_fact_name)
    (finding,) = evaluate_rules([rule], {"serve.kv_cache_dtype": "fp8", "gpu.name": "L4", "gpu.capability": 8.9})
    assert finding.title == "Our fleet pins fp8 on L4" and finding.cause == "SM 8.9 with fp8"


@pytest.mark.parametrize(
    "text, message",
    [
        ("rules: [", "not valid YAML"),
        ("- a\n- b\n", "'rules:' list"),
        ("rules:\n  - id: org1\n    title: t\n    severity: error\n    cause: c\n    when: {fact: gpu.name, eq: x}\n", "field 'id'"),
        (GOOD.replace("severity: warning", "severity: fatal"), "rule 'ORG001', field 'severity'"),
        (GOOD.replace("serve.kv_cache_dtype, eq", "serve.kv_dtype, eq"), "rule 'ORG001', field 'when': unknown fact name"),
        (GOOD.replace("    cause:", "    colour: red\n    cause:"), "field 'colour': unknown field"),
        (GOOD + GOOD.replace("rules:\n", ""), "defined twice"),
        (GOOD.replace("    references:", "    signatures: [{pattern: '(unclosed'}]\n    references:"), "bad regex"),
        (GOOD.replace("    references:", "    fixes: [{title: t, dry_run: {gpu: H100}}]\n    references:"), "dry_run may change only"),
    ],
)
def test_malformed_rules_files_name_rule_and_field(tmp_path, text, message):
    with pytest.raises(RulesFileError) as error:
        load_rules([write(tmp_path, text)], is_fact_name)
    assert message in error.value.one_line()


def test_org_rule_reusing_a_bundled_id_is_rejected(tmp_path):
    from kvdoctor.rules import load_all_rules

    with pytest.raises(RulesFileError, match="KVD101"):
        load_all_rules([write(tmp_path, GOOD.replace("ORG001", "KVD101"))])


def test_fill_unknown_reads_unknown():
    assert fill("{gpu.name} / {vllm.version}", {"gpu.name": "A10"}) == "A10 / unknown"


def test_fill_uses_the_fallback_after_a_bar_for_unknown_facts():
    template = "On {gpu.name|a GPU} (SM {gpu.capability|below 8.9})"
    assert fill(template, {}) == "On a GPU (SM below 8.9)"
    assert fill(template, {"gpu.name": "A10", "gpu.capability": 8.6}) == "On A10 (SM 8.6)"


def test_fill_leaves_out_an_aside_that_needs_an_unknown_fact():
    template = "on {gpu.name|a GPU} ({attention.gpu_generation|a GPU}, SM {gpu.capability}), below SM80"
    assert fill(template, {}) == "on a GPU, below SM80"  # issue 27: not "on unknown (a GPU, SM unknown)"
    known = {"gpu.name": "Tesla V100", "attention.gpu_generation": "Volta", "gpu.capability": 7.0}
    assert fill(template, known) == "on Tesla V100 (Volta, SM 7.0), below SM80"


def test_fill_drops_the_space_before_an_empty_fallback():
    assert fill("vLLM {vllm.judged|} refuses it", {}) == "vLLM refuses it"
    assert fill("vLLM {vllm.judged|} refuses it", {"vllm.judged": "0.25.1"}) == "vLLM 0.25.1 refuses it"


def test_no_check_or_scan_title_reads_unknown_when_its_facts_are_unknown():
    """An undecided finding is shown by its title with the deciding facts unknown (issue 27: "vLLM unknown picks
    FlashInfer on unknown (a GPU, SM unknown)"): every placeholder of a check or scan title has words for that."""
    import re

    from kvdoctor.rules import load_all_rules
    from kvdoctor.scan.judge import deploy_rules

    rules = [r for r in load_all_rules() + list(deploy_rules()) if not r.explain_only]
    assert len(rules) > 60
    for rule in rules:
        title = fill(rule.title, {})
        assert not re.search(r"\bunknown\b|  |\{", title), (rule.id, title)


def test_every_bundled_log_pattern_compiles():
    """The bundled rules' patterns are compiled on first use (check never needs them); this is their check."""
    import re

    from kvdoctor.rules import load_all_rules

    signatures = [s for rule in load_all_rules() for s in rule.signatures]
    assert len(signatures) >= 20
    assert all(isinstance(s.pattern, re.Pattern) for s in signatures)
