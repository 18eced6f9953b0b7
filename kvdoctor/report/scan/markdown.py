"""Markdown for a pull-request comment or $GITHUB_STEP_SUMMARY: a table of workloads, then each finding's line."""

from __future__ import annotations

from kvdoctor.report.formats._context import fix_line, state
from kvdoctor.report.formats.markdown import SEVERITY_MARK, VERDICT_MARK, _cell
from kvdoctor.report.scan._shared import summary_line, workload_context
from kvdoctor.scan.result import ScanReport

MARK = VERDICT_MARK | {"ERROR": "⛔"}


def render(report: ScanReport, verbose: bool = False) -> str:
    out = [f"### {MARK[report.verdict]} kvdoctor scan: **{report.verdict}**", "", summary_line(report), ""]
    if report.workloads:
        out += ["| verdict | workload | where | deployment |", "| --- | --- | --- | --- |"]
        for r in report.workloads:
            w = r.workload
            out.append(f"| {MARK[r.verdict]} {r.verdict} | {_cell(w.title)} | `{_cell(str(w.at(w.line)))}` | "
                       f"{_cell(workload_context(r))} |")  # fmt: skip
        out.append("")
    for r in report.workloads:
        shown = [p for p in r.placed if p.finding.status == "fired" or verbose]
        if not shown and r.report is not None:
            continue
        out += [f"#### {MARK[r.verdict]} {_cell(r.workload.title)}", ""]
        if r.report is None:
            out += [f"- `{r.error_location}`: not checked: {r.error}", ""]
            continue
        for p in shown:
            f = p.finding
            how = state(f)
            note = "" if how == "fired" else f" ({how})"
            out.append(f"- {SEVERITY_MARK[f.severity]} `{f.rule_id}` at `{p.location}`{note}: {f.title}")
            out += [f"  - fix: {fix_line(x)}" for x in f.fixes]
        out.append("")
    if report.notes:
        out += ["**Notes**", ""] + [f"- {n}" for n in report.notes] + [""]
    return "\n".join(out).rstrip() + "\n"
