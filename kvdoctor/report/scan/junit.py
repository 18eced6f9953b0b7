"""JUnit XML: one test case per workload (a failure lists its gating findings with their manifest lines)."""

from __future__ import annotations

from kvdoctor.report.junit import Case, Outcome, Suite, junit_xml
from kvdoctor.report.scan.summary import summary_line, workload_context
from kvdoctor.report.wording import fix_line
from kvdoctor.scan.result import ScanReport, WorkloadResult


def render(report: ScanReport, verbose: bool = False) -> str:
    cases = [Case(u.location.file, "file not read", Outcome("error", u.message, "input"), file=u.location.file,
                  line=u.location.line) for u in report.unread]  # fmt: skip
    cases += [_case(result) for result in report.workloads]
    if not report.workloads:
        nothing = None if report.verdict == "PASS" else Outcome("error", "no vLLM workload found: nothing checked", "input")
        cases.append(Case("kvdoctor.scan", "no vLLM workload found", nothing))
    seconds = sum(w.report.dry_run.seconds for w in report.workloads if w.report and w.report.dry_run)
    return junit_xml(Suite("kvdoctor scan", "kvdoctor scan", summary_line(report), tuple(cases), seconds))


def _case(result: WorkloadResult) -> Case:
    w = result.workload
    if result.report is None:
        error = Outcome("error", f"not checked: {result.error}", "input", f"{result.error_location}: {result.error}")
        return Case(w.file, w.title, error, file=w.file, line=w.line)
    gating = [p for p in result.placed if p.finding.gates and p.finding.severity in ("error", "warning")]
    failing = [p for p in gating if p.finding.severity == "error"] or (gating if result.verdict == "WARN" else [])
    failure = None
    if result.error is not None:
        failure = Outcome("error", f"not checked: {result.error}", "input", f"{result.error_location}: {result.error}")
    elif failing:
        worst = failing[0].finding
        lines = [workload_context(result)]
        for p in gating:
            lines.append(f"{p.location}: {p.finding.severity} {p.finding.rule_id} {p.finding.title}")
            lines += [f"  fix: {fix_line(x)}" for x in p.finding.fixes]
        failure = Outcome("failure", f"{result.verdict}: {worst.rule_id} {worst.title}", worst.severity, "\n".join(lines))
    output = "\n".join([workload_context(result), *(f"not judged: {u}" for u in result.unjudged), *result.report.notes])
    return Case(w.file, w.title, failure, output, file=w.file, line=w.line)
