"""The verify report: the server's facts, what was checked, the comparison, and the verdict with its exit code."""

from __future__ import annotations

from dataclasses import dataclass

from kvdoctor.verify.checked import CheckedConfig
from kvdoctor.verify.compare import MISMATCH, Comparison
from kvdoctor.verify.probe import ServerFacts

VERIFY_SCHEMA_VERSION = "1.1"  # 1.1: scan's envelope (counts, targets[]) added; 1.0's fields kept


@dataclass(frozen=True)
class VerifyReport:
    """What `kvdoctor verify URL` concluded."""

    url: str
    server: ServerFacts
    checked: CheckedConfig
    comparisons: tuple[Comparison, ...]
    credentials: tuple[str, ...] = ()
    """The headers sent, by name and source only (never a value)."""
    notes: tuple[str, ...] = ()
    seconds: float = 0.0
    fail_on: str = "error"
    """The --fail-on the run gates with (the JSON states each target's exit code under it)."""
    tls: str | None = None
    """How TLS was verified (verify/tls.py TlsSettings.described), None for an http:// server."""

    @property
    def mismatches(self) -> tuple[Comparison, ...]:
        return tuple(c for c in self.comparisons if c.status == MISMATCH)

    @property
    def verdict(self) -> str:
        """FAIL on a mismatch or a failed completion; WARN when a field a PASS needs is unknown on one side."""
        if self.mismatches:
            return "FAIL"
        if any(c.severity == "warning" for c in self.comparisons):
            return "WARN"
        return "PASS"

    def exit_code(self, fail_on: str) -> int:
        """0: the server runs what was checked and answers; 1: a mismatch or failed completion (or, with
        --fail-on warning or undecided, a field unknown on one side: the comparison is undecided). A server that
        cannot be spoken to never gets here (exit 2)."""
        if fail_on == "never":
            return 0
        if self.verdict == "FAIL" or (fail_on in ("warning", "undecided") and self.verdict == "WARN"):
            return 1
        return 0

    def summary_line(self) -> str:
        """'vLLM 0.32.0 at URL: 1 mismatch (kv_cache_dtype); completion 4 tokens in 0.31 s' and the like."""
        bad = self.mismatches
        counts = f"{len(bad)} mismatch{'es' if len(bad) != 1 else ''} ({', '.join(c.field for c in bad)})" if bad else "no mismatch"
        done = self.server.completion
        if done is None:
            said = "no completion sent"
        elif done.ok:
            said = f"completion: {done.completion_tokens} token(s) in {done.total_s:.2f} s"
        else:
            said = "completion failed"
        return f"vLLM {self.server.version} at {self.url}: {counts}; {said}; against the {self.checked.source}"
