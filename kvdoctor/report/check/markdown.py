"""Markdown for a pull-request comment or a job summary: verdict, findings table, details folded."""

from __future__ import annotations

from kvdoctor.model.report import Finding, Report
from kvdoctor.report.markdown import SEVERITY_MARK, VERDICT_MARK, cell, html_text, table
from kvdoctor.report.wording import deployment_line, fix_line, kernels, state


def render(report: Report, verbose: bool = False) -> str:
    out = [f"### {VERDICT_MARK[report.verdict]} kvdoctor: **{report.verdict}**", "", f"`{deployment_line(report)}`", ""]
    findings = report.sorted_findings()
    if findings:
        out += table(("severity", "rule", "finding", "status"), [_row(f) for f in findings]) + [""]
        for f in findings:
            out += _details(f)
    else:
        out += ["No problems found for this configuration.", ""]
    out += _dry_run(report)
    if report.notes:
        out += ["**Notes**", ""] + [f"- {n}" for n in report.notes] + [""]
    if verbose:
        facts = [(f"`{k}`", "unknown" if v is None else str(v)) for k, v in sorted(report.facts.items())]
        out += ["<details><summary>Facts</summary>", ""] + table(("fact", "value"), facts) + ["", "</details>", ""]
    return "\n".join(out).rstrip() + "\n"


def _row(f: Finding) -> tuple[str, ...]:
    how = state(f)
    status = f"ignored: {f.ignored_reason or ''}" if how == "ignored" else how
    return SEVERITY_MARK[f.severity], f"`{f.rule_id}`", f.title, status


def _details(f: Finding) -> list[str]:
    lines = [f"<details><summary><b>{f.rule_id}</b> {html_text(f.title)}</summary>", "", f"**Cause:** {f.cause}", ""]
    if f.fixes:
        lines += ["**Fixes:**", ""] + [f"{n}. {fix_line(x)}" for n, x in enumerate(f.fixes, 1)] + [""]
    if f.evidence:
        lines += ["**Evidence:**", "", "```"] + list(f.evidence) + ["```", ""]
    if f.decided_by:
        lines += ["**Decided by:**", ""] + [f"- {d}" for d in f.decided_by] + [""]
    if f.references:
        lines += ["**References:** " + " ".join(f.references), ""]
    return lines + ["</details>", ""]


def _dry_run(report: Report) -> list[str]:
    rows = kernels(report)
    if not rows:
        return []
    dry = report.dry_run
    out = [f"**Dry-run compile** ({cell(dry.source_label)}): {dry.status}", ""]
    out += table(("kernel", "role", "status", "seconds"), [_kernel_row(k) for k in rows])
    return out + [""]


def _kernel_row(k) -> tuple[str, ...]:
    status = str(k.status) + (f" ({k.failure.kind})" if k.failure else "")
    return f"`{k.kernel}`", k.role, status, f"{k.seconds:.2f}{' (cached)' if k.cached else ''}"
