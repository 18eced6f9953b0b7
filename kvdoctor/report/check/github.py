"""GitHub Actions workflow commands: one `::error`/`::warning`/`::notice` annotation per finding."""

from __future__ import annotations

from kvdoctor.model.report import Finding, Report
from kvdoctor.report.github import LEVEL, VERDICT_LEVEL, Annotation, annotations_text
from kvdoctor.report.wording import deployment_line, fix_line, state


def render(report: Report, verbose: bool = False) -> str:
    summary = Annotation(VERDICT_LEVEL[report.verdict], f"kvdoctor {report.verdict}",
                         f"kvdoctor {report.verdict}: {deployment_line(report)}")  # fmt: skip
    return annotations_text([*(_annotation(f) for f in report.sorted_findings()), summary])


def _annotation(finding: Finding) -> Annotation:
    how = state(finding)
    prefix = {"fired": "", "undecided": f"undecided {finding.severity}: ", "ignored": f"ignored {finding.severity}: "}
    body = [finding.cause]
    if how == "ignored":
        body.append(f"Ignored by config: {finding.ignored_reason}")
    body += [f"Fix: {fix_line(f)}" for f in finding.fixes]
    body += [f"Decided by: {d}" for d in finding.decided_by]
    body += [f"See {r}" for r in finding.references[:2]]
    level = LEVEL[finding.severity] if how == "fired" else "notice"
    return Annotation(level, f"{finding.rule_id} {prefix[how]}{finding.title}", "\n".join(body))
