"""Filling a rule's texts with what the log gave, and saying plainly what it did not.

A log often lacks a value a rule's text names (the line was cut, vLLM worded it differently, the start-up lines
are not in the log). The rules engine writes 'unknown' there; explain instead drops each sentence that needs a
value the log did not give (a placeholder with no value and no `|fallback`), and closes the cause with one
sentence naming what was missing. A placeholder's fallback is kept: the rule's author wrote it to read well.
"""

from __future__ import annotations

import re
from typing import Any

from kvdoctor.rules.engine import PLACEHOLDER, fill

# A sentence ends at . ! or ? and a space before anything but a lower-case word (not "e.g. the", "0.95"), or
# before the names that are written in lower case ("vLLM", "kvdoctor").
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[^a-z\s]|vLLM\b|kvdoctor\b)")
NOT_GIVEN = "(not in the log)"
MAX_ABOUT = 60  # a longer fact description would bury the sentence; the name alone is then enough


def unfilled(template: str, facts: dict[str, Any]) -> list[str]:
    """The fact names the template uses that have no value in ``facts`` (fallback or not), in order; an optional
    clause (`{log.fit_text|}`, an empty fallback) is left out: its absence is no value the log failed to give."""
    return list(dict.fromkeys(m.group(1) for m in PLACEHOLDER.finditer(template)
                              if facts.get(m.group(1)) is None and m.group(2) != ""))


def fill_known(template: str, facts: dict[str, Any]) -> str:
    """The template filled, without the sentences that need a value the facts lack and that has no fallback.
    When every sentence needs one (a one-sentence title), the missing values read as '(not in the log)'."""
    if not template:
        return template
    sentences = _SENTENCE_END.split(template.strip())
    kept = [s if not _needs_missing(s, facts) else _leading_clauses(s, facts) for s in sentences]
    kept = [s for s in kept if s]
    if not kept:
        return fill(_marked(template, facts), facts)
    return fill(" ".join(kept), facts)


_CLAUSE_END = re.compile(r"(?<=\S)(?:: |; |, so )")


def _leading_clauses(sentence: str, facts: dict[str, Any]) -> str:
    """A sentence that needs a missing value, cut before its first clause (after ': ', '; ', ', so ') that needs one, when
    a whole clause comes before it ('X has no bfloat16 arithmetic: vLLM {missing} stops' -> 'X has no bfloat16
    arithmetic.'); '' when its first clause needs one."""
    clauses = _CLAUSE_END.split(sentence)
    kept = []
    for clause in clauses:
        if _needs_missing(clause, facts):
            break
        kept.append(clause)
    if not kept or len(kept) == len(clauses):
        return ""
    lead = sentence[: sentence.index(kept[-1]) + len(kept[-1])]  # the clauses with their own separators
    return lead.rstrip(" ,:;") + "."


def missing_sentence(names: list[str]) -> str:
    """What the log did not give: the values vLLM's message lacked (log.*), then the other facts, each with what it
    is when fact_names.yaml declares it briefly."""
    if not names:
        return ""
    from kvdoctor.data.fact_names import fact_registry

    registry = fact_registry()
    in_message = [name.removeprefix("log.") for name in names if name.startswith("log.")]
    others = []
    for name in names:
        if name.startswith("log."):
            continue
        declared = registry.get(name)
        about = getattr(declared, "about", None) if declared is not None else None
        others.append(f"{name} ({about})" if about and len(about) <= MAX_ABOUT else name)
    sentences = []
    if in_message:
        sentences.append("vLLM's message as logged did not carry " + ", ".join(in_message) + ".")
    if others:
        sentences.append("The log did not give " + ", ".join(others) + ".")
    return " ".join(sentences)


def _needs_missing(sentence: str, facts: dict[str, Any]) -> bool:
    return any(m.group(2) is None and facts.get(m.group(1)) is None for m in PLACEHOLDER.finditer(sentence))


_ASIDE = re.compile(r" ?\(([^()]*)\)")


def _marked(template: str, facts: dict[str, Any]) -> str:
    def mark(match: re.Match[str]) -> str:
        if facts.get(match.group(1)) is None and match.group(2) is None:
            return NOT_GIVEN
        return match.group(0)

    def aside(match: re.Match[str]) -> str:  # an aside that is only a missing value says nothing: '((not in the log))'
        alone = PLACEHOLDER.fullmatch(match.group(1))
        return "" if alone is not None and mark(alone) == NOT_GIVEN else match.group(0)

    return PLACEHOLDER.sub(mark, _ASIDE.sub(aside, template))
