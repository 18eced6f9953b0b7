"""SARIF 2.1.0 for code-scanning dashboards: one result per finding, ignored ones as suppressed."""

from __future__ import annotations

from typing import Any

from kvdoctor.model.report import Finding, Report
from kvdoctor.report import sarif
from kvdoctor.report.wording import deployment_labels, fix_line, kernels


def render(report: Report, verbose: bool = False) -> str:
    findings = report.sorted_findings()
    by_rule = {f.rule_id: f for f in findings}
    location = _location(report)
    properties: dict[str, Any] = {"verdict": report.verdict, **deployment_labels(report)}
    if verbose:
        properties["facts"] = {k: v for k, v in sorted(report.facts.items())}
    run = sarif.Run(
        rules=tuple(_rule(by_rule[r]) for r in sorted(by_rule)),
        results=tuple(_result(f, location) for f in findings),
        properties=properties,
        notifications=_notifications(report) or None,
    )
    return sarif.sarif_log(run)


def _rule(finding: Finding) -> sarif.Rule:
    help_uri = finding.references[0] if finding.references else None
    return sarif.Rule(finding.rule_id, finding.title, finding.severity, ("vllm", "kv-cache"), help_uri,
                      finding.checked_against)  # fmt: skip


def _result(finding: Finding, location: sarif.Location | None) -> sarif.Result:
    text = f"{finding.title}. {finding.cause}"
    if finding.fixes:
        text += " Fixes: " + "; ".join(fix_line(f) for f in finding.fixes) + "."
    members: list[tuple[str, Any]] = [("properties", {
        "status": finding.status,
        "gates": finding.gates,
        "evidence": list(finding.evidence),
        "decidedBy": list(finding.decided_by),
    })]  # fmt: skip
    if location:
        members.append(("locations", [sarif.location(location)]))
    return sarif.Result(finding.rule_id, text, finding.severity, finding.status == "undecided",
                        finding.ignored_reason, tuple(members))  # fmt: skip


def _location(report: Report) -> sarif.Location | None:
    """The model's config.json when it is a local file: code scanning wants a file to pin results to."""
    source = report.facts.get("model.source")
    if not isinstance(source, str) or ":" in source.split("/")[0]:
        return None
    return sarif.Location(source)


def _notifications(report: Report) -> tuple[tuple[str, str], ...]:
    notes = [("note", note) for note in report.notes]
    for kernel in kernels(report):
        if kernel.status.is_failure:
            kind = kernel.failure.kind if kernel.failure else str(kernel.status)
            notes.append(("error", f"dry-run compile of {kernel.kernel}: {kind}"))
    return tuple(notes)
