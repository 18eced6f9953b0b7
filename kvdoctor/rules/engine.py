"""Evaluate rules over flat facts and turn them into findings. Pure: no I/O, no GPU."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from kvdoctor.data.fact_names import fact_registry
from kvdoctor.model.report import Finding, Fix
from kvdoctor.rules.conditions import holding_leaves, unknown_facts
from kvdoctor.rules.loader import Rule

PLACEHOLDER = re.compile(r"\{([a-z_]+(?:\.[A-Za-z0-9_]+)+)(?:\|([^{}]*))?\}")  # {fact} or {fact|if unknown}
_ASIDE = re.compile(r" ?\([^()]*\)")  # a parenthesised aside and the space before it
_OPTIONAL = re.compile(r" \{([a-z_]+(?:\.[A-Za-z0-9_]+)+)\|\}")  # a placeholder with an empty '|' text


def hint_for(fact: str, facts: dict[str, Any] | None = None, said: set[str] | None = None) -> str:
    """What would decide an unknown fact, in words and with the flag that supplies it (data/fact_names.yaml hints):
    a derived fact names the unknown inputs it follows from, or the judged release kvdoctor did not read. Inputs in
    `said` (their own lines say how to supply them) are named only; the others are spelled out and added to it."""
    facts = facts or {}
    said = set() if said is None else said
    if unread := _release_unread(fact, facts):  # its own reason first (an image's build, a kind of fact not read)
        return unread
    inputs = unknown_inputs(fact, facts)
    if inputs:
        named = [name for name in inputs if name in said]
        spelt = [f"{name}, {_release_unread(name, facts) or _namespace_hint(name, facts)}"
                 for name in inputs if name not in said]
        said.update(inputs)
        return "which follows from " + "; and ".join([" and ".join(named)] * bool(named) + spelt)
    declared = fact_registry().get(fact)
    version = facts.get("vllm.version")
    if declared and "vllm.version" in declared.derived_from and version is not None and not _release_read(version):
        return f"which follows from vllm.version, {_not_read(version)}"
    return _namespace_hint(fact, facts)


def unknown_inputs(fact: str, facts: dict[str, Any]) -> list[str]:
    """The unknown facts a derived fact follows from, through derived inputs down to what a user supplies."""
    declared = fact_registry().get(fact)
    found: list[str] = []
    for name in declared.derived_from if declared else ():
        if facts.get(name) is None:
            found += unknown_inputs(name, facts) or [name]
    return list(dict.fromkeys(found))


def decided_by_lines(names: list[str], facts: dict[str, Any]) -> tuple[str, ...]:
    """One line per unknown fact: its name, then in words what decides it and how to supply it; how to supply an
    input is said once per finding (on its own line when the rule tests it, else where it first comes up)."""
    said = {name for name in names if not unknown_inputs(name, facts)}
    return tuple(f"{name}, {hint_for(name, facts, said)}" for name in names)


def _release_unread(fact: str, facts: dict[str, Any]) -> str | None:
    """'which follows from vllm.version, <why>' when the fact is unknown because kvdoctor did not read that part of
    the judged release (its `unknown_why` fact says why), else None."""
    declared = fact_registry().get(fact)
    why = facts.get(declared.unknown_why) if declared and declared.unknown_why else None
    return f"which follows from vllm.version, {why}" if why else None


def _namespace_hint(fact: str, facts: dict[str, Any]) -> str:
    return fact_registry().namespace_hint(fact, facts)


def _release_read(version: str) -> bool:
    from kvdoctor.vllm_pack.candidates import covered

    return covered(version, "pack", "pack")


def _not_read(version: str) -> str:
    """Why a release's facts are unknown: kvdoctor did not read it (and which releases it did read)."""
    from kvdoctor.vllm_pack.candidates import describe_range
    from kvdoctor.vllm_pack.store import pack_releases

    return (f"the vLLM release: kvdoctor did not read vLLM {version} (it read {describe_range(pack_releases())}); "
            "name a release it read with --vllm-version, or read this one into the pack (docs/vllm-pack.md)")


def fill(template: str, facts: dict[str, Any]) -> str:
    """Replace {fact.name} placeholders; an unknown fact reads as the text after '|', else 'unknown'. An aside in
    parentheses that needs an unknown fact with no '|' text is left out: '(SM unknown)' says nothing."""

    def needs_unknown(aside: re.Match[str]) -> str:
        missing = any(m.group(2) is None and facts.get(m.group(1)) is None for m in PLACEHOLDER.finditer(aside[0]))
        return "" if missing else aside[0]

    template = _ASIDE.sub(needs_unknown, template)
    # an unknown fact with an empty '|' text takes the space before it along: 'vLLM {vllm.judged|} refuses'
    template = _OPTIONAL.sub(lambda m: "" if facts.get(m.group(1)) is None else m[0], template)

    def value(match: re.Match[str]) -> str:
        found = facts.get(match.group(1))
        if found is None:
            return match.group(2) if match.group(2) is not None else "unknown"
        if isinstance(found, float) and match.group(1) == "gpu.capability":
            return f"{found:.1f}"
        if isinstance(found, (list, tuple)):
            return ", ".join(str(v) for v in found)
        return str(found)

    return PLACEHOLDER.sub(value, template)


def evidence_for(rule: Rule, facts: dict[str, Any]) -> tuple[str, ...]:
    """The known facts the rule tested, as 'name = value' lines."""
    used = sorted(rule.when.facts_used()) if rule.when else []
    return tuple(f"{name} = {facts[name]!r}" for name in used if facts.get(name) is not None)


