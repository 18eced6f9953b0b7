"""The report: findings and facts, the one object every output format renders."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvdoctor.model.dry_run import DryRunReport

SCHEMA_VERSION = "1.3"  # 1.3: check's "fit" object (report/check/json.py)

SEVERITY_ORDER = {"info": 0, "warning": 1, "error": 2}


@dataclass(frozen=True)
class Fix:
    """One concrete change that resolves a finding."""

    title: str
    """What to do, in words."""
    flag: str | None = None
    """A serve flag to use, e.g. '--dtype float16'."""
    env: str | None = None
    """An environment setting, e.g. 'VLLM_ATTENTION_BACKEND=FLASHINFER'."""
    version: str | None = None
    """A version requirement, e.g. 'vllm>=0.26.0'."""
    verified: str | None = None
    """'verified' / 'not_verified' when a dry-run compile checked this fix, else None."""
    verification_note: str | None = None


@dataclass(frozen=True)
class Finding:
    """A rule that fired (or may fire) for these facts."""

    rule_id: str
    severity: str
    """'error', 'warning' or 'info'."""
    title: str
    cause: str
    """The real cause, facts filled in."""
    status: str = "fired"
    """'fired' when every condition holds; 'undecided' when unknown facts decide it."""
    evidence: tuple[str, ...] = ()
    """Facts and compile results that back the finding, one line each."""
    fixes: tuple[Fix, ...] = ()
    references: tuple[str, ...] = ()
    checked_against: str | None = None
    """vLLM versions the rule was checked against."""
    decided_by: tuple[str, ...] = ()
    """For undecided findings: the unknown facts that would decide them, and how to supply them."""
    ignored_reason: str | None = None
    """Set when a config file ignores this rule; the finding is kept but does not gate."""

    @property
    def gates(self) -> bool:
        return self.status == "fired" and self.ignored_reason is None


@dataclass(frozen=True)
class Report:
    """What `kvdoctor check` or `kvdoctor explain` concluded."""

    command: str
    """'check' or 'explain'."""
    findings: tuple[Finding, ...]
    facts: dict[str, Any]
    """Flat facts (dotted names) the findings were judged on."""
    dry_run: DryRunReport | None = None
    """The dry-run compile results, or None when skipped entirely (the json format serialises it)."""
    notes: tuple[str, ...] = ()
    """Things the user should know that are not findings (probe fallbacks, skipped steps)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Command-specific data (explain: primary cause, tracebacks)."""
    rules_checked: tuple[str, ...] = ()
    """Every rule id evaluated, so CI formats can list passing rules too."""

    @property
    def verdict(self) -> str:
        """FAIL on a gating error, WARN on a gating warning or an undecided error, else PASS."""
        gating = [f for f in self.findings if f.gates]
        if any(f.severity == "error" for f in gating):
            return "FAIL"
        if any(f.severity == "warning" for f in gating):
            return "WARN"
        if any(f.status == "undecided" and f.severity == "error" for f in self.findings):
            return "WARN"
        return "PASS"

    def exit_code(self, fail_on: str) -> int:
        """0 pass, 1 when a gating finding reaches ``fail_on`` ('error', 'warning' or 'never')."""
        if fail_on == "never":
            return 0
        threshold = SEVERITY_ORDER[fail_on]
        if any(f.gates and SEVERITY_ORDER[f.severity] >= threshold for f in self.findings):
            return 1
        return 0

    def sorted_findings(self) -> list[Finding]:
        """The primary cause (explain) first, then fired before undecided, errors first, then by rule id."""
        primary = (self.extra.get("primary") or {}).get("rule_id")
        return sorted(
            self.findings,
            key=lambda f: (f.rule_id != primary, f.status != "fired", -SEVERITY_ORDER[f.severity], f.rule_id),
        )
