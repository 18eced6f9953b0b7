"""JSON for dashboards and scripts; the shape is kvdoctor/schemas/report.schema.json."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from kvdoctor import __version__
from kvdoctor.model.dry_run import to_json
from kvdoctor.model.report import SCHEMA_VERSION, Report
from kvdoctor.report.check.fit import fit_summary


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
        **({"fit": _fit(report)} if report.command == "check" else {}),
        **({"explain": report.extra} if report.extra else {}),
    }


def _fit(report: Report) -> dict[str, Any] | None:
    """What vLLM will log when it sizes the KV cache, and its inputs (schema 1.3); None without memory facts."""
    fit = fit_summary(report)
    if fit is None:
        return None
    return {
        "judged": fit.judged,
        "state": fit.state,
        "why_not": fit.why_not,
        "available_kv_bytes": fit.available_kv_bytes,
        "available_kv_gib": fit.available_kv_gib,
        "band_gib": fit.band_gib,
        "kv_cache_tokens": fit.kv_cache_tokens,
        "max_model_len": fit.max_model_len,
        "max_concurrency": fit.max_concurrency,
        "vllm_log": list(fit.vllm_log),
        "vllm_error": fit.vllm_error,
        "inputs": {
            "weights_bytes": fit.weights_bytes,
            "weights_source": fit.weights_source,
            "weights_estimated": fit.weights_estimated,
            "kv_budget_source": fit.kv_budget_source,
            "kv_bytes_per_token": fit.kv_bytes_per_token,
            "block_size": fit.block_size,
        },
    }


def _plain(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def render(report: Report, verbose: bool = False) -> str:
    return json.dumps(to_dict(report), indent=2, sort_keys=False, default=str) + "\n"
