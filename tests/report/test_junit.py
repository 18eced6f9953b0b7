"""JUnit XML: the suite counts what its cases say, and a case carries its file and line when it has them."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from kvdoctor.report.junit import Case, Outcome, Suite, junit_xml


def test_counts_follow_the_outcomes():
    cases = (
        Case("c", "passes", output="fine"),
        Case("c", "fails", Outcome("failure", "broke", "error", "details")),
        Case("c", "errs", Outcome("error", "unreadable", "input"), file="k8s.yaml", line=12),
        Case("c", "skipped", Outcome("skipped", "ignored: accepted"), seconds=0.25),
    )
    root = ET.fromstring(junit_xml(Suite("kvdoctor", "kvdoctor check", "model | GPU", cases, 1.5, (("verdict", "FAIL"),))))
    suite = root.find("testsuite")
    assert root.get("name") == "kvdoctor check"
    counts = [suite.get(k) for k in ("tests", "failures", "errors", "skipped", "time")]
    assert counts == ["4", "1", "1", "1", "1.500"]
    assert suite.find("properties/property").attrib == {"name": "verdict", "value": "FAIL"}
    errs = suite.find("testcase[@name='errs']")
    assert (errs.get("file"), errs.get("line"), errs.find("error").get("type")) == ("k8s.yaml", "12", "input")
    assert suite.find("testcase[@name='skipped']").get("time") == "0.250"
    assert suite.find("testcase[@name='fails']/failure").text == "details"


def test_no_properties_element_without_properties():
    root = ET.fromstring(junit_xml(Suite("kvdoctor scan", "kvdoctor scan", "0 workloads", (Case("s", "none"),), 0)))
    assert root.find("testsuite/properties") is None
