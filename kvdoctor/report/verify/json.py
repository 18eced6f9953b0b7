"""JSON: the server's facts, what was checked, one entry per compared field (the shape is documented in
docs/verify.md). No header value appears, only where each came from."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from kvdoctor import __version__
from kvdoctor.verify.result import VERIFY_SCHEMA_VERSION, VerifyReport


def to_dict(report: VerifyReport) -> dict[str, Any]:
    server = report.server
    return {
        "schema_version": VERIFY_SCHEMA_VERSION,
        "tool": {"name": "kvdoctor", "version": __version__},
        "command": "verify",
        "verdict": report.verdict,
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
        "notes": list(report.notes),
        "seconds": round(report.seconds, 3),
    }


def render(report: VerifyReport, verbose: bool = False) -> str:
    return json.dumps(to_dict(report), indent=2, default=str) + "\n"
