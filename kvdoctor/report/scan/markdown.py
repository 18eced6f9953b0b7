"""Markdown for a pull-request comment or $GITHUB_STEP_SUMMARY: a table of workloads, then each finding's line."""

from __future__ import annotations

from kvdoctor.report.markdown import SEVERITY_MARK, VERDICT_MARK, cell, table
from kvdoctor.report.scan.summary import summary_line, workload_context
from kvdoctor.report.wording import fix_line, state
from kvdoctor.scan.result import ScanReport, WorkloadResult


def render(report: ScanReport, verbose: bool = False) -> str:
    out = [f"### {VERDICT_MARK.get(report.verdict, '⛔')} kvdoctor scan: **{report.verdict}**", "", summary_line(report), ""]
    out += [f"- ⛔ `{u.location}`: not read: {u.message}" for u in report.unread] + ([""] if report.unread else [])
    if report.workloads:
        rows = [_row(r) for r in report.workloads]
        out += table(("verdict", "workload", "where", "deployment"), rows) + [""]
    for r in report.workloads:
        out += _findings(r, verbose)
    if report.notes:
        out += ["**Notes**", ""] + [f"- {n}" for n in report.notes] + [""]
    return "\n".join(out).rstrip() + "\n"


def _row(r: WorkloadResult) -> tuple[str, ...]:
    w = r.workload
    return f"{VERDICT_MARK[r.verdict]} {r.verdict}", w.title, f"`{w.at(w.line)}`", workload_context(r)


def _findings(r: WorkloadResult, verbose: bool) -> list[str]:
    """The workload's heading and one line per finding shown (fired ones; every one with --verbose)."""
    shown = [p for p in r.placed if p.finding.status == "fired" or verbose]
    if not shown and r.report is not None and r.error is None:
        return []
    out = [f"#### {VERDICT_MARK[r.verdict]} {cell(r.workload.title)}", ""]
    if r.error is not None:
        out.append(f"- `{r.error_location}`: not checked: {r.error}")
    if r.report is None:
        return out + [""]
    for p in shown:
        f = p.finding
        how = state(f)
        note = "" if how == "fired" else f" ({how})"
        out.append(f"- {SEVERITY_MARK[f.severity]} `{f.rule_id}` at `{p.location}`{note}: {f.title}")
        out += [f"  - fix: {fix_line(x)}" for x in f.fixes]
    return out + [""]
