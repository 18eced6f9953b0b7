"""Words every scan format repeats: the summary line and a workload's deployment (not itself a format)."""

from __future__ import annotations

from kvdoctor.report.wording import deployment_line
from kvdoctor.scan.result import VERDICT_ORDER, ScanReport, WorkloadResult


def summary_line(report: ScanReport) -> str:
    """'3 workloads in 2 files: 2 FAIL, 1 PASS'."""
    counts = ", ".join(f"{n} {v}" for v, n in sorted(report.counts().items(), key=lambda c: -VERDICT_ORDER[c[0]]) if n)
    files = f"{len(report.files)} file{'s' if len(report.files) != 1 else ''}"
    count = len(report.workloads)
    head = f"{count} vLLM workload{'s' if count != 1 else ''} in {files}"
    if report.unread:
        head += f", {len(report.unread)} file{'s' if len(report.unread) != 1 else ''} not read"
    if not report.workloads:
        head += ": nothing checked"
    return f"{head}: {counts}" if counts else head


def workload_context(result: WorkloadResult) -> str:
    """The check's deployment line (model | kv dtype | GPU | vLLM), or why it could not be checked."""
    if result.report is None:
        return f"not checked: {result.error}"
    line = deployment_line(result.report)
    if any(u.startswith("model unknown") for u in result.unjudged):  # checked without the model: say which one
        model = result.sources.get("model.")
        shown = model.what.removeprefix("model ") if model and model.what else "the model"
        line = line.replace("no model", f"{shown} (config not read: model-independent checks only)", 1)
    return line
