"""What `kvdoctor scan` concluded: one check report per workload, each finding placed on a manifest line."""

from __future__ import annotations

from dataclasses import dataclass, field

from kvdoctor.model.report import Finding, Report
from kvdoctor.scan.workload import Location, Workload

SCAN_SCHEMA_VERSION = "1.0"
VERDICT_ORDER = {"PASS": 0, "WARN": 1, "FAIL": 2, "ERROR": 3}


@dataclass(frozen=True)
class PlacedFinding:
    finding: Finding
    location: Location
    """The line of the flag or value that causes the finding."""
    related: tuple[Location, ...] = ()
    """Other manifest values the finding was judged on."""


@dataclass(frozen=True)
class WorkloadResult:
    workload: Workload
    report: Report | None
    """The full check report (deployment rules included); None when the workload could not be checked."""
    placed: tuple[PlacedFinding, ...] = ()
    """The report's findings in its sorted order, each with its manifest location."""
    sources: dict[str, Location] = field(default_factory=dict)
    """Fact name -> the manifest line it was read from."""
    error: str | None = None
    """Why the workload could not be checked (an input problem, e.g. a model kvdoctor cannot find)."""
    error_location: Location | None = None

    @property
    def verdict(self) -> str:
        return "ERROR" if self.report is None else self.report.verdict

    def exit_code(self, fail_on: str) -> int:
        return 2 if self.report is None else self.report.exit_code(fail_on)


@dataclass(frozen=True)
class ScanReport:
    files: tuple[str, ...]
    """Every file read."""
    workloads: tuple[WorkloadResult, ...]
    notes: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        """The worst workload verdict; PASS when there are none."""
        return max((w.verdict for w in self.workloads), key=VERDICT_ORDER.get, default="PASS")

    def exit_code(self, fail_on: str) -> int:
        """2 when a workload could not be checked, else 1 when one reaches ``fail_on``, else 0."""
        codes = [w.exit_code(fail_on) for w in self.workloads]
        return 2 if 2 in codes else max(codes, default=0)

    def counts(self) -> dict[str, int]:
        found = {v: 0 for v in VERDICT_ORDER}
        for w in self.workloads:
            found[w.verdict] += 1
        return found


