"""GitHub Actions annotations with file and line: the pull request shows each finding on the manifest line."""

from __future__ import annotations

from kvdoctor.report.github import LEVEL, VERDICT_LEVEL, Annotation, annotations_text
from kvdoctor.report.scan.summary import summary_line
from kvdoctor.report.wording import fix_line, state
from kvdoctor.scan.result import ScanReport, WorkloadResult


def render(report: ScanReport, verbose: bool = False) -> str:
    annotations = [Annotation("error", "kvdoctor: file not read", u.message, u.location.file, u.location.line)
                   for u in report.unread]  # fmt: skip
    annotations += [a for result in report.workloads for a in _workload(result, verbose)]
    annotations.append(Annotation(VERDICT_LEVEL.get(report.verdict, "error"), f"kvdoctor scan {report.verdict}", summary_line(report)))
    return annotations_text(annotations)


def _workload(result: WorkloadResult, verbose: bool) -> list[Annotation]:
    title_of = result.workload.title
    annotations = []
    if result.error is not None:
        where = result.error_location or result.workload.at(result.workload.line)
        annotations.append(Annotation("error", "kvdoctor: not checked", f"{title_of}: {result.error}", where.file,
                                      where.line))  # fmt: skip
    if result.report is None:
        return annotations
    for placed in result.placed:
        f = placed.finding
        how = state(f)
        if how == "undecided" and not verbose:
            continue
        body = [f"{title_of}: {f.cause}"] + [f"Fix: {fix_line(x)}" for x in f.fixes]
        if how == "ignored":
            body.append(f"Ignored by config: {f.ignored_reason}")
        level = LEVEL[f.severity] if how == "fired" else "notice"
        title = f"{f.rule_id} {'' if how == 'fired' else how + ' '}{f.title}"
        annotations.append(Annotation(level, title, "\n".join(body), placed.location.file, placed.location.line))
    return annotations
