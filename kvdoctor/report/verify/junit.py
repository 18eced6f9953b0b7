"""JUnit XML: one test case per compared field (a mismatch is a failure naming both values), the completion too."""

from __future__ import annotations

from kvdoctor.report.junit import Case, Outcome, Suite, junit_xml
from kvdoctor.verify.compare import MATCH, MISMATCH, Comparison
from kvdoctor.verify.result import VerifyReport


def render(report: VerifyReport, verbose: bool = False) -> str:
    cases = tuple(_case(c) for c in report.comparisons)
    properties = (("vllm.version", report.server.version), ("url", report.url), ("checked", report.checked.source))
    return junit_xml(Suite("kvdoctor verify", "kvdoctor verify", report.summary_line(), cases, report.seconds, properties))


def _case(c: Comparison) -> Case:
    evidence = f"server: {c.served_from}\nchecked: {c.checked_from}" + (f"\n{c.note}" if c.note else "")
    if c.status == MISMATCH:
        return Case("kvdoctor.verify", c.field, Outcome("failure", c.line(), "mismatch", evidence))
    if c.status != MATCH and c.severity == "warning":
        return Case("kvdoctor.verify", c.field, Outcome("skipped", c.line()), evidence)
    return Case("kvdoctor.verify", c.field, None, f"{c.line()}\n{evidence}")
