"""Every bundled rule carries its own cases (kvdoctor/data/rules/*.yaml `examples:`), as semgrep and ruff keep
them: each firing case fires the rule, each quiet case (its nearest neighbour) leaves it quiet.

A check or scan case is a scenario (tests/rules_support.py) with optional flat `facts` laid over it; an explain
case is a log, with the failure family and the log values the report must show where the case names them."""

from __future__ import annotations

import re

import pytest

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.families import load_families
from kvdoctor.rules.engine import evaluate_rules
from kvdoctor.rules.loader import bundled_files
from kvdoctor.scan.judge import deploy_rules
from rules_support import rules, scenario_facts


def bundled() -> list:
    """Every rule of every bundled file: check's (and its log rules), scan's and explain's."""
    return list(rules()) + list(deploy_rules()) + list(load_families().rules)


RULES = {rule.id: rule for rule in bundled()}


def _cases(kind: str) -> list[tuple[str, int]]:
    return [(rule_id, i) for rule_id, rule in sorted(RULES.items()) for i, _ in enumerate(rule.examples.get(kind, []))]


def test_every_bundled_rule_has_cases_or_says_why_and_names_its_release():
    ids = {str(raw.get("id")) for f in bundled_files() for raw in f.raw_rules()}
    assert ids == set(RULES)  # every file's rules reach a stage's list
    lacking = [rule.id for rule in RULES.values()
               if not (rule.examples.get("fires") and rule.examples.get("quiet"))
               and not rule.examples.get("no_firing_case", "").strip()]  # fmt: skip
    assert not lacking, f"rules without a firing and a quiet case (or a written reason): {lacking}"
    assert [rule.id for rule in RULES.values() if not rule.since] == []


def test_every_bundled_log_pattern_compiles():
    """Bundled patterns compile on first use (check never needs them); this is their check."""
    signatures = [s for rule in RULES.values() for s in rule.signatures]
    assert len(signatures) >= 50
    assert all(isinstance(s.pattern, re.Pattern) for s in signatures)


def _judged(rule_id: str, case: dict) -> dict[str, str]:
    """rule id -> status, for the rules of the rule's own stage over the case's facts."""
    scenario = {k: v for k, v in case.items() if k != "facts"}
    facts = scenario_facts(**scenario) | case.get("facts", {})
    stage_rules = list(deploy_rules()) if RULES[rule_id].stage == "scan" else list(rules())
    return {f.rule_id: f.status for f in evaluate_rules(stage_rules, facts)}


def _text(report) -> str:
    parts = list(report.notes)
    for finding in report.findings:
        parts += [finding.title, finding.cause, *finding.evidence]
        parts += [f"{fix.title} {fix.flag or ''} {fix.env or ''}" for fix in finding.fixes]
    return " ".join(" ".join(parts).split())


@pytest.mark.parametrize("rule_id, index", _cases("fires"))
def test_rule_fires_for_its_case(rule_id, index):
    case = RULES[rule_id].examples["fires"][index]
    if "log" not in case:
        assert _judged(rule_id, case).get(rule_id) == "fired"
        return
    report = explain_text(case["log"])
    # a refining rule keeps the check.yaml rule's id and gives it the log's values
    expected = load_families().refines.get(rule_id, rule_id)
    assert expected in {f.rule_id for f in report.findings if f.status == "fired"}
    if "family" in case:
        assert report.exit_code("error") == 1
        assert report.extra["primary"]["rule_id"] == expected, report.extra["primary"]
        assert report.extra["family"] == case["family"]
    text = _text(report)
    for value in case.get("shows", []):
        assert value in text, (value, text[:2000])


@pytest.mark.parametrize("rule_id, index", _cases("quiet"))
def test_rule_stays_quiet_for_its_near_miss(rule_id, index):
    case = RULES[rule_id].examples["quiet"][index]
    if "log" not in case:
        assert _judged(rule_id, case).get(rule_id) != "fired"
        return
    report = explain_text(case["log"])
    assert rule_id not in {f.rule_id for f in report.findings}
    assert report.exit_code("error") == 0
