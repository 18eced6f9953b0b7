"""JUnit XML: one test case per workload (a failure lists its gating findings with their manifest lines)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from kvdoctor.report.formats._context import fix_line
from kvdoctor.report.scan._shared import summary_line, workload_context
from kvdoctor.scan.result import ScanReport, WorkloadResult


def render(report: ScanReport, verbose: bool = False) -> str:
    suite = ET.Element("testsuite", name="kvdoctor scan", hostname=summary_line(report))
    for result in report.workloads:
        _case(suite, result)
    if not report.workloads:
        ET.SubElement(suite, "testcase", classname="kvdoctor.scan", name="no vLLM workload found")
    cases = suite.findall("testcase")
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
    suite.set("errors", str(sum(1 for c in cases if c.find("error") is not None)))
    suite.set("skipped", "0")
    suite.set("time", f"{sum(w.report.dry_run.seconds for w in report.workloads if w.report and w.report.dry_run):.3f}")
    suites = ET.Element("testsuites", name="kvdoctor scan")
    suites.append(suite)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _case(suite: ET.Element, result: WorkloadResult) -> None:
    w = result.workload
    case = ET.SubElement(suite, "testcase", classname=w.file, name=w.title, file=w.file, line=str(w.line or 0))
    if result.report is None:
        error = ET.SubElement(case, "error", message=f"not checked: {result.error}", type="input")
        error.text = f"{result.error_location}: {result.error}"
        return
    gating = [p for p in result.placed if p.finding.gates and p.finding.severity in ("error", "warning")]
    failing = [p for p in gating if p.finding.severity == "error"] or (gating if result.verdict == "WARN" else [])
    if failing:
        worst = failing[0].finding
        failure = ET.SubElement(case, "failure", message=f"{result.verdict}: {worst.rule_id} {worst.title}",
                                type=worst.severity)  # fmt: skip
        lines = [workload_context(result)]
        for p in gating:
            lines.append(f"{p.location}: {p.finding.severity} {p.finding.rule_id} {p.finding.title}")
            lines += [f"  fix: {fix_line(x)}" for x in p.finding.fixes]
        failure.text = "\n".join(lines)
    ET.SubElement(case, "system-out").text = "\n".join([workload_context(result), *result.report.notes])
