"""SARIF 2.1.0 with physical locations in the manifests: GitHub code scanning annotates the YAML line."""

from __future__ import annotations

import json
from typing import Any

from kvdoctor import __version__
from kvdoctor.report.formats._context import fix_line, state
from kvdoctor.report.formats.sarif import INFORMATION_URI, LEVEL, SCHEMA_URI
from kvdoctor.model.report import Finding
from kvdoctor.report.scan._shared import workload_context
from kvdoctor.scan.result import PlacedFinding, ScanReport, WorkloadResult
from kvdoctor.scan.workload import Location


def render(report: ScanReport, verbose: bool = False) -> str:
    placed = [(w, p) for w in report.workloads for p in w.placed if p.finding.status == "fired" or verbose]
    rules: dict[str, Finding] = {}
    for _, p in placed:
        rules.setdefault(p.finding.rule_id, p.finding)
    rule_ids = sorted(rules)
    results = [_result(w, p, rule_ids.index(p.finding.rule_id)) for w, p in placed]
    results += [_error_result(w) for w in report.workloads if w.report is None]
    run: dict[str, Any] = {
        "tool": {"driver": {"name": "kvdoctor", "version": __version__, "informationUri": INFORMATION_URI,
                            "rules": [_rule(rules[r]) for r in rule_ids]}},  # fmt: skip
        "results": results,
        "artifacts": [{"location": {"uri": f}} for f in report.files if f != "<stdin>"],
        "invocations": [{"executionSuccessful": True,
                         "toolExecutionNotifications": [{"level": "note", "message": {"text": n}} for n in report.notes]}],
        "properties": {"verdict": report.verdict, "counts": report.counts()},
    }  # fmt: skip
    return json.dumps({"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}, indent=2, default=str) + "\n"


def _rule(finding: Finding) -> dict[str, Any]:
    rule: dict[str, Any] = {
        "id": finding.rule_id,
        "shortDescription": {"text": finding.title},
        "defaultConfiguration": {"level": LEVEL[finding.severity]},
        "properties": {"tags": ["vllm", "kv-cache", "deployment"]},
    }
    if finding.references:
        rule["helpUri"] = finding.references[0]
    return rule


def physical(where: Location) -> dict[str, Any]:
    location: dict[str, Any] = {"physicalLocation": {"artifactLocation": {"uri": where.file}}}
    if where.line:
        location["physicalLocation"]["region"] = {"startLine": where.line}
    if where.what:
        location["message"] = {"text": where.what}
    return location


def _result(workload: WorkloadResult, placed: PlacedFinding, index: int) -> dict[str, Any]:
    f = placed.finding
    text = f"{workload.workload.title}: {f.title}. {f.cause}"
    if f.fixes:
        text += " Fixes: " + "; ".join(fix_line(x) for x in f.fixes) + "."
    result: dict[str, Any] = {
        "ruleId": f.rule_id,
        "ruleIndex": index,
        "kind": "open" if f.status == "undecided" else "fail",
        "level": "none" if f.status == "undecided" else LEVEL[f.severity],
        "message": {"text": text},
        "locations": [physical(placed.location)],
        "partialFingerprints": {"kvdoctorWorkload/v1": f"{workload.workload.file}#{workload.workload.title}#{f.rule_id}"},
        "properties": {"workload": workload.workload.title, "context": workload_context(workload),
                       "status": f.status, "gates": f.gates, "evidence": list(f.evidence)},
    }  # fmt: skip
    if placed.related:
        result["relatedLocations"] = [dict(physical(r), id=n) for n, r in enumerate(placed.related, 1)]
    if state(f) == "ignored":
        result["suppressions"] = [{"kind": "external", "justification": f.ignored_reason}]
    return result


def _error_result(workload: WorkloadResult) -> dict[str, Any]:
    return {
        "ruleId": "kvdoctor/not-checked",
        "kind": "fail",
        "level": "error",
        "message": {"text": f"{workload.workload.title} could not be checked: {workload.error}"},
        "locations": [physical(workload.error_location or workload.workload.at(workload.workload.line))],
    }
