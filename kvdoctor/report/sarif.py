"""SARIF 2.1.0 for code-scanning dashboards: a log of one run, its rules and its results.

A pure builder of plain records; the check and scan adapters say what a result is about and where it points."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kvdoctor import __version__

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/kvdoctor/kvdoctor"
LEVEL = {"error": "error", "warning": "warning", "info": "note"}  # kvdoctor severity -> SARIF level


@dataclass(frozen=True)
class Rule:
    """A reportingDescriptor: what a rule id means."""

    id: str
    title: str
    severity: str
    """kvdoctor's: error, warning, info."""
    tags: tuple[str, ...]
    help_uri: str | None = None
    checked_against: str | None = None
    """The knowledge the rule was judged against (e.g. a vLLM release), when it says."""


@dataclass(frozen=True)
class Location:
    """A physical location: a file, a line in it, and what is found there."""

    uri: str
    line: int | None = None
    message: str | None = None


@dataclass(frozen=True)
class Result:
    """One result: a finding as code scanning shows it."""

    rule_id: str
    text: str
    severity: str
    """kvdoctor's: error, warning, info."""
    undecided: bool = False
    """The facts to decide it were missing: SARIF's kind 'open', level 'none'."""
    suppressed_because: str | None = None
    """Ignored by config: kept, shown as suppressed."""
    members: tuple[tuple[str, Any], ...] = ()
    """Further SARIF result members (locations, properties, ...), in the order they are written."""


@dataclass(frozen=True)
class Run:
    """The one run of a log."""

    rules: tuple[Rule, ...]
    results: tuple[Result, ...]
    properties: dict[str, Any]
    notifications: tuple[tuple[str, str], ...] | None = None
    """toolExecutionNotifications as (SARIF level, text); None writes none at all, () an empty list."""
    artifacts: tuple[str, ...] | None = None
    """The files scanned, when the run read files; None writes no artifacts."""


def location(where: Location) -> dict[str, Any]:
    """A SARIF location object."""
    physical: dict[str, Any] = {"physicalLocation": {"artifactLocation": {"uri": where.uri}}}
    if where.line:
        physical["physicalLocation"]["region"] = {"startLine": where.line}
    if where.message:
        physical["message"] = {"text": where.message}
    return physical


def sarif_log(run: Run) -> str:
    """The SARIF document, indented; each result's ruleIndex points into the run's rules."""
    rule_ids = [r.id for r in run.rules]
    body: dict[str, Any] = {
        "tool": {"driver": {"name": "kvdoctor", "version": __version__, "informationUri": INFORMATION_URI,
                            "rules": [_rule(r) for r in run.rules]}},  # fmt: skip
        "results": [_result(r, rule_ids) for r in run.results],
    }
    if run.artifacts is not None:
        body["artifacts"] = [{"location": {"uri": uri}} for uri in run.artifacts]
    invocation: dict[str, Any] = {"executionSuccessful": True}
    if run.notifications is not None:
        invocation["toolExecutionNotifications"] = [{"level": level, "message": {"text": text}}
                                                    for level, text in run.notifications]  # fmt: skip
    body["invocations"] = [invocation]
    body["properties"] = run.properties
    log = {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [body]}
    return json.dumps(log, indent=2, default=str) + "\n"


def _rule(rule: Rule) -> dict[str, Any]:
    descriptor: dict[str, Any] = {
        "id": rule.id,
        "shortDescription": {"text": rule.title},
        "defaultConfiguration": {"level": LEVEL[rule.severity]},
        "properties": {"tags": list(rule.tags)},
    }
    if rule.help_uri is not None:
        descriptor["helpUri"] = rule.help_uri
    if rule.checked_against:
        descriptor["properties"]["checkedAgainst"] = rule.checked_against
    return descriptor


def _result(result: Result, rule_ids: list[str]) -> dict[str, Any]:
    entry: dict[str, Any] = {"ruleId": result.rule_id}
    if result.rule_id in rule_ids:
        entry["ruleIndex"] = rule_ids.index(result.rule_id)
    # SARIF: a result whose kind is not 'fail' must have level 'none'
    entry["kind"] = "open" if result.undecided else "fail"
    entry["level"] = "none" if result.undecided else LEVEL[result.severity]
    entry["message"] = {"text": result.text}
    entry.update(result.members)
    if result.suppressed_because is not None:
        entry["suppressions"] = [{"kind": "external", "justification": result.suppressed_because}]
    return entry
