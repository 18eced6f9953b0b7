"""Compile each fix that changes a dry-run input, and mark it verified or not.

Fix candidates are planned from the static verdict before the dry run, so the check's own compile and
its fix compiles share one compiler process.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kvdoctor.dryrun.kinds import kernel_roles_for
from kvdoctor.model.dry_run import DryRunReport, DryRunRequest, Status
from kvdoctor.model.report import Finding
from kvdoctor.rules.loader import Rule
from kvdoctor.dryrun.release_sources import source_at_least


def fix_candidates(findings: list[Finding], rules: list[Rule], request: DryRunRequest, cache_dir: Path | None,
                   fix_sources: tuple[str, ...], all_roles: bool = False,
                   offline: bool = True) -> dict[str, DryRunRequest]:  # fmt: skip
    """fix key -> the changed DryRunRequest, for the findings' rules' fixes that change a dry-run input.

    A fix key is 'RULE_ID:index' into the rule's fixes. Unless all_roles, a fix recompiles only the kernel
    roles that can show its rule's failure kind (the store kernel for the k8v4 key conversion). A vLLM
    upgrade fix compiles the oldest release at hand that qualifies; unless offline, the fix's minimum
    release is fetched from the package index when none is at hand.
    """
    rules_by_id = {r.id: r for r in rules}
    requests: dict[str, DryRunRequest] = {}
    for finding in findings:
        rule = rules_by_id.get(finding.rule_id)
        if rule is None:
            continue
        for index, spec in enumerate(rule.fixes):
            if not spec.dry_run:
                continue
            key = f"{rule.id}:{index}"
            changes: dict[str, object] = dict(spec.dry_run)
            if "capability" in changes:  # another GPU class, written "8.9"
                changes["capability"] = tuple(int(part) for part in str(changes["capability"]).split("."))
            if "vllm" in changes:
                minimum = str(changes.pop("vllm"))
                found = source_at_least(minimum, cache_dir, fix_sources, fetch=True, offline=offline)
                if found is None:  # no such wheel at hand: the probe kernel models that release's conversion
                    changes.update(use_probe=True, vllm_version=minimum)
                else:
                    changes.update(vllm_source=found[1], use_probe=False, vllm_version=found[0])
            roles = None if all_roles else _roles_for(rule.compile_kinds)
            requests[key] = replace(request, roles=roles, **changes)
    return requests


def attach_verifications(findings: list[Finding], outcomes: dict[str, DryRunReport]) -> list[Finding]:
    """Mark each fix of a fired finding with its compile outcome (outcomes: fix key -> its dry run)."""
    result = []
    for finding in findings:
        if finding.status != "fired":
            result.append(finding)
            continue
        fixes = []
        for index, fix in enumerate(finding.fixes):
            key = f"{finding.rule_id}:{index}"
            if key in outcomes:
                report = outcomes[key]
                verified = {Status.PASSED: "verified", Status.FAILED: "not_verified"}.get(report.status, "skipped")
                fix = replace(fix, verified=verified, verification_note=_describe(report))
            fixes.append(fix)
        result.append(replace(finding, fixes=tuple(fixes)))
    return result


def _describe(report: DryRunReport) -> str:
    """One line: what was recompiled, from which kernels, with what result."""
    request = report.request
    capability = ".".join(map(str, request.capability))
    turboquant = request.kv_cache_dtype.startswith("turboquant_")
    what = f"{request.kv_cache_dtype}, {request.model_dtype} {'keys' if turboquant else 'model'}, SM {capability}"
    if request.backend and not turboquant:
        what += f", {request.backend}"
    if report.status == Status.SKIPPED:
        return f"not compiled ({what}): {report.reason}"
    probe = report.source_label.startswith("kvdoctor probe")
    if probe:
        source = f"kvdoctor's probe kernel modelling vLLM {request.vllm_version or 'before 0.26.0'}"
    else:
        source = f"vLLM {report.vllm_version or '(unknown version)'}'s kernels"
    names = [k.kernel for k in report.kernels]
    # a kernel launched twice (unified attention 2D and 3D) is named with its role
    kernels = ", ".join(f"{k.kernel}{f' ({k.role})' if names.count(k.kernel) > 1 else ''} {k.status}" for k in report.kernels)
    if request.roles and not probe:
        kernels += f" (only the {'/'.join(request.roles)} kernel, where the failure was)"
    return f"recompiled with {source} ({what}): {kernels}"


def _roles_for(kinds: tuple[str, ...]) -> tuple[str, ...] | None:
    """The kernel roles that can show any of these failure kinds; None = every role."""
    roles: set[str] = set()
    for kind in kinds or (None,):
        found = kernel_roles_for(kind)
        if found is None:
            return None
        roles.update(found)
    return tuple(sorted(roles))