def offered_fixes(rule: Rule, facts: dict[str, Any]) -> tuple:
    """The rule's fixes whose `when` holds (or that have none): a recomputed fix that does not work is not offered.
    The loader keeps every fix with a `when` after those with a dry run, so the dry-run fix keys stay aligned."""
    return tuple(f for f in rule.fixes if f.when is None or f.when.evaluate(facts) is True)


def finding_for(rule: Rule, facts: dict[str, Any], status: str = "fired") -> Finding:
    decided_by: tuple[str, ...] = ()
    if status == "undecided" and rule.when is not None:
        decided_by = decided_by_lines(unknown_facts(rule.when, facts), facts)
    return Finding(
        rule_id=rule.id,
        severity=rule.severity,
        title=fill(rule.title, facts),
        cause=fill(rule.cause, facts),
        status=status,
        evidence=evidence_for(rule, facts),
        fixes=tuple(Fix(title=fill(f.title, facts), flag=f.flag and fill(f.flag, facts), env=f.env, version=f.version)
                    for f in offered_fixes(rule, facts)),
        references=rule.references,
        checked_against=checked_against_text(rule.checked_against, facts),
        decided_by=decided_by,
    )


PACK = "vllm pack"
"""A rule's checked_against for facts read from vLLM's own code per release (kvdoctor/data/vllm_pack)."""


def checked_against_text(checked_against: str | None, facts: dict[str, Any]) -> str | None:
    """The rule's checked_against in words: 'vllm pack' names the release judged (or says none was named), 'any' says
    that no release decides it."""
    if checked_against == "any":
        return "no particular vLLM release: the rule holds for every one"
    if not checked_against or not checked_against.startswith(PACK):
        return checked_against
    detail = checked_against.removeprefix(PACK)
    version, judged = facts.get("vllm.version"), facts.get("vllm.judged")
    if version:
        return f"vLLM {version}'s own code, as kvdoctor's knowledge pack read it{detail}"
    releases = str(judged).removeprefix("(version unknown: ").removesuffix(")") if judged else "read"
    return f"the code of the vLLM releases judged ({releases}), as kvdoctor's knowledge pack read it{detail}"


def evaluate_rules(rules: list[Rule], facts: dict[str, Any]) -> list[Finding]:
    """A finding for every rule whose `when` holds, and an undecided one where unknown facts decide
    and at least one known fact already points at the problem (pure speculation is left out)."""
    findings = []
    for rule in rules:
        if rule.when is None:
            continue
        result = rule.when.evaluate(facts)
        outside = _outside_checked_range(rule, facts.get("vllm.version"))
        if outside and result is True:  # every condition holds: only the release range keeps it from firing
            findings.append(replace(finding_for(rule, facts, status="undecided"), decided_by=(outside,)))
        elif outside and result is None and holding_leaves(rule.when, facts):
            finding = finding_for(rule, facts, status="undecided")
            findings.append(replace(finding, decided_by=(outside, *finding.decided_by)))
        elif result is True:
            findings.append(finding_for(rule, facts))
        elif result is None and holding_leaves(rule.when, facts):
            findings.append(finding_for(rule, facts, status="undecided"))
    return fold_superseded(findings, rules)


def fold_superseded(findings: list[Finding], rules: list[Rule]) -> list[Finding]:
    """A fired rule that `supersedes` a generic one (vLLM's own error) keeps that error as evidence, once."""
    by_id = {r.id: r for r in rules}
    fired = {f.rule_id for f in findings if f.status == "fired"}
    folded: dict[str, list[Finding]] = {}
    for finding in findings:
        superseding = [i for i in fired if finding.rule_id in by_id[i].supersedes] if finding.rule_id in by_id else []
        if superseding:
            folded.setdefault(sorted(superseding)[0], []).append(finding)
    kept = []
    for finding in findings:
        if any(finding in group for group in folded.values()):
            continue
        extra = tuple(f"{f.rule_id} (vLLM's own words): {f.cause}" for f in folded.get(finding.rule_id, []))
        kept.append(replace(finding, evidence=finding.evidence + extra) if extra else finding)
    return kept


def _outside_read(version: str) -> str:
    """'is outside that range' for a release beyond the pack's span; for one inside it that the pack lacks, 'is not
    one of them (the nearest releases read: 0.10.2 and 0.11.2)'."""
    from kvdoctor.vllm_pack.candidates import pep440_order
    from kvdoctor.vllm_pack.store import pack_releases

    try:
        wanted = pep440_order(version)
        read = sorted(pack_releases(), key=pep440_order)
    except ValueError:
        return "is outside that range"
    below = [r for r in read if pep440_order(r) < wanted]
    above = [r for r in read if pep440_order(r) > wanted]
    if not below or not above:
        return "is outside that range"
    return f"is not one of them (the nearest releases read: {below[-1]} and {above[0]})"


def _outside_checked_range(rule: Rule, version: str | None) -> str | None:
    """Why the rule cannot judge this vLLM release (it was checked against others), or None."""
    if rule.vllm_range is None or version is None:
        return None
    from kvdoctor.vllm_pack.candidates import covered, describe_range
    from kvdoctor.vllm_pack.store import pack_releases

    low, high = rule.vllm_range
    if covered(version, low, high):
        return None
    if low == "pack":
        return (f"vllm.version, the vLLM release: this rule was checked against the releases kvdoctor read "
                f"({describe_range(pack_releases())}); {version} {_outside_read(version)}: kvdoctor did not read it, so "
                "the rule is not applied there (name a release kvdoctor read with --vllm-version, or read "
                f"{version} into the pack: docs/vllm-pack.md)")  # fmt: skip
    span = low if low == high else f"{low}-{high}"
    return (f"vllm.version, the vLLM release: this rule was checked against vLLM {span}; {version} is outside that "
            f"range, so the rule is not applied there (name a release inside the range with --vllm-version, or check the "
            f"rule against {version})")  # fmt: skip
