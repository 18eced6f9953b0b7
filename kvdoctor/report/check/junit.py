"""JUnit XML for CI test tabs: one test case per rule and per compiled kernel."""

from __future__ import annotations

from dataclasses import asdict

from kvdoctor.model.dry_run import KernelResult, Status
from kvdoctor.model.report import Finding, Report
from kvdoctor.report.junit import Case, Outcome, Suite, junit_xml
from kvdoctor.report.wording import deployment_line, fix_line, kernels, rules_checked, state


def render(report: Report, verbose: bool = False) -> str:
    properties = [("verdict", report.verdict)]
    if verbose:
        properties += [(name, "" if value is None else str(value)) for name, value in sorted(report.facts.items())]
    by_rule = {f.rule_id: f for f in report.findings}
    cases = [Case("kvdoctor.rules", rule_id) for rule_id in sorted(set(rules_checked(report)) - set(by_rule))]
    cases += [_rule_case(f) for f in report.sorted_findings()]
    cases += [_kernel_case(k, report.dry_run.source_label) for k in kernels(report)]
    if not cases:  # no rule fired, no kernel compiled: still one visible, passing case
        cases.append(Case("kvdoctor", "verdict"))
    seconds = report.dry_run.seconds if report.dry_run else 0.0
    suite = Suite("kvdoctor", "kvdoctor check", deployment_line(report), tuple(cases), seconds, tuple(properties))
    return junit_xml(suite)


def _rule_case(finding: Finding) -> Case:
    name = f"{finding.rule_id} {finding.title}"
    how = state(finding)
    if how == "ignored":
        return Case("kvdoctor.rules", name, Outcome("skipped", f"ignored: {finding.ignored_reason}"), finding.cause)
    if how == "undecided":
        why = "\n".join(f"decided by {d}" for d in finding.decided_by)
        skipped = Outcome("skipped", f"undecided {finding.severity}: unknown facts decide it", text=why)
        return Case("kvdoctor.rules", name, skipped, finding.cause)
    if finding.severity == "info":
        return Case("kvdoctor.rules", name, output=finding.cause)
    return Case("kvdoctor.rules", name, Outcome("failure", finding.title, finding.severity, _details(finding)))


def _details(finding: Finding) -> str:
    lines = [f"Cause: {finding.cause}"]
    lines += ["Evidence:"] + [f"  {e}" for e in finding.evidence] if finding.evidence else []
    lines += ["Fixes:"] + [f"  {n}. {fix_line(f)}" for n, f in enumerate(finding.fixes, 1)] if finding.fixes else []
    lines += ["References: " + " ".join(finding.references)] if finding.references else []
    return "\n".join(lines)


def _kernel_case(kernel: KernelResult, source: str) -> Case:
    target = kernel.inputs.get("target") or ""
    name = f"{kernel.kernel} [{kernel.role}]{' ' + str(target) if target else ''}"
    outcome = None
    if kernel.status.is_failure:
        kind = kernel.failure.kind if kernel.failure else str(kernel.status)
        details = asdict(kernel.failure) if kernel.failure else {}
        text = "\n".join(f"{k}: {v}" for k, v in details.items() if v is not None and k != "kind") or str(kernel.note or "")
        outcome = Outcome("failure", f"{kernel.status}: {kind}", kind, text)
    elif kernel.status == Status.SKIPPED:
        outcome = Outcome("skipped", kernel.note or "skipped")
    output = f"compiled from {source}{' (cached)' if kernel.cached else ''}" if source else None
    return Case("kvdoctor.dry_run", name, outcome, output, seconds=kernel.seconds)
