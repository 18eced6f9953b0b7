"""GitHub Actions workflow commands: one `::error`/`::warning`/`::notice` annotation per finding."""

from __future__ import annotations

from kvdoctor.report.formats._context import LEVEL_WORD, deployment_line, fix_line, state
from kvdoctor.model.report import Finding, Report


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render(report: Report, verbose: bool = False) -> str:
    lines = [_annotation(f) for f in report.sorted_findings()]
    summary = f"kvdoctor {report.verdict}: {deployment_line(report)}"
    word = {"FAIL": "error", "WARN": "warning", "PASS": "notice"}[report.verdict]
    lines.append(f"::{word} title={_escape_property('kvdoctor ' + report.verdict)}::{_escape_data(summary)}")
    return "\n".join(lines) + "\n"


def _annotation(finding: Finding) -> str:
    how = state(finding)
    word = LEVEL_WORD[finding.severity] if how == "fired" else "notice"
    prefix = {"fired": "", "undecided": f"undecided {finding.severity}: ", "ignored": f"ignored {finding.severity}: "}
    title = f"{finding.rule_id} {prefix[how]}{finding.title}"
    body = [finding.cause]
    if how == "ignored":
        body.append(f"Ignored by config: {finding.ignored_reason}")
    body += [f"Fix: {fix_line(f)}" for f in finding.fixes]
    body += [f"Decided by: {d}" for d in finding.decided_by]
    body += [f"See {r}" for r in finding.references[:2]]
    return f"::{word} title={_escape_property(title)}::{_escape_data(chr(10).join(body))}"
