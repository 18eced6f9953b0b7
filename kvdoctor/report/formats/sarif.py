"""SARIF 2.1.0 for code-scanning dashboards: one result per finding, ignored ones as suppressed."""

from __future__ import annotations

import json
from typing import Any

from kvdoctor import __version__
from kvdoctor.report.formats._context import deployment_labels, fix_line, kernels, state
from kvdoctor.model.report import Finding, Report

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
LEVEL = {"error": "error", "warning": "warning", "info": "note"}
INFORMATION_URI = "https://github.com/kvdoctor/kvdoctor"


def render(report: Report, verbose: bool = False) -> str:
    findings = report.sorted_findings()
    rule_ids = sorted({f.rule_id for f in findings})
    by_rule = {f.rule_id: f for f in findings}
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "kvdoctor",
                "version": __version__,
                "informationUri": INFORMATION_URI,
                "rules": [_rule(by_rule[r]) for r in rule_ids],
            }
        },
        "results": [_result(f, rule_ids.index(f.rule_id), _location(report)) for f in findings],
        "invocations": [_invocation(report)],
        "properties": {"verdict": report.verdict, **deployment_labels(report)},
    }
    if verbose:
        run["properties"]["facts"] = {k: v for k, v in sorted(report.facts.items())}
    log = {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}
    return json.dumps(log, indent=2, default=str) + "\n"


def _rule(finding: Finding) -> dict[str, Any]:
    rule: dict[str, Any] = {
        "id": finding.rule_id,
        "shortDescription": {"text": finding.title},
        "defaultConfiguration": {"level": LEVEL[finding.severity]},
        "properties": {"tags": ["vllm", "kv-cache"]},
    }
    if finding.references:
        rule["helpUri"] = finding.references[0]
    if finding.checked_against:
        rule["properties"]["checkedAgainst"] = finding.checked_against
    return rule


def _result(finding: Finding, rule_index: int, location: dict[str, Any] | None) -> dict[str, Any]:
    how = state(finding)
    text = f"{finding.title}. {finding.cause}"
    if finding.fixes:
        text += " Fixes: " + "; ".join(fix_line(f) for f in finding.fixes) + "."
    result: dict[str, Any] = {
        "ruleId": finding.rule_id,
        "ruleIndex": rule_index,
        # SARIF: a result whose kind is not 'fail' must have level 'none'
        "kind": "open" if finding.status == "undecided" else "fail",
        "level": "none" if finding.status == "undecided" else LEVEL[finding.severity],
        "message": {"text": text},
        "properties": {
            "status": finding.status,
            "gates": finding.gates,
            "evidence": list(finding.evidence),
            "decidedBy": list(finding.decided_by),
        },
    }
    if location:
        result["locations"] = [location]
    if how == "ignored":
        result["suppressions"] = [{"kind": "external", "justification": finding.ignored_reason}]
    return result


def _location(report: Report) -> dict[str, Any] | None:
    """The model's config.json when it is a local file: code scanning wants a file to pin results to."""
    source = report.facts.get("model.source")
    if not isinstance(source, str) or ":" in source.split("/")[0]:
        return None
    return {"physicalLocation": {"artifactLocation": {"uri": source}}}


def _invocation(report: Report) -> dict[str, Any]:
    notifications = [
        {"level": "note", "message": {"text": note}} for note in report.notes
    ]
    for kernel in kernels(report):
        if kernel.status.is_failure:
            kind = kernel.failure.kind if kernel.failure else str(kernel.status)
            notifications.append({"level": "error", "message": {"text": f"dry-run compile of {kernel.kernel}: {kind}"}})
    invocation: dict[str, Any] = {"executionSuccessful": True}
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    return invocation
