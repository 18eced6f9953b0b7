"""`kvdoctor explain`: from a failed vLLM start-up log to a Report with one primary root cause (the flow; each step
lives in its own module, listed in kvdoctor/explain/__init__.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kvdoctor.explain.annotate import annotate
from kvdoctor.explain.command_line import DEFAULTS as COMMAND_DEFAULTS, command_facts
from kvdoctor.explain.diagnosis import diagnose, message_origin, unknown_failure_rule
from kvdoctor.explain.families import Families, load_families
from kvdoctor.explain.findings import build_report, unknown_finding
from kvdoctor.explain.log_facts import read_facts
from kvdoctor.explain.log_lines import LogLine, normalise, read_log, signal_lines
from kvdoctor.explain.named_flag import with_named_flag
from kvdoctor.explain.native_crash import native_crash_facts
from kvdoctor.explain.selector import SelectorError, parse_selector_errors
from kvdoctor.explain.signatures import SignatureMatch, match_signatures
from kvdoctor.explain.set_up import with_set_up
from kvdoctor.explain.framework_call import with_framework_call
from kvdoctor.explain.similar_reports import with_similar_reports
from kvdoctor.explain.start_up_shown import with_start_up_shown
from kvdoctor.explain.tracebacks import (ExceptionChain, parse_chains, trailing_cut_frames, with_torchscript_originals,
                                         without_carried_on, without_ignored)
from kvdoctor.explain.verdict import (FailureEvidence, as_exception, cite_failure_lines, failure_evidence,
                                      ready_after, requested_shutdown, survived, survived_before, uphold,
                                      warning_gone_past)
from kvdoctor.model.report import Report


def explain_log(path: str, rules_files: tuple[Path, ...] = ()) -> Report:
    """Read the log at ``path`` ('-' for stdin) and explain its failure."""
    return explain_text(read_log(path), rules_files)


@dataclass(frozen=True)
class LogReading:
    """What a log says before any diagnosis: its lines, exception chains, facts, signature matches and failure lines."""

    lines: list[LogLine]
    chains: list[ExceptionChain]
    facts: dict[str, Any]
    fact_lines: list[str]
    selector_errors: list[SelectorError]
    matches: list[SignatureMatch]
    evidence: tuple[FailureEvidence, ...]
    survived: tuple[FailureEvidence, ...] = ()
    """Failure lines the server came up after, in the same run, or that a requested shutdown's teardown printed (then
    ``evidence`` is empty and nothing gates)."""
    shutdown_line: int | None = None
    """The line of the shutdown request the failure lines came after (its teardown's errors)."""
    gone_past_line: int = 0
    """The last failure line the server came up after when later ones followed (verdict.survived_before): the
    exceptions up to it are not the failure."""


def read_log_text(text: str, rules: list, families: Families) -> LogReading:
    """The log read as explain reads it (tools/build_similar_reports.py reads the corpus through this too)."""
    lines = without_carried_on(normalise(text))
    signal = signal_lines(lines)  # a long log's INFO chatter (request logs, throughput) matches no rule
    chains = with_torchscript_originals(without_ignored(parse_chains(lines), lines))
    facts, fact_lines = read_facts(signal)
    facts.update(native_crash_facts(text, lines))
    for name, value in command_facts(signal).items():  # vLLM's own start-up lines win over the command it was given
        if name not in facts:
            facts[name] = value
            default = ", by default" if name in COMMAND_DEFAULTS else ""
            fact_lines.append(f"{name} = {value!r} (the vLLM command line in the log{default})")
    selector_errors = parse_selector_errors(lines)
    facts.update(_selector_facts(facts, selector_errors))
    facts.update(_kv_facts(facts))
    matches = _in_context(match_signatures([r for r in rules if r.signatures], chains, signal), families, text, facts,
                          lines)
    matches = _without_warnings_run_past(matches, lines, chains)
    def locate(text: str):  # where the log's release (else any) raises or logs the line
        return message_origin(text, facts.get("vllm.version"))

    evidence = failure_evidence(lines, chains, matches, locate)
    if not evidence and matches:  # with no failure line, a rule's words on a warning the server came up after: none
        matches = [m for m in matches if not warning_gone_past(m, lines, locate)]
    if survived(lines, evidence):  # the server came up after every failure line: errors it went on from
        return LogReading(lines, chains, facts, fact_lines, selector_errors, matches, (), evidence)
    gone_past = survived_before(lines, evidence)
    last = max((line.line for line in gone_past), default=0)
    if gone_past:  # the server came up after these; the failure is what came later (a request's, a kill's)
        evidence = tuple(line for line in evidence if line not in gone_past)
        matches = [match for match in matches if match.line > last]
    stop = requested_shutdown(lines, evidence)
    if stop is not None:  # every failure line came after a shutdown the running server was asked for: its teardown
        before = [match for match in matches if match.line < stop.number]
        return LogReading(lines, chains, facts, fact_lines, selector_errors, before, (), evidence, stop.number)
    return LogReading(lines, chains, facts, fact_lines, selector_errors, matches, evidence, gone_past_line=last)


def explain_text(text: str, rules_files: tuple[Path, ...] = ()) -> Report:
    """Explain the failure in a log's text: the primary cause, the other matches, the facts, the notes."""
    from kvdoctor.rules import load_all_rules

    families = load_families()
    rules = load_all_rules(list(rules_files)) + list(families.rules)
    read = read_log_text(text, rules, families)
    lines, chains, facts, evidence = read.lines, read.chains, read.facts, read.evidence
    # exceptions the server came up after are not the failure
    diagnosed = [] if read.survived else [
        chain for chain in chains if max(e.line for e in chain.exceptions) > read.gone_past_line]
    diagnosis = diagnose(read.matches, diagnosed, rules, families, facts, read.selector_errors, evidence,
                         trailing_cut_frames(lines, chains))
    report = build_report(rules, facts, read.fact_lines, chains, diagnosis)
    report = annotate(report, diagnosis, families, facts, read.selector_errors, lines, chains)
    report = uphold(report, evidence, lambda line: _failure_finding(rules, line, facts))
    report = cite_failure_lines(report, evidence, unknown_failure_rule())
    report = with_named_flag(report, lines, facts, unknown_failure_rule(), families.flag_families)
    report = with_similar_reports(report, chains, evidence, unknown_failure_rule())
    report = with_framework_call(report, chains, unknown_failure_rule(), families.frameworks_on_vllm)
    report = with_set_up(report, lines, facts, read.fact_lines, unknown_failure_rule())
    if read.shutdown_line is not None:
        first = read.survived[0]
        report = replace(report, notes=report.notes + (
            f"{len(read.survived)} failure line(s) after the shutdown the running server was asked for (line "
            f"{read.shutdown_line}): its teardown, not a failure (first at line {first.line}: {first.text[:160]}).",))
    return with_start_up_shown(report, lines, rules)  # no failure: PASS only on a line that shows vLLM up


def _failure_finding(rules: list, line: FailureEvidence, facts: dict[str, Any]):
    """The unknown-failure finding for an evidence line the diagnosis did not turn into a failing finding."""
    from kvdoctor.model.report import Finding

    rule = next((r for r in rules if r.id == unknown_failure_rule()), None)
    if rule is None:  # the bundled rules always have one; a failing log still never reads as healthy
        return Finding(rule_id="unknown-failure", severity="error", title="vLLM failed", cause=line.text,
                       evidence=(f"log line {line.line} ({line.kind}): {line.text[:300]}",))
    return unknown_finding(rule, as_exception(line), facts, line.kind == "wrapper")


def _selector_facts(facts: dict[str, Any], selector_errors: list[SelectorError]) -> dict[str, Any]:
    """The facts the first attention-selector error printed that the start-up lines did not."""
    found: dict[str, Any] = {}
    for error in selector_errors[:1]:
        found.update({k: v for k, v in error.facts().items() if k not in facts})
        kv = error.config.get("kv_cache_dtype")
        if kv and kv not in ("None", "auto") and "serve.kv_cache_dtype" not in facts:
            found.setdefault("serve.kv_cache_dtype", kv)  # the engine's own value, printed by the selector
    return found


def _kv_facts(facts: dict[str, Any]) -> dict[str, Any]:
    kv = facts.get("serve.kv_cache_dtype")
    if not kv:
        return {}
    from kvdoctor.facts.kv_dtypes import kv_dtype_facts

    return kv_dtype_facts(kv, facts.get("vllm.version"))


def _in_context(matches: list[SignatureMatch], families: Families, text: str,
                facts: dict[str, Any] | None = None, lines: list[LogLine] = ()) -> list[SignatureMatch]:
    """Matches of family rules whose `context` the log never mentions, whose `only_when` facts the log does not
    show with those values, or whose `not_followed_by` a later line holds, do not count."""
    present: dict[str, bool] = {}
    kept = []
    for match in matches:
        rule_id = match.rule.id
        wanted = families.only_when.get(rule_id)
        if wanted and any(str((facts or {}).get(fact)) != value for fact, value in wanted.items()):
            continue
        if families.family_of.get(rule_id) == "wrapper_api_mismatch" and _release_has_it(match, facts or {}):
            continue
        if rule_id in families.context:
            if rule_id not in present:
                present[rule_id] = families.context[rule_id].search(text) is not None
            if not present[rule_id]:
                continue
        after = families.not_followed_by.get(rule_id)
        if after is not None and any(line.number > match.line and after.search(line.text) for line in lines):
            continue
        kept.append(match)
    return kept


_NOT_FAILING_LEVELS = ("WARNING", "WARN", "INFO")


def _without_warnings_run_past(matches: list[SignatureMatch], lines: list[LogLine],
                               chains: list[ExceptionChain]) -> list[SignatureMatch]:
    """A warning the server came up after (its model ran the profiling pass past it) is not why it crashed later:
    when an exception follows the ready line, rules matched only on warning or info records before it do not count
    (vllm-neuron warns 'Failed to import from vllm._C' on every start, then serves)."""
    ready = ready_after(lines, 0) if matches and chains else None
    if ready is None or not any(e.line > ready.number for chain in chains for e in chain.exceptions):
        return matches
    early = {m.line for m in matches if m.exception is None and m.line < ready.number}
    levels = {line.number: line.level for line in lines if line.number in early}
    return [m for m in matches if m.line not in early or levels.get(m.line) not in _NOT_FAILING_LEVELS]


def _release_has_it(match: SignatureMatch, facts: dict[str, Any]) -> bool:
    """A vLLM name the line says is missing for a reason no release explains (explain/api_history.py)."""
    from kvdoctor.explain.api_history import no_release_mismatch

    frames = tuple(f.file for f in match.exception.frames) if match.exception is not None else ()
    return no_release_mismatch(dict(match.values), facts, frames)
