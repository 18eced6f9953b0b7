"""Markdown for a pull-request comment or a job summary: verdict, findings table, details folded."""

from __future__ import annotations

from kvdoctor.report.formats._context import deployment_line, fix_line, kernels, state
from kvdoctor.model.report import Finding, Report

VERDICT_MARK = {"PASS": "✅", "WARN": "⚠️", "FAIL": "❌"}
SEVERITY_MARK = {"error": "🔴 error", "warning": "🟡 warning", "info": "🔵 info"}


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def render(report: Report, verbose: bool = False) -> str:
    out = [f"### {VERDICT_MARK[report.verdict]} kvdoctor: **{report.verdict}**", "", f"`{deployment_line(report)}`", ""]
    findings = report.sorted_findings()
    if findings:
        out += ["| severity | rule | finding | status |", "| --- | --- | --- | --- |"]
        for f in findings:
            how = state(f)
            status = f"ignored: {_cell(f.ignored_reason or '')}" if how == "ignored" else how
            out.append(f"| {SEVERITY_MARK[f.severity]} | `{f.rule_id}` | {_cell(f.title)} | {status} |")
        out.append("")
        for f in findings:
            out += _details(f)
    else:
        out += ["No problems found for this configuration.", ""]
    out += _dry_run(report)
    if report.notes:
        out += ["**Notes**", ""] + [f"- {n}" for n in report.notes] + [""]
    if verbose:
        out += ["<details><summary>Facts</summary>", "", "| fact | value |", "| --- | --- |"]
        out += [f"| `{k}` | {_cell('unknown' if v is None else str(v))} |" for k, v in sorted(report.facts.items())]
        out += ["", "</details>", ""]
    return "\n".join(out).rstrip() + "\n"


def _details(f: Finding) -> list[str]:
    lines = [f"<details><summary><b>{f.rule_id}</b> {_html(f.title)}</summary>", "", f"**Cause:** {f.cause}", ""]
    if f.fixes:
        lines += ["**Fixes:**", ""] + [f"{n}. {fix_line(x)}" for n, x in enumerate(f.fixes, 1)] + [""]
    if f.evidence:
        lines += ["**Evidence:**", "", "```"] + list(f.evidence) + ["```", ""]
    if f.decided_by:
        lines += ["**Decided by:**", ""] + [f"- {d}" for d in f.decided_by] + [""]
    if f.references:
        lines += ["**References:** " + " ".join(f.references), ""]
    return lines + ["</details>", ""]


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _dry_run(report: Report) -> list[str]:
    rows = kernels(report)
    if not rows:
        return []
    dry = report.dry_run
    out = [f"**Dry-run compile** ({_cell(dry.source_label)}): {dry.status}", ""]
    out += ["| kernel | role | status | seconds |", "| --- | --- | --- | --- |"]
    for k in rows:
        status = str(k.status) + (f" ({k.failure.kind})" if k.failure else "")
        cached = " (cached)" if k.cached else ""
        out.append(f"| `{k.kernel}` | {k.role} | {_cell(status)} | {k.seconds:.2f}{cached} |")
    return out + [""]
