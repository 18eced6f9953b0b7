"""JUnit XML for CI test tabs: one test case per rule and per compiled kernel."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import asdict

from kvdoctor.report.formats._context import deployment_line, fix_line, kernels, rules_checked, state
from kvdoctor.model.dry_run import KernelResult, Status
from kvdoctor.model.report import Finding, Report



def render(report: Report, verbose: bool = False) -> str:
    suite = ET.Element("testsuite", name="kvdoctor", hostname=deployment_line(report))
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", name="verdict", value=report.verdict)
    if verbose:
        for name, value in sorted(report.facts.items()):
            ET.SubElement(properties, "property", name=name, value="" if value is None else str(value))
    by_rule = {f.rule_id: f for f in report.findings}
    for rule_id in sorted(set(rules_checked(report)) - set(by_rule)):
        ET.SubElement(suite, "testcase", classname="kvdoctor.rules", name=rule_id)
    for finding in report.sorted_findings():
        _rule_case(suite, finding)
    for kernel in kernels(report):
        _kernel_case(suite, kernel, report.dry_run.source_label)
    if len(suite) == 1:  # no rule fired, no kernel compiled: still one visible, passing case
        ET.SubElement(suite, "testcase", classname="kvdoctor", name="verdict")
    cases = suite.findall("testcase")
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
    suite.set("errors", "0")
    suite.set("skipped", str(sum(1 for c in cases if c.find("skipped") is not None)))
    suite.set("time", f"{report.dry_run.seconds if report.dry_run else 0.0:.3f}")
    suites = ET.Element("testsuites", name="kvdoctor check")
    suites.append(suite)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _rule_case(suite: ET.Element, finding: Finding) -> None:
    case = ET.SubElement(suite, "testcase", classname="kvdoctor.rules", name=f"{finding.rule_id} {finding.title}")
    how = state(finding)
    if how == "ignored":
        ET.SubElement(case, "skipped", message=f"ignored: {finding.ignored_reason}")
    elif how == "undecided":
        message = f"undecided {finding.severity}: unknown facts decide it"
        ET.SubElement(case, "skipped", message=message).text = "\n".join(f"decided by {d}" for d in finding.decided_by)
    elif finding.severity == "info":
        ET.SubElement(case, "system-out").text = finding.cause
        return
    else:
        failure = ET.SubElement(case, "failure", message=finding.title, type=finding.severity)
        failure.text = _details(finding)
        return
    ET.SubElement(case, "system-out").text = finding.cause


def _details(finding: Finding) -> str:
    lines = [f"Cause: {finding.cause}"]
    lines += ["Evidence:"] + [f"  {e}" for e in finding.evidence] if finding.evidence else []
    lines += ["Fixes:"] + [f"  {n}. {fix_line(f)}" for n, f in enumerate(finding.fixes, 1)] if finding.fixes else []
    lines += ["References: " + " ".join(finding.references)] if finding.references else []
    return "\n".join(lines)


def _kernel_case(suite: ET.Element, kernel: KernelResult, source: str) -> None:
    target = kernel.inputs.get("target") or ""
    name = f"{kernel.kernel} [{kernel.role}]{' ' + str(target) if target else ''}"
    case = ET.SubElement(suite, "testcase", classname="kvdoctor.dry_run", name=name, time=f"{kernel.seconds:.3f}")
    if kernel.status.is_failure:
        kind = kernel.failure.kind if kernel.failure else str(kernel.status)
        element = ET.SubElement(case, "failure", message=f"{kernel.status}: {kind}", type=kind)
        details = asdict(kernel.failure) if kernel.failure else {}
        element.text = "\n".join(f"{k}: {v}" for k, v in details.items() if v is not None and k != "kind") or str(
            kernel.note or ""
        )
    elif kernel.status == Status.SKIPPED:
        ET.SubElement(case, "skipped", message=kernel.note or "skipped")
    if source:
        cached = " (cached)" if kernel.cached else ""
        ET.SubElement(case, "system-out").text = f"compiled from {source}{cached}"
