"""Join the static verdict and the compiled one, so one explanation serves both and disagreements show."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvdoctor.model.dry_run import DryRunReport, Status
from kvdoctor.model.report import Finding
from kvdoctor.rules.engine import finding_for
from kvdoctor.rules.loader import Rule


def compile_evidence(dry_run: DryRunReport) -> list[str]:
    """One line per compiled kernel, plus the innermost cause of each failure."""
    lines = [f"dry run: {dry_run.source_label}"]
    for kernel in dry_run.kernels:
        cached = ", cached" if kernel.cached else ""
        verb = "checked" if kernel.role == "guard" else "compiled"  # vLLM's start-up guard is no kernel
        lines.append(f"{verb} {kernel.kernel} ({kernel.role}): {kernel.status}{cached}")
        failure = kernel.failure
        if failure and failure.innermost_type is None:  # no exception: a changed layout, a timeout, a crash
            lines.append(f"  {failure.kind}: {failure.message or 'no message'}")
        elif failure:
            raised = failure.triton_file
            if raised:
                raised = f"{raised}:{failure.triton_line} in {failure.triton_function}"
            lines.append(
                f"  innermost cause: {failure.innermost_type}"
                + (f": {failure.innermost_message}" if failure.innermost_message else "")
                + (f" (raised in {raised})" if raised else "")
            )
            if failure.kernel_source_line:
                lines.append(f"  kernel line {failure.kernel_file}:{failure.kernel_line}: {failure.kernel_source_line.strip()}")
        elif kernel.note:
            lines.append(f"  {kernel.note}")
    return lines


def reconcile_with_dry_run(
    findings: list[Finding], rules: list[Rule], facts: dict[str, Any], dry_run: DryRunReport | None
) -> list[Finding]:
    """Attach compile evidence to the rules that explain it; fire them when only the compile saw it;
    flag a rule whose predicted failure the compile did not reproduce."""
    if dry_run is None:
        return findings
    kind = facts.get("dryrun.failure_kind")
    status = facts.get("dryrun.status")
    # A probe kernel stands in for vLLM's: it may confirm a rule, never overrule one whose facts say no
    # (fp8 KV on SM80-88 fails the probe's e4m3 cast, yet vLLM serves it through FlashInfer).
    real_kernels = facts.get("dryrun.source") == "vllm"
    evidence = tuple(compile_evidence(dry_run))
    by_id = {f.rule_id: f for f in findings}
    # several rules may explain one kind (fp8e4nv: Triton attention, Triton MLA): when one of them fired, the
    # compile confirms it, and the others stay quiet rather than fire against their own conditions
    explained_by_fired = any(kind in r.compile_kinds and getattr(by_id.get(r.id), "status", None) == "fired"
                             for r in rules)  # fmt: skip
    result = list(findings)
    for rule in rules:
        if not rule.compile_kinds:
            continue
        finding = by_id.get(rule.id)
        fired = finding is not None and finding.status == "fired"
        if kind in rule.compile_kinds:
            if fired:
                updated = replace(finding, evidence=finding.evidence + evidence)
            elif (finding is None and not real_kernels) or explained_by_fired:
                continue
            else:
                base = finding or finding_for(rule, facts)
                note = (
                    "the dry-run compile hit this failure although the static conditions did not predict it "
                    f"({'some facts unknown' if finding else 'a new failure, or a stale rule'})"
                )
                updated = replace(base, status="fired", decided_by=(), evidence=base.evidence + (note,) + evidence)
            result = [updated if f is finding else f for f in result] if finding else result + [updated]
        elif fired and status == Status.PASSED and real_kernels:
            note = (
                f"DISAGREEMENT: the dry run compiled the kernel for this target and it passed; "
                f"rule {rule.id} (checked against {rule.checked_against}) may be stale for this vLLM/Triton"
            )
            result = [replace(f, evidence=f.evidence + (note,) + evidence) if f is finding else f for f in result]
    return result
