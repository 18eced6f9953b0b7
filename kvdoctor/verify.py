"""Compile each fix that changes a dry-run input, and mark it verified or not."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kvdoctor.report import Finding, Fix
from kvdoctor.rules.loader import Rule
from kvdoctor.vllm_sources import source_at_least


def verify_finding_fixes(findings: list[Finding], rules: list[Rule], request, settings, cache_dir: Path | None) -> list[Finding]:
    """Fired findings with dry-run-backed fixes get each such fix compiled and marked."""
    from kvdoctor.dryrun import verify_fixes

    rules_by_id = {r.id: r for r in rules}
    result = []
    for finding in findings:
        rule = rules_by_id.get(finding.rule_id)
        if finding.status != "fired" or rule is None or not any(f.dry_run for f in rule.fixes):
            result.append(finding)
            continue
        candidates, unverifiable = [], {}
        for index, spec in enumerate(rule.fixes):
            if not spec.dry_run:
                continue
            changes = dict(spec.dry_run)
            if "vllm" in changes:
                found = source_at_least(changes.pop("vllm"), cache_dir, settings.fix_sources)
                if found is None:
                    unverifiable[index] = (
                        f"no vLLM >= {dict(spec.dry_run)['vllm']} source to compile; "
                        "pass --fix-source WHEEL (e.g. from `pip download --no-deps vllm==0.27.0`)"
                    )
                    continue
                changes.update(vllm_source=found[1], use_probe=False)
            candidates.append((str(index), changes))
        outcomes = {
            v.fix_id: v
            for v in verify_fixes(
                request, candidates, cache_dir=cache_dir, use_cache=settings.use_cache, timeout_s=settings.compile_timeout_s
            )
        } if candidates else {}
        fixes = []
        for index, fix in enumerate(finding.fixes):
            outcome = outcomes.get(str(index))
            if outcome is not None:
                fixes.append(replace(fix, verified=outcome.status, verification_note=_describe(outcome)))
            elif index in unverifiable:
                fixes.append(replace(fix, verified="not_verified", verification_note=unverifiable[index]))
            else:
                fixes.append(fix)
        result.append(replace(finding, fixes=tuple(fixes)))
    return result


def _describe(outcome) -> str:
    changes = ", ".join(f"{k}={v}" for k, v in sorted(outcome.changes.items()) if k != "use_probe")
    report = outcome.report
    if report is None:
        return f"not compiled ({changes})"
    kernels = ", ".join(f"{k.kernel} {k.status}" for k in report.kernels)
    return f"recompiled with {changes}: {kernels}"
