"""Reported failures that read like this one: for a failure no rule knows, the closest real logs of kvdoctor's
corpus (tests/fixtures/logs_real, the entries not held out), by the words of the log's failure lines,
exceptions and innermost frames (TF-IDF cosine). The closest one's thread, its cause and the fix that worked there
are cited; when it is close enough and belongs to a family, the failure is given that family as the likely one.

The data (kvdoctor/data/similar_reports.json.gz) is built by tools/build_similar_reports.py from the seen entries
only, so a held-out log is never its own neighbour."""

from __future__ import annotations

import gzip
import json
import math
import re
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources

from kvdoctor.explain.tracebacks import ExceptionChain
from kvdoctor.explain.verdict import FailureEvidence
from kvdoctor.model.report import Fix, Report

DATA = "similar_reports.json.gz"
FORMAT = 1
LIKELY_FAMILY = 0.35
"""Cosine similarity from which the closest report's family is taken as the likely one: at 0.35, of the 228 seen
logs of a named family, each left out in turn, 117 are given a family and 92 of those (79 %) their own
(tools/build_similar_reports.py --check)."""
CITED = 0.2
"""Similarity from which a report is cited at all (below it, the words shared are the log's boilerplate)."""
FRAMES_READ = 3  # the innermost frames: where it was raised and the calls just above
TERMS_KEPT = 80  # per log in the data: its heaviest terms
_TERM = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_STOP = frozenset("the and for with this that from not are was has have but you your its can".split())
_PACKAGE = re.compile(r"(?:^|/)((?:vllm\w*|flashinfer|triton|torch|transformers|ray|xformers)/.*)$")
_INSTALLED = re.compile(r"^.*/(?:site|dist)-packages/")


_left_out: set[str] = set()  # corpus files not cited (a measure of the corpus leaves each log out of its own)


@contextmanager
def leaving_out(file: str):
    """While inside, the corpus log ``file`` is not a similar report (tools/measure_explain.py on a seen log)."""
    _left_out.add(file)
    try:
        yield
    finally:
        _left_out.discard(file)


@dataclass(frozen=True)
class SimilarReport:
    """One real log of the corpus, and how close this log is to it."""

    similarity: float
    family: str
    source: str
    cause: str
    fix: str


def log_terms(chains: list[ExceptionChain], evidence: tuple[FailureEvidence, ...]) -> Counter:
    """The words a failure is told in: its failure lines, each exception's type and message, and its innermost
    frames' modules (two and three folders deep) and functions."""
    texts = [e.text for e in evidence]
    for chain in chains:
        for exception in chain.exceptions:
            texts.append(f"{exception.type} {exception.message}")
            for frame in exception.frames[-FRAMES_READ:]:
                path = _module_path(frame.file)
                texts.append(" ".join("mod_" + "/".join(path.split("/")[:depth]) for depth in (2, 3))
                             + f" fn_{frame.function}")
    terms: Counter = Counter()
    for text in texts:
        for word in _TERM.findall(text):
            word = word.lower()
            if word not in _STOP:
                terms[word] += 1
    return terms


def _module_path(file: str) -> str:
    path = file.replace("\\", "/")
    installed = _INSTALLED.sub("", path)
    if installed != path:
        return installed
    match = _PACKAGE.search(path)
    # a known package from its root; a program's own file by its last folders (a home folder says nothing)
    return match.group(1) if match else "/".join(path.split("/")[-3:])


@lru_cache(maxsize=1)
def _data() -> dict | None:
    try:
        raw = resources.files("kvdoctor.data").joinpath(DATA).read_bytes()
    except (FileNotFoundError, OSError):
        return None
    data = json.loads(gzip.decompress(raw))
    return data if data.get("format") == FORMAT else None


def weights(terms: Counter, document_frequency: dict[str, int], documents: int) -> dict[str, float]:
    """TF-IDF weights of the terms the corpus knows, normalised to length 1."""
    vector = {word: (1 + math.log(count)) * math.log((documents + 1) / (document_frequency[word] + 1))
              for word, count in terms.items() if document_frequency.get(word)}
    norm = math.sqrt(sum(x * x for x in vector.values())) or 1.0
    return {word: x / norm for word, x in vector.items()}


def similar_reports(terms: Counter, limit: int = 3) -> list[SimilarReport]:
    """The corpus's logs closest to these terms, closest first (none when the data is missing)."""
    data = _data()
    if data is None or not terms:
        return []
    vector = weights(terms, data["document_frequency"], data["documents"])
    scored = []
    for log in data["logs"]:
        if log["file"] in _left_out:
            continue
        similarity = sum(x * log["terms"].get(word, 0.0) for word, x in vector.items())
        if similarity >= CITED:
            scored.append(SimilarReport(round(similarity, 2), log["family"], log["source"], log["cause"], log["fix"]))
    scored.sort(key=lambda report: -report.similarity)
    return scored[:limit]


def rules_family(report: Report) -> str | None:
    """The family the rules and raise sites gave, before a similar report named a likely one."""
    return report.extra.get("family_by_rules", report.extra.get("family"))


def with_similar_reports(report: Report, chains: list[ExceptionChain], evidence: tuple[FailureEvidence, ...],
                         unknown_rule: str) -> Report:
    """A failing report whose primary finding is the unknown failure cites the reported failures that read like it;
    the closest one's family, when close enough, becomes the likely family."""
    if not report.findings or report.findings[0].rule_id != unknown_rule or report.extra.get("family") != "other":
        return report
    found = similar_reports(log_terms(chains, evidence))
    if not found:
        return report
    closest = found[0]
    finding = report.findings[0]
    close = closest.similarity >= LIKELY_FAMILY  # below it the reports are listed, their causes not taken
    cause, fixes = finding.cause, finding.fixes
    if close:
        cause += (f" It reads most like a failure reported in {closest.source} (similarity {closest.similarity:.2f} "
                  "by the words of its failure lines and frames"
                  + (f"; failure family {closest.family}" if closest.family != "other" else "")
                  + f"): {closest.cause.rstrip('.')}.")
        if closest.fix:
            fixes = (Fix(f"What fixed the closest reported failure ({closest.source}): {closest.fix}"),) + fixes
    evidence_lines = finding.evidence + tuple(
        f"similar report ({r.similarity:.2f}{', ' + r.family if r.family != 'other' else ''}): {r.source}"
        for r in found)
    findings = (replace(finding, cause=cause, fixes=fixes, evidence=evidence_lines),) + report.findings[1:]
    extra = dict(report.extra, similar_reports=[
        {"similarity": r.similarity, "family": r.family, "source": r.source, "cause": r.cause, "fix": r.fix}
        for r in found])
    notes = report.notes
    if close and closest.family != "other":
        extra["family"] = closest.family
        extra["family_by_rules"] = "other"  # what the rules and raise sites gave: no family
        notes = tuple(f"Failure family: {closest.family} (likely: no rule knows the message; the closest reported "
                      f"failure, {closest.source}, is of this family)." if note.startswith("Failure family:") else note
                      for note in notes)
    return replace(report, findings=findings, extra=extra, notes=notes)
