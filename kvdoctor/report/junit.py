"""JUnit XML for CI test tabs: a test suite of cases, each passing, failed, in error or skipped.

A pure builder of plain records; the check and scan adapters say what a case is (a rule, a kernel, a workload)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass


@dataclass(frozen=True)
class Outcome:
    """Why a case did not simply pass: its <failure>, <error> or <skipped> element."""

    kind: str
    """'failure', 'error' or 'skipped'."""
    message: str
    type: str | None = None
    text: str | None = None
    """The element's body, if any."""


@dataclass(frozen=True)
class Case:
    """One <testcase>."""

    classname: str
    name: str
    outcome: Outcome | None = None
    """None: the case passed."""
    output: str | None = None
    """Its <system-out>, when it has one."""
    seconds: float | None = None
    file: str | None = None
    line: int | None = None


@dataclass(frozen=True)
class Suite:
    """The one <testsuite> of a run, inside <testsuites>."""

    name: str
    suites_name: str
    """The enclosing <testsuites>' name, e.g. 'kvdoctor check'."""
    hostname: str
    """What was tested, in one line (CI tabs show it)."""
    cases: tuple[Case, ...]
    seconds: float
    properties: tuple[tuple[str, str], ...] = ()
    """<properties> (name, value) pairs; none: no <properties> element."""


def junit_xml(suite: Suite) -> str:
    """The XML document, indented, counts of tests, failures, errors and skips filled in."""
    element = ET.Element("testsuite", name=suite.name, hostname=suite.hostname)
    if suite.properties:
        properties = ET.SubElement(element, "properties")
        for name, value in suite.properties:
            ET.SubElement(properties, "property", name=name, value=value)
    for case in suite.cases:
        _case(element, case)
    kinds = [c.outcome.kind for c in suite.cases if c.outcome is not None]
    element.set("tests", str(len(suite.cases)))
    for count, kind in (("failures", "failure"), ("errors", "error"), ("skipped", "skipped")):
        element.set(count, str(kinds.count(kind)))
    element.set("time", f"{suite.seconds:.3f}")
    suites = ET.Element("testsuites", name=suite.suites_name)
    suites.append(element)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _case(suite: ET.Element, case: Case) -> None:
    attributes = {"classname": case.classname, "name": case.name}
    if case.seconds is not None:
        attributes["time"] = f"{case.seconds:.3f}"
    if case.file is not None:
        attributes |= {"file": case.file, "line": str(case.line or 0)}
    element = ET.SubElement(suite, "testcase", attributes)
    if case.outcome is not None:
        outcome = ET.SubElement(element, case.outcome.kind, message=case.outcome.message)
        if case.outcome.type is not None:
            outcome.set("type", case.outcome.type)
        if case.outcome.text is not None:
            outcome.text = case.outcome.text
    if case.output is not None:
        ET.SubElement(element, "system-out").text = case.output
