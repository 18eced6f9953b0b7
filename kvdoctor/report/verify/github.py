"""GitHub Actions annotations: an error per mismatch, a warning per field a PASS needs but nobody knows, a summary."""

from __future__ import annotations

from kvdoctor.report.github import LEVEL, VERDICT_LEVEL, Annotation, annotations_text
from kvdoctor.verify.compare import MATCH
from kvdoctor.verify.result import VerifyReport


def render(report: VerifyReport, verbose: bool = False) -> str:
    annotations = []
    for c in report.comparisons:
        if c.status == MATCH or (c.severity == "info" and not verbose):
            continue
        body = [c.line(), f"server: {c.served_from}", f"checked: {c.checked_from}"] + ([c.note] if c.note else [])
        annotations.append(Annotation(LEVEL[c.severity], f"kvdoctor verify: {c.field}", "\n".join(body)))
    annotations.append(Annotation(VERDICT_LEVEL[report.verdict], f"kvdoctor verify {report.verdict}", report.summary_line()))
    return annotations_text(annotations)
