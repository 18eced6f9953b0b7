import xml.etree.ElementTree as ET

from formats_support import IGNORE_REASON, failing_report, passing_report

from kvdoctor.report.check import junit


def _cases(xml_text: str) -> dict[str, ET.Element]:
    root = ET.fromstring(xml_text)
    return {c.get("name"): c for c in root.iter("testcase")}


def test_one_case_per_rule_and_per_kernel_with_failures_counted(tmp_path):
    report = failing_report(tmp_path)
    root = ET.fromstring(junit.render(report))
    suite = root.find("testsuite")
    cases = _cases(junit.render(report))
    kvd101 = next(c for n, c in cases.items() if n.startswith("KVD101 "))
    assert kvd101.find("failure").get("type") == "error"
    assert "--dtype float16" in kvd101.find("failure").text  # the fix travels with the failure
    ignored = next(c for n, c in cases.items() if n.startswith("KVD104 "))
    assert ignored.find("failure") is None and IGNORE_REASON in ignored.find("skipped").get("message")
    store = next(c for n, c in cases.items() if n.startswith("_tq_fused_store_fp8"))
    assert store.get("classname") == "kvdoctor.dry_run"
    assert store.find("failure").get("type") == "bf16_to_fp8e4b15_assert"
    decode = next(c for n, c in cases.items() if n.startswith("_tq_decode_stage1"))
    assert decode.find("failure") is None and "(cached)" in decode.find("system-out").text
    # every rule checked (passing ones as passing cases) + 2 kernels; KVD101, KVD102 and the store kernel
    # fail; KVD104 is skipped
    expected_tests = len(set(report.rules_checked) | {"KVD101", "KVD102", "KVD104"}) + 2
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == (str(expected_tests), "3", "1")


def test_passing_report_shows_every_rule_as_a_passing_case(tmp_path):
    report = passing_report(tmp_path)
    root = ET.fromstring(junit.render(report))
    suite = root.find("testsuite")
    kernels = len((report.dry_run or {}).get("kernels", []))
    assert suite.get("tests") == str(len(report.rules_checked) + kernels) and suite.get("failures") == "0"
    assert "KVD101 " in " ".join(_cases(junit.render(report)))
    assert root.find(".//property[@name='verdict']").get("value") == "PASS"
