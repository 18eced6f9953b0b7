"""What `kvdoctor scan` concluded: one check report per workload, each finding placed on a manifest line."""

from __future__ import annotations

from dataclasses import dataclass, field

from kvdoctor.model.report import Finding, Report
from kvdoctor.scan.workload import Location, Workload

SCAN_SCHEMA_VERSION = "1.0"
VERDICT_ORDER = {"PASS": 0, "WARN": 1, "FAIL": 2, "ERROR": 3}
"""A workload's verdicts, best first; a whole scan may also be NONE: no vLLM workload found, nothing checked."""


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
    """Why the workload could not be checked (an input problem, e.g. a model kvdoctor cannot find); with a report,
    what was left out of it (a flag value kvdoctor refuses: the rest was checked without that flag)."""
    error_location: Location | None = None
    internal: bool = False
    """True when judging it hit a kvdoctor bug (its error says which): exit 3, the other workloads still judged."""
    unjudged: tuple[str, ...] = ()
    """What the check could not judge and why (the model not read here, no GPU named), each naming the flag that
    supplies it: only what does not depend on those was checked, and the verdict is never a PASS then."""

    @property
    def verdict(self) -> str:
        if self.report is None or self.error is not None:
            return "ERROR"
        if self.unjudged and self.report.verdict == "PASS":
            return "WARN"  # the rules that need the model or the GPU were not judged
        return self.report.verdict

    def exit_code(self, fail_on: str) -> int:
        if self.internal:
            return 3
        return 2 if self.report is None or self.error is not None else self.report.exit_code(fail_on)


@dataclass(frozen=True)
class UnreadFile:
    """A file the scan could not read (malformed or templated YAML, not UTF-8, too large); the others are checked."""

    location: Location
    message: str
    """One line, starting with the file (and line)."""
    hint: str | None = None

    @classmethod
    def of(cls, error) -> "UnreadFile":
        """From a ManifestError whose message starts with FILE or FILE:LINE."""
        head = error.message.split(": ", 1)[0]
        file, _, line = head.rpartition(":")
        where = Location(file, int(line)) if file and line.isdigit() else Location(head, None)
        return cls(where, error.message, error.hint)


@dataclass(frozen=True)
class ScanReport:
    files: tuple[str, ...]
    """Every file read."""
    workloads: tuple[WorkloadResult, ...]
    notes: tuple[str, ...] = ()
    unread: tuple[UnreadFile, ...] = ()
    """Files that could not be read: each reported on its own, exit 2."""
    allow_none: bool = False
    """--allow-no-workload: a scan that finds no vLLM workload passes (the pre-commit hook on unrelated YAML)."""

    @property
    def verdict(self) -> str:
        """The worst workload verdict, ERROR when a file could not be read, NONE when no workload was found
        (nothing was checked, which is no PASS unless --allow-no-workload)."""
        if self.unread:
            return "ERROR"
        if not self.workloads:
            return "PASS" if self.allow_none else "NONE"
        return max((w.verdict for w in self.workloads), key=VERDICT_ORDER.get)

    def exit_code(self, fail_on: str) -> int:
        """2 when a file could not be read, a workload could not be checked or nothing was found to check (unless
        allowed), else 1 when a workload reaches ``fail_on``, else 0."""
        codes = [w.exit_code(fail_on) for w in self.workloads]
        if 3 in codes:
            return 3  # a kvdoctor bug in one workload: said as such, not as the user's input
        if self.unread or self.verdict == "NONE":
            return 2
        return 2 if 2 in codes else max(codes, default=0)

    def counts(self) -> dict[str, int]:
        found = {v: 0 for v in VERDICT_ORDER}
        for w in self.workloads:
            found[w.verdict] += 1
        return found


