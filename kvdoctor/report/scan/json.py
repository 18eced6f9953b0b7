"""JSON: `workloads[]`, each with where it is, its manifest-located findings and its full check report
(the check report's shape is report.schema.json); the whole is kvdoctor/schemas/scan.schema.json."""

from __future__ import annotations

import json
from typing import Any

from kvdoctor import __version__
from kvdoctor.report.check.json import to_dict as report_dict
from kvdoctor.scan.result import SCAN_SCHEMA_VERSION, ScanReport, WorkloadResult
from kvdoctor.scan.workload import Location


def location(where: Location | None) -> dict[str, Any] | None:
    if where is None:
        return None
    return {"file": where.file, "line": where.line, "value": where.what}


def workload_dict(result: WorkloadResult) -> dict[str, Any]:
    w = result.workload
    return {
        "file": w.file,
        "line": w.line,
        "platform": w.platform,
        "kind": w.kind,
        "name": w.name,
        "namespace": w.namespace,
        "container": w.container,
        "image": w.image,
        "verdict": result.verdict,
        "unjudged": list(result.unjudged),
        "error": None if result.error is None else {"message": result.error, "location": location(result.error_location)},
        "findings": [
            {"rule_id": p.finding.rule_id, "severity": p.finding.severity, "status": p.finding.status,
             "gates": p.finding.gates, "title": p.finding.title, "location": location(p.location),
             "related": [location(r) for r in p.related]}
            for p in result.placed
        ],  # fmt: skip
        "sources": {name: location(where) for name, where in sorted(result.sources.items())},
        "report": report_dict(result.report) if result.report is not None else None,
    }


def to_dict(report: ScanReport) -> dict[str, Any]:
    return {
        "schema_version": SCAN_SCHEMA_VERSION,
        "tool": {"name": "kvdoctor", "version": __version__},
        "command": "scan",
        "verdict": report.verdict,
        "files": list(report.files),
        "counts": report.counts(),
        "workloads": [workload_dict(w) for w in report.workloads],
        "unread": [{"message": u.message, "hint": u.hint, "location": location(u.location)} for u in report.unread],
        "notes": list(report.notes),
    }


def render(report: ScanReport, verbose: bool = False) -> str:
    return json.dumps(to_dict(report), indent=2, default=str) + "\n"
