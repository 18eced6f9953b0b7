"""JSON for dashboards and scripts; the shape is kvdoctor/schemas/report.schema.json."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from kvdoctor import __version__
from kvdoctor.model.dry_run import to_json
from kvdoctor.model.report import SCHEMA_VERSION, Report


def to_dict(report: Report) -> dict[str, Any]:
    findings = []
    for finding in report.sorted_findings():
        entry = asdict(finding)
        entry["gates"] = finding.gates
        findings.append(entry)
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "kvdoctor", "version": __version__},
        "command": report.command,
        "verdict": report.verdict,
        "facts": {k: _plain(v) for k, v in sorted(report.facts.items())},
        "findings": findings,
        "dry_run": to_json(report.dry_run) if report.dry_run else None,
        "notes": list(report.notes),
        **({"explain": report.extra} if report.extra else {}),
    }


def _plain(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def render(report: Report, verbose: bool = False) -> str:
    return json.dumps(to_dict(report), indent=2, sort_keys=False, default=str) + "\n"
