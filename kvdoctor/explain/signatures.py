"""Match rules.yaml signatures against a log's exceptions and lines, and rank the matches."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvdoctor.explain.log_lines import LogLine
from kvdoctor.explain.tracebacks import ExceptionChain, LoggedException
from kvdoctor.report import SEVERITY_ORDER
from kvdoctor.rules.loader import Rule, Signature


@dataclass(frozen=True)
class SignatureMatch:
    """One place in the log where a rule's signature matched."""

    rule: Rule
    signature: Signature
    line: int
    """Log line of the matched exception or line."""
    text: str
    """The matched exception summary or log line."""
    exception: LoggedException | None = None
    depth: int | None = None
    """Position in its chain, 0 = innermost cause; None for a plain log line."""

    @property
    def role(self) -> str:
        return self.signature.role

    def rank(self) -> tuple:
        """Sort key for choosing the primary cause: root before wrapper, errors first, a match inside an
        exception before a plain line, the innermost cause first, then the earliest in the log."""
        return (
            self.role != "root",
            -SEVERITY_ORDER[self.rule.severity],
            self.exception is None,
            self.depth if self.depth is not None else 0,
            self.exception is not None and not self.exception.frames,
            self.line,
        )


def match_signatures(rules: list[Rule], chains: list[ExceptionChain], lines: list[LogLine]) -> list[SignatureMatch]:
    """Every (rule, place) match; exceptions are matched with their frames and compile excerpts."""
    pairs = [(rule, signature) for rule in rules for signature in rule.signatures]
    if not pairs:
        return []
    matches: list[SignatureMatch] = []
    in_exceptions: set[tuple[str, int]] = set()
    for chain in chains:
        for depth, exception in enumerate(chain.exceptions):
            text = exception.searchable()
            for rule, signature in pairs:
                if signature.pattern.search(text):
                    matches.append(SignatureMatch(rule, signature, exception.line, exception.summary, exception, depth))
                    in_exceptions.add((rule.id, exception.line))
    prefilter = _combined(pairs)
    for line in lines:
        text = line.text
        if prefilter is not None and not prefilter.search(text):
            continue
        for rule, signature in pairs:
            if (rule.id, line.number) not in in_exceptions and signature.pattern.search(text):
                matches.append(SignatureMatch(rule, signature, line.number, text.strip()))
    return matches


def _combined(pairs: list[tuple[Rule, Signature]]) -> re.Pattern[str] | None:
    """One alternation of every pattern, to skip the many lines that match none (several MB of noise)."""
    try:
        return re.compile("|".join(f"(?:{signature.pattern.pattern})" for _, signature in pairs))
    except re.error:
        return None
