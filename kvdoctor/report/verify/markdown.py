"""Markdown for $GITHUB_STEP_SUMMARY or a deployment comment: the verdict, a table of fields, the completion."""

from __future__ import annotations

from kvdoctor.report.markdown import VERDICT_MARK, table
from kvdoctor.verify.result import VerifyReport

STATUS_MARK = {"match": "✅ match", "mismatch": "❌ mismatch", "not_checked": "➖ not checked", "not_exposed": "➖ not exposed"}


def render(report: VerifyReport, verbose: bool = False) -> str:
    out = [f"### {VERDICT_MARK[report.verdict]} kvdoctor verify: **{report.verdict}**", "", report.summary_line(), ""]
    rows = []
    for c in report.comparisons:
        if c.field in ("completion", "health"):
            continue
        rows.append((c.field, STATUS_MARK[c.status], _value(c.checked), _value(c.served), f"`{c.served_from}`"))
    out += table(("field", "", "checked", "server", "read from"), rows) + [""]
    for c in report.comparisons:
        if c.field in ("completion", "health"):
            out.append(f"- {STATUS_MARK[c.status]} {c.line()}")
    out.append("")
    notes = [c for c in report.comparisons if c.note and (c.status != "match" or verbose)]
    out += [f"- `{c.field}`: {c.note}" for c in notes] + ([""] if notes else [])
    if report.notes:
        out += ["**Notes**", ""] + [f"- {n}" for n in report.notes] + [""]
    return "\n".join(out).rstrip() + "\n"


def _value(value) -> str:
    return "" if value is None else f"`{value}`"
