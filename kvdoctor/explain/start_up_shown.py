"""A log with no failure line is healthy only when it shows vLLM up; one that ends before any line does (an excerpt,
a start-up stopped without an error line) decides nothing: an undecided error, never a PASS."""

from __future__ import annotations

from dataclasses import replace

from kvdoctor.explain.diagnosis import clip, rules_with_role
from kvdoctor.explain.log_lines import LogLine
from kvdoctor.explain.verdict import came_up, fails
from kvdoctor.model.report import Finding, Report
from kvdoctor.rules.rule import Rule


def with_start_up_shown(report: Report, lines: list[LogLine], rules: list[Rule]) -> Report:
    """A report with no failing finding says the line that shows vLLM up, or holds the undecided
    start_up_not_shown finding with the log's last line."""
    if fails(report):
        return report
    up = came_up(lines)
    if up is not None:
        return replace(report, notes=report.notes + (f"vLLM is up at line {up.number}: {clip(up.text.strip(), 160)}",))
    rule = next((r for r in rules if r.id in rules_with_role("start_up_not_shown")), None)
    last = next((line for line in reversed(lines) if line.text.strip()), None)
    if rule is None or last is None:
        return report
    finding = Finding(rule_id=rule.id, severity=rule.severity, title=rule.title, cause=" ".join(rule.cause.split()),
                      status="undecided", evidence=(f"the log's last line, {last.number}: {clip(last.text.strip(), 200)}",),
                      references=tuple(rule.references), checked_against=rule.checked_against,
                      decided_by=tuple(fix.title for fix in rule.fixes))
    note = (f"The log ends at line {last.number} ({clip(last.text.strip(), 120)}) before any line shows vLLM up: "
            "it shows neither a failure nor a finished start-up.")
    return replace(report, findings=report.findings + (finding,), notes=report.notes + (note,))
