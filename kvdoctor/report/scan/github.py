"""GitHub Actions annotations with file and line: the pull request shows each finding on the manifest line."""

from __future__ import annotations

from kvdoctor.report.formats._context import LEVEL_WORD, fix_line, state
from kvdoctor.report.formats.github import _escape_data, _escape_property
from kvdoctor.report.scan._shared import summary_line
from kvdoctor.scan.result import ScanReport
from kvdoctor.scan.workload import Location


def _where(location: Location) -> str:
    parts = [f"file={_escape_property(location.file)}"]
    if location.line:
        parts.append(f"line={location.line}")
    return ",".join(parts)


def render(report: ScanReport, verbose: bool = False) -> str:
    lines = []
    for result in report.workloads:
        title_of = result.workload.title
        if result.report is None:
            where = result.error_location or result.workload.at(result.workload.line)
            lines.append(f"::error {_where(where)},title={_escape_property('kvdoctor: not checked')}::"
                         f"{_escape_data(title_of + ': ' + (result.error or ''))}")  # fmt: skip
            continue
        for placed in result.placed:
            f = placed.finding
            how = state(f)
            if how == "undecided" and not verbose:
                continue
            word = LEVEL_WORD[f.severity] if how == "fired" else "notice"
            title = f"{f.rule_id} {'' if how == 'fired' else how + ' '}{f.title}"
            body = [f"{title_of}: {f.cause}"] + [f"Fix: {fix_line(x)}" for x in f.fixes]
            if how == "ignored":
                body.append(f"Ignored by config: {f.ignored_reason}")
            lines.append(f"::{word} {_where(placed.location)},title={_escape_property(title)}::"
                         f"{_escape_data(chr(10).join(body))}")  # fmt: skip
    word = {"FAIL": "error", "ERROR": "error", "WARN": "warning", "PASS": "notice"}[report.verdict]
    lines.append(f"::{word} title={_escape_property('kvdoctor scan ' + report.verdict)}::{_escape_data(summary_line(report))}")
    return "\n".join(lines) + "\n"
