"""SARIF: results point at their rule, an undecided one is 'open' with level 'none', an ignored one is suppressed."""

from __future__ import annotations

import json

from kvdoctor.report.sarif import Location, Result, Rule, Run, location, sarif_log


def _run(**changes) -> dict:
    rules = (Rule("KVD101", "crash", "error", ("vllm",), "https://example.org/1"), Rule("KVD122", "slow", "warning", ()))
    results = (
        Result("KVD122", "slow.", "warning", undecided=True),
        Result("KVD101", "crash.", "error", suppressed_because="accepted",
               members=(("locations", [location(Location("k8s.yaml", 9, "--kv-cache-dtype fp8"))]),)),
        Result("kvdoctor/not-checked", "unreadable", "error"),
    )  # fmt: skip
    run = Run(rules, results, {"verdict": "FAIL"}, **changes)
    return json.loads(sarif_log(run))["runs"][0]


def test_results_rules_levels_and_suppressions():
    run = _run()
    rules = run["tool"]["driver"]["rules"]
    undecided, ignored, error = run["results"]
    assert rules[undecided["ruleIndex"]]["id"] == "KVD122" and rules[ignored["ruleIndex"]]["id"] == "KVD101"
    assert (undecided["kind"], undecided["level"]) == ("open", "none")
    assert (ignored["kind"], ignored["level"]) == ("fail", "error")
    assert ignored["suppressions"] == [{"kind": "external", "justification": "accepted"}]
    assert ignored["locations"][0]["physicalLocation"]["region"] == {"startLine": 9}
    assert "ruleIndex" not in error and rules[0]["helpUri"] == "https://example.org/1" and "helpUri" not in rules[1]


def test_notifications_and_artifacts_only_when_given():
    assert "toolExecutionNotifications" not in _run()["invocations"][0] and "artifacts" not in _run()
    run = _run(notifications=(), artifacts=("k8s.yaml",))
    assert run["invocations"][0]["toolExecutionNotifications"] == []
    assert run["artifacts"] == [{"location": {"uri": "k8s.yaml"}}]
