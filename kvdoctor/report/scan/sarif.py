"""SARIF 2.1.0 with physical locations in the manifests: GitHub code scanning annotates the YAML line."""

from __future__ import annotations

from typing import Any

from kvdoctor.model.report import Finding
from kvdoctor.report import sarif
from kvdoctor.report.scan.summary import workload_context
from kvdoctor.report.wording import fix_line
from kvdoctor.scan.result import PlacedFinding, ScanReport, WorkloadResult
from kvdoctor.scan.workload import Location


def render(report: ScanReport, verbose: bool = False) -> str:
    placed = [(w, p) for w in report.workloads for p in w.placed if p.finding.status == "fired" or verbose]
    rules: dict[str, Finding] = {}
    for _, p in placed:
        rules.setdefault(p.finding.rule_id, p.finding)
    results = [_result(w, p) for w, p in placed] + [_error_result(w) for w in report.workloads if w.error is not None]
    results += [sarif.Result("kvdoctor/not-read", u.message, "error", members=(("locations", [_where(u.location)]),))
                for u in report.unread]  # fmt: skip
    run = sarif.Run(
        rules=tuple(_rule(rules[r]) for r in sorted(rules)),
        results=tuple(results),
        properties={"verdict": report.verdict, "counts": report.counts()},
        notifications=tuple(("note", n) for n in report.notes),
        artifacts=tuple(f for f in report.files if f != "<stdin>"),
    )
    return sarif.sarif_log(run)


def _rule(finding: Finding) -> sarif.Rule:
    help_uri = finding.references[0] if finding.references else None
    return sarif.Rule(finding.rule_id, finding.title, finding.severity, ("vllm", "kv-cache", "deployment"), help_uri)


def _where(location: Location) -> dict[str, Any]:
    return sarif.location(sarif.Location(location.file, location.line, location.what))


def _result(workload: WorkloadResult, placed: PlacedFinding) -> sarif.Result:
    f = placed.finding
    text = f"{workload.workload.title}: {f.title}. {f.cause}"
    if f.fixes:
        text += " Fixes: " + "; ".join(fix_line(x) for x in f.fixes) + "."
    members: list[tuple[str, Any]] = [
        ("locations", [_where(placed.location)]),
        ("partialFingerprints", {"kvdoctorWorkload/v1": f"{workload.workload.file}#{workload.workload.title}#{f.rule_id}"}),
        ("properties", {"workload": workload.workload.title, "context": workload_context(workload),
                        "status": f.status, "gates": f.gates, "evidence": list(f.evidence)}),
    ]  # fmt: skip
    if placed.related:
        members.append(("relatedLocations", [dict(_where(r), id=n) for n, r in enumerate(placed.related, 1)]))
    return sarif.Result(f.rule_id, text, f.severity, f.status == "undecided", f.ignored_reason, tuple(members))


def _error_result(workload: WorkloadResult) -> sarif.Result:
    where = workload.error_location or workload.workload.at(workload.workload.line)
    text = f"{workload.workload.title} could not be checked: {workload.error}"
    return sarif.Result("kvdoctor/not-checked", text, "error", members=(("locations", [_where(where)]),))
