"""JSON in scan's envelope (issue 26: scan and verify share the report format): schema_version, tool, command,
verdict, counts and a list of checked targets, each with its verdict, exit code and findings placed where their values
were read (kvdoctor/schemas/envelope.schema.json); verify's own fields beside them (kvdoctor/schemas/verify.schema.json,
docs/verify.md). No header value appears, only where each came from."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from kvdoctor import __version__
from kvdoctor.verify.compare import MISMATCH, Comparison
from kvdoctor.verify.result import VERIFY_SCHEMA_VERSION, VerifyReport

VERDICTS = ("PASS", "WARN", "FAIL", "ERROR")


def finding(comparison: Comparison, fail_on: str) -> dict[str, Any]:
    """A comparison that is not a plain match, as scan writes a finding: id, severity, fired (a mismatch) or
    undecided (a field a PASS needs, unknown on one side), whether it gates under --fail-on, and where each value is."""
    mismatch = comparison.status == MISMATCH
    return {
        "rule_id": f"verify.{comparison.field}",
        "severity": comparison.severity,
        "status": "fired" if mismatch else "undecided",
        "gates": fail_on != "never" and (mismatch or fail_on in ("warning", "undecided")),
        "title": comparison.line(),
        "location": {"file": comparison.served_from, "line": None, "value": _value(comparison.served)},
        "related": [{"file": comparison.checked_from, "line": None, "value": _value(comparison.checked)}]
        if comparison.checked_from else [],
    }


def _value(value: Any) -> str | None:
    return None if value is None else str(value)


def target(report: VerifyReport) -> dict[str, Any]:
    """The one checked target: the server."""
    return {
        "url": report.url,
        "verdict": report.verdict,
        "exit_code": report.exit_code(report.fail_on),
        "fail_on": report.fail_on,
        "checked_against": report.checked.source,
        "findings": [finding(c, report.fail_on) for c in report.comparisons
                     if c.status == MISMATCH or c.severity == "warning"],
    }


def to_dict(report: VerifyReport) -> dict[str, Any]:
    server = report.server
    return {
        "schema_version": VERIFY_SCHEMA_VERSION,
        "tool": {"name": "kvdoctor", "version": __version__},
        "command": "verify",
        "verdict": report.verdict,
        "counts": {v: int(v == report.verdict) for v in VERDICTS},
        "targets": [target(report)],
        "url": report.url,
        "checked": {"source": report.checked.source, "verdict": report.checked.verdict},
        "comparisons": [asdict(c) | {"severity": c.severity} for c in report.comparisons],
        "server": {
            "version": server.version,
            "health_status": server.health_status,
            "models": [asdict(m) for m in server.models],
            "cache_config": dict(sorted(server.metrics.cache_config.items())),
            "kv_usage": server.metrics.kv_usage,
            "completion": asdict(server.completion) if server.completion else None,
            "seconds": server.seconds,
        },
        "headers_sent": list(report.credentials),
        "tls": report.tls,
        "notes": list(report.notes),
        "seconds": round(report.seconds, 3),
    }


def render(report: VerifyReport, verbose: bool = False) -> str:
    return json.dumps(to_dict(report), indent=2, default=str) + "\n"
