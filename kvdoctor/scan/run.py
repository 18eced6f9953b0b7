"""The scan: read every file first (an unreadable one stops it before any check), then judge each workload."""

from __future__ import annotations

from typing import Callable

from kvdoctor.check.run import CheckSettings
from kvdoctor.scan import compose, helm_values, kubernetes
from kvdoctor.scan.documents import Document, compose_documents, discover
from kvdoctor.scan.judge import ScanDefaults, judge
from kvdoctor.scan.result import ScanReport, WorkloadResult
from kvdoctor.scan.workload import Workload

# (is this document of the kind, its reader); first match wins, documents of no kind are skipped silently.
READERS = (
    (kubernetes.is_kubernetes, kubernetes.workloads),
    (compose.is_compose, compose.workloads),
    (helm_values.is_production_stack_values, helm_values.workloads),
)


def find_workloads(paths: list[str]) -> tuple[list[str], list[Workload], list[str]]:
    """(files read, vLLM workloads in them, notes); raises ManifestError for unreadable input."""
    files, notes = discover(paths)
    found: list[Workload] = []
    for source in files:
        for doc in compose_documents(source):
            found += read_document(doc, source.text)
    return [f.path for f in files], found, notes


def read_document(doc: Document, source_text: str) -> list[Workload]:
    for applies, read in READERS:
        if applies(doc.root):
            return read(doc, source_text)
    return []


def run_scan(paths: list[str], defaults: ScanDefaults, settings: CheckSettings,
             on_workload: Callable[[WorkloadResult], None] | None = None) -> ScanReport:  # fmt: skip
    files, workloads, notes = find_workloads(paths)
    results = []
    for workload in workloads:
        result = judge(workload, defaults, settings)
        results.append(result)
        if on_workload is not None:
            on_workload(result)
    if not workloads:
        notes.append(f"no vLLM workload in {len(files)} file(s): nothing runs vllm serve or vLLM's OpenAI server")
    return ScanReport(tuple(files), tuple(results), tuple(notes))
