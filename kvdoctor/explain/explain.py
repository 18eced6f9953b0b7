"""`kvdoctor explain`: from a failed vLLM start-up log to a Report with one primary root cause."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from kvdoctor.explain.families import Families, derived_values, load_families
from kvdoctor.explain.log_facts import read_facts
from kvdoctor.explain.log_lines import LogLine, normalise, read_log
from kvdoctor.explain.selector import SelectorError, explain_reasons, family_for, parse_selector_errors
from kvdoctor.explain.signatures import SignatureMatch, match_signatures
from kvdoctor.explain.tracebacks import ExceptionChain, LoggedException, parse_chains
from kvdoctor.model.report import Finding, Report
from kvdoctor.rules.engine import evaluate_rules, finding_for
from kvdoctor.rules.loader import Rule, Signature

ERROR_LEVELS = ("ERROR", "CRITICAL")
MAX_EVIDENCE = 6
MAX_EXCEPTIONS = 20


@dataclass(frozen=True)
class Diagnosis:
    """The matches grouped by rule, the primary one first."""

    primary: SignatureMatch | None
    secondary: tuple[SignatureMatch, ...]
    by_rule: dict[str, list[SignatureMatch]]
    unknown: LoggedException | None
    """The innermost real exception when no error rule explains the failure."""
    family: str | None = None
    """The failure family of the primary cause (families.yaml)."""


@lru_cache(maxsize=1)
def _rules_by_role() -> dict[str, frozenset[str]]:
    """explain_role (rules.yaml, families.yaml) -> the ids of the rules declared for it."""
    from kvdoctor.rules import load_all_rules

    roles: dict[str, set[str]] = {}
    for rule in load_all_rules([]) + list(load_families().rules):
        if rule.explain_role:
            roles.setdefault(rule.explain_role, set()).add(rule.id)
    return {role: frozenset(ids) for role, ids in roles.items()}


def _with_role(role: str) -> frozenset[str]:
    return _rules_by_role().get(role, frozenset())


def _unknown_rule() -> str:
    """The rule for a failure no signature matched (explain_role: unknown_failure)."""
    return min(_with_role("unknown_failure"), default="")


def explain_log(path: str, rules_files: tuple[Path, ...] = ()) -> Report:
    """Read the log at ``path`` ('-' for stdin) and explain its failure."""
    return explain_text(read_log(path), rules_files)


def explain_text(text: str, rules_files: tuple[Path, ...] = ()) -> Report:
    from kvdoctor.rules import load_all_rules

    families = load_families()
    lines = normalise(text)
    rules = load_all_rules(list(rules_files)) + list(families.rules)
    chains = parse_chains(lines)
    facts, fact_lines = read_facts(lines)
    selector_errors = parse_selector_errors(lines)
    for error in selector_errors[:1]:
        facts.update({k: v for k, v in error.facts().items() if k not in facts})
        kv = error.config.get("kv_cache_dtype")
        if kv and kv not in ("None", "auto"):
            facts.setdefault("serve.kv_cache_dtype", kv)  # the engine's own value, printed by the selector
    facts.update(_kv_facts(facts))
    matches = _in_context(match_signatures([r for r in rules if r.signatures], chains, lines), families, text)
    diagnosis = _root_of_consequence(_diagnose(matches, chains), families)
    diagnosis = _by_location(diagnosis, rules, families, facts)
    diagnosis = _from_error_lines(diagnosis, lines, matches)
    diagnosis = replace(diagnosis, family=_family(diagnosis, families, selector_errors))
    started = _started_line(lines, families)
    report = _report(rules, facts, fact_lines, chains, diagnosis)
    return _annotate(report, diagnosis, families, facts, selector_errors, started, lines, chains)


def _in_context(matches: list[SignatureMatch], families: Families, text: str) -> list[SignatureMatch]:
    """Matches of family rules whose `context` the log never mentions do not count."""
    present: dict[str, bool] = {}
    kept = []
    for match in matches:
        rule_id = match.rule.id
        if rule_id in families.context:
            if rule_id not in present:
                present[rule_id] = families.context[rule_id].search(text) is not None
            if not present[rule_id]:
                continue
        kept.append(match)
    return kept


def _kv_facts(facts: dict[str, Any]) -> dict[str, Any]:
    kv = facts.get("serve.kv_cache_dtype")
    if not kv:
        return {}
    from kvdoctor.facts.kv_dtypes import kv_dtype_facts

    return kv_dtype_facts(kv, facts.get("vllm.version"))


def _diagnose(matches: list[SignatureMatch], chains: list[ExceptionChain]) -> Diagnosis:
    by_rule: dict[str, list[SignatureMatch]] = {}
    for match in sorted(matches, key=SignatureMatch.rank):
        by_rule.setdefault(match.rule.id, []).append(match)
    best = sorted((group[0] for group in by_rule.values()), key=SignatureMatch.rank)
    # A wrapper is never primary while a root explains the failure, and a generic (non-error) one never is.
    candidates = [m for m in best if m.rule.severity == "error" and m.role == "root"]
    candidates = candidates or [m for m in best if m.rule.severity == "error" and m.rule.id != _unknown_rule()]
    unknown = None
    if candidates:
        primary = candidates[0]
    else:
        primary = None
        unknown = _innermost_real(chains, matches)
    secondary = tuple(m for m in best if m is not primary)
    return Diagnosis(primary, secondary, by_rule, unknown)


def _innermost_real(chains: list[ExceptionChain], matches: list[SignatureMatch]) -> LoggedException | None:
    """The innermost exception of the earliest chain that is not just a wrapper."""
    wrapper_lines = {m.line for m in matches if m.role == "wrapper"}
    for chain in chains:
        for exception in chain.exceptions:
            if exception.line not in wrapper_lines or exception.wrapped:
                if not (exception.wrapped and exception.type == "WorkerError" and not exception.message):
                    return exception
    return chains[0].innermost if chains else None


def _report(
    rules: list[Rule],
    facts: dict[str, Any],
    fact_lines: list[str],
    chains: list[ExceptionChain],
    diagnosis: Diagnosis,
) -> Report:
    rules_by_id = {rule.id: rule for rule in rules}
    findings: list[Finding] = []
    notes: list[str] = []
    failure = diagnosis.primary is not None or diagnosis.unknown is not None
    ordered = ([diagnosis.primary] if diagnosis.primary else []) + list(diagnosis.secondary)
    for match in ordered:
        findings.append(_matched_finding(match, diagnosis.by_rule[match.rule.id], facts, match is diagnosis.primary))
    if diagnosis.unknown is not None and _unknown_rule() in rules_by_id:
        findings.insert(0, _unknown_finding(rules_by_id[_unknown_rule()], diagnosis.unknown, facts))
    hidden = _inferred_findings(rules, facts, set(diagnosis.by_rule)) if failure else []
    findings.extend(hidden)

    primary_summary = _primary_summary(diagnosis)
    if primary_summary:
        notes.append(primary_summary["note"])
    misleading = _misleading(chains, diagnosis)
    if misleading:
        notes.append(misleading)
    hidden_note = _hidden_note(diagnosis, hidden)
    if hidden_note:
        notes.append(hidden_note)
    if not failure:
        notes.append("No failure found in the log: no traceback, no exception and no known failure signature.")
    check_command = _check_command(facts)
    if check_command:
        notes.append(f"The check that would have caught this before start-up: {check_command}")
    if not facts:
        notes.append("vLLM's start-up lines (version, args, engine config) are not in this log; facts are unknown.")

    extra: dict[str, Any] = {
        "primary": primary_summary["data"] if primary_summary else None,
        "secondary": [_match_data(m) for m in diagnosis.secondary],
        "inferred": [f.rule_id for f in hidden],
        "exceptions": [_chain_data(c) for c in chains[:MAX_EXCEPTIONS]],
        "misleading": misleading,
        "check_command": check_command,
        "facts_evidence": fact_lines,
    }
    return Report(command="explain", findings=tuple(findings), facts=facts, dry_run=None, notes=tuple(notes), extra=extra)


def _log_values(match: SignatureMatch) -> dict[str, Any]:
    """A match's named groups as log.<name> facts (with derived forms: log.min_capability_sm)."""
    return {f"log.{name}": value for name, value in derived_values(dict(match.values)).items()}


def _matched_finding(match: SignatureMatch, group: list[SignatureMatch], facts: dict[str, Any], primary: bool) -> Finding:
    values = _log_values(match)
    base = _with_values(match.rule, {**facts, **values})
    evidence = ["PRIMARY root cause" if primary else f"Secondary ({'wrapper' if match.role == 'wrapper' else 'also seen'})"]
    seen: set[int] = set()
    for item in group:
        if item.line in seen or len(seen) >= MAX_EVIDENCE:
            continue
        seen.add(item.line)
        stream = f" [{item.exception.stream}]" if item.exception is not None and item.exception.stream else ""
        evidence.append(f"log line {item.line}{stream}: {_clip(item.text, 400 if primary else 240)}")
        if item.exception is not None and item.exception.where:
            evidence.append(f"  raised at {item.exception.where}")
        if item.exception is not None and item.exception.compile_excerpt:
            evidence.extend(f"  | {_clip(line, 100)}" for line in item.exception.compile_excerpt[-4:])
        if item.signature.note:
            evidence.append(f"  note: {item.signature.note}")
    if values:
        evidence.append("values in the log: " + ", ".join(f"{k.removeprefix('log.')}={v}" for k, v in
                                                       sorted(dict(match.values).items())))
    evidence.extend(base.evidence)
    return replace(base, evidence=tuple(evidence))


def _unknown_finding(rule: Rule, exception: LoggedException, facts: dict[str, Any]) -> Finding:
    base = finding_for(rule, facts)
    evidence = [
        "PRIMARY (no known signature matched)",
        f"innermost exception: {_clip(exception.summary, 200)}",
        f"raised at {exception.where or 'unknown (no traceback frames in the log)'}",
        f"log line {exception.line}" + (f" [{exception.stream}]" if exception.stream else ""),
    ]
    cause = f"{base.cause} Innermost exception: {_clip(exception.summary, 200)}"
    if exception.where:
        cause += f", raised at {exception.where}."
    return replace(base, cause=cause, evidence=tuple(evidence))


def _inferred_findings(rules: list[Rule], facts: dict[str, Any], matched: set[str]) -> list[Finding]:
    """Rules whose `when` holds on the facts the log shows but whose signature is not in it."""
    findings = []
    for finding in evaluate_rules(rules, facts):
        if finding.status != "fired" or finding.rule_id in matched:
            continue
        evidence = ("Not seen in the log: inferred from the facts the log shows (kvdoctor check reports it)",)
        findings.append(replace(finding, evidence=evidence + finding.evidence))
    return findings


def _primary_summary(diagnosis: Diagnosis) -> dict[str, Any] | None:
    if diagnosis.primary is not None:
        match = diagnosis.primary
        data = _match_data(match)
        where = f", raised at {data['where']}" if data.get("where") else ""
        note = f"Primary cause: {match.rule.id} ({match.rule.title}); log line {match.line}: {_clip(match.text)}{where}."
        return {"data": data, "note": note}
    if diagnosis.unknown is not None:
        exception = diagnosis.unknown
        data = {
            "rule_id": _unknown_rule(),
            "exception_type": exception.type,
            "message": _clip(exception.message, 500),
            "where": exception.where,
            "line": exception.line,
            "stream": exception.stream or None,
        }
        note = (
            f"No known signature matched. Innermost exception (line {exception.line}): {_clip(exception.summary)}"
            + (f", raised at {exception.where}." if exception.where else ".")
        )
        return {"data": data, "note": note}
    return None


def _match_data(match: SignatureMatch) -> dict[str, Any]:
    exception = match.exception
    return {
        "rule_id": match.rule.id,
        "role": match.role,
        "line": match.line,
        "text": _clip(match.text, 500),
        "exception_type": exception.type if exception else None,
        "message": _clip(exception.message, 500) if exception else None,
        "where": exception.where if exception else None,
        "stream": (exception.stream or None) if exception else None,
    }


def _chain_data(chain: ExceptionChain) -> dict[str, Any]:
    return {
        "stream": chain.stream or None,
        "innermost": {"type": chain.innermost.type, "message": _clip(chain.innermost.message, 300),
                      "where": chain.innermost.where, "line": chain.innermost.line},
        "outermost": {"type": chain.outermost.type, "message": _clip(chain.outermost.message, 300),
                      "line": chain.outermost.line},
        "length": len(chain.exceptions),
    }


def _misleading(chains: list[ExceptionChain], diagnosis: Diagnosis) -> str | None:
    """Why the last error lines of the log are not the failure, when they are not."""
    if not chains or (diagnosis.primary is None and diagnosis.unknown is None):
        return None
    primary = diagnosis.primary
    primary_line = primary.line if primary else diagnosis.unknown.line
    real = f"{primary.rule.id} ({primary.rule.title})" if primary else "the innermost exception named above"
    last = max(chains, key=lambda c: c.outermost.line).outermost
    wrapper_matches = sorted(
        (m for group in diagnosis.by_rule.values() for m in group
         if m.role == "wrapper" and m.exception is not None and not m.exception.wrapped),
        key=lambda m: m.line,
    )
    if primary is not None and primary.role == "wrapper":
        wrapper_matches = [m for m in wrapper_matches if m.rule.id != primary.rule.id or m.line != primary.line]
    parts = []
    for line in sorted({m.line for m in wrapper_matches if m.line >= primary_line})[-3:]:
        at_line = [m for m in wrapper_matches if m.line == line]
        named = [m for m in at_line if m.rule.id not in _with_role("wrapper") and (primary is None or m.rule.id != primary.rule.id)]
        part = f"\"{_clip(at_line[0].exception.summary, 160)}\" (line {line})"
        if any(m.rule.id in _with_role("wrapper") for m in at_line):
            part += " is a wrapper: it re-raises an error from another process"
            if named:
                part += f"; its message matches {named[0].rule.id}, a real bug, but not the failure underneath"
        else:
            part += f" matches {named[0].rule.id if named else at_line[0].rule.id}: a real bug, but not the failure underneath"
        parts.append(part)
    if parts:
        return "The last error lines mislead. " + ". ".join(parts) + f". The failure underneath is {real}."
    if last.line > primary_line and (primary is None or primary.exception is not last):
        return (
            f"The last error line, \"{_clip(last.summary, 160)}\" (line {last.line}), is a consequence: the "
            f"failure was raised earlier (line {primary_line}): {real}."
        )
    return None


def _hidden_note(diagnosis: Diagnosis, hidden: list[Finding]) -> str | None:
    if diagnosis.primary is None or diagnosis.primary.role != "wrapper":
        return None
    errors = [f for f in hidden if f.severity == "error"]
    if not errors:
        return None
    names = ", ".join(f"{f.rule_id} ({f.title})" for f in errors)
    return (
        f"{diagnosis.primary.rule.id} stopped start-up before anything else could fail, and the facts in the log say "
        f"{names} is likely hiding underneath: it would fail next, so fix both."
    )


def _check_command(facts: dict[str, Any]) -> str | None:
    parts = ["kvdoctor", "check"]
    if facts.get("model.model_id"):
        parts += ["--model", facts["model.model_id"]]
    if facts.get("serve.kv_cache_dtype"):
        parts += ["--kv-cache-dtype", facts["serve.kv_cache_dtype"]]
    if facts.get("serve.dtype") and facts["serve.dtype"] != "auto":
        parts += ["--dtype", facts["serve.dtype"]]
    if facts.get("serve.attention_backend") and facts["serve.attention_backend"] != "auto":
        parts += ["--attention-backend", facts["serve.attention_backend"]]
    if facts.get("serve.tensor_parallel_size") and facts["serve.tensor_parallel_size"] != 1:
        parts += ["--tensor-parallel-size", str(facts["serve.tensor_parallel_size"])]
    gpu = _gpu_target(facts)
    if gpu:
        parts += ["--gpu", gpu]
    if facts.get("vllm.version"):
        parts += ["--vllm-version", facts["vllm.version"]]
    if len(parts) == 2:
        return None
    return " ".join(shlex.quote(p) for p in parts)


def _gpu_target(facts: dict[str, Any]) -> str | None:
    name, capability = facts.get("gpu.name"), facts.get("gpu.capability")
    if name:
        from kvdoctor.base.errors import GpuTargetError
        from kvdoctor.data.gpus import resolve_gpu_target

        try:
            return resolve_gpu_target(name).name
        except GpuTargetError:
            pass
    if capability is not None:
        major = int(capability)
        return f"sm_{major}{round((capability - major) * 10)}"
    return None


def _clip(text: str, limit: int = 240) -> str:
    text = " ".join(text.split()) if "\n" in text else text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ------------------------------------------------------------------ generalising past the signatures

_ERROR_TEXT = re.compile(r"(?i)^(?:fatal error|error)\b[: ]|: (?:fatal )?error: |\bCUDA error\b|^\s*what\(\): ")


def _locate(text: str, version: str | None):
    """The message-index entry a line or exception matches, or None (no index shipped, or no template)."""
    from kvdoctor.explain.message_index import load_index

    index = load_index()
    return index.locate(text, version) if index is not None else None


def _root_of_consequence(diagnosis: Diagnosis, families: Families) -> Diagnosis:
    """A primary that families.yaml marks as the consequence of another matched rule gives way to it."""
    primary = diagnosis.primary
    if primary is None:
        return diagnosis
    for cause in families.explained_by.get(primary.rule.id, ()):
        group = diagnosis.by_rule.get(cause)
        if group:
            secondary = tuple(m for m in diagnosis.secondary if m is not group[0]) + (primary,)
            return replace(diagnosis, primary=group[0], secondary=secondary)
    return diagnosis


def _by_location(diagnosis: Diagnosis, rules: list[Rule], families: Families, facts: dict[str, Any]) -> Diagnosis:
    """When no rule's wording matched, a family whose `raised_in` holds the place vLLM raises the message explains it."""
    if diagnosis.primary is not None or diagnosis.unknown is None or not families.raised_in:
        return diagnosis
    exception = diagnosis.unknown
    located = _locate(exception.summary, facts.get("vllm.version"))
    if located is None:
        return diagnosis
    rules_by_id = {rule.id: rule for rule in rules}
    for location in located.locations:
        where = f"{location.file}:{location.function}"
        for pattern, rule_id in families.raised_in:
            if pattern.search(where) and rule_id in rules_by_id:
                signature = Signature(source=re.escape(location.function), role="root",
                                      note=f"matched by where vLLM raises it: {where}")
                values = (("detail", _clip(exception.message, 200)),)
                match = SignatureMatch(rules_by_id[rule_id], signature, exception.line, exception.summary,
                                       exception, 0, values)
                by_rule = dict(diagnosis.by_rule)
                by_rule[rule_id] = [match]
                return replace(diagnosis, primary=match, unknown=None, by_rule=by_rule)
    return diagnosis


def _from_error_lines(diagnosis: Diagnosis, lines: list[LogLine], matches: list[SignatureMatch]) -> Diagnosis:
    """No exception and no rule: an ERROR-level line (or a compiler/CUDA error line) is still a failure."""
    if diagnosis.primary is not None or diagnosis.unknown is not None:
        return diagnosis
    wrapper_lines = {m.line for m in matches if m.role == "wrapper"}
    candidates = []
    for line in lines:
        text = line.text.strip()
        if not text or line.number in wrapper_lines or text.startswith(("File \"", "Traceback", "^")):
            continue
        if line.level in ERROR_LEVELS or (line.level is None and _ERROR_TEXT.search(text)):
            candidates.append(line)
            if len(candidates) >= 50:
                break
    if not candidates:
        return diagnosis
    best = next((line for line in candidates if _locate(line.text, None) is not None), candidates[0])
    exception = LoggedException(best.level or "error line", best.text.strip(), (), best.stream, best.number)
    return replace(diagnosis, unknown=exception)


def _family(diagnosis: Diagnosis, families: Families, selector_errors: list[SelectorError]) -> str | None:
    if diagnosis.primary is not None:
        rule_id = diagnosis.primary.rule.id
        if rule_id in _with_role("selector_error") and selector_errors:
            return family_for(selector_errors[0], families.selector_families)
        return families.family_of.get(rule_id, "other")
    return "other" if diagnosis.unknown is not None else None


def _started_line(lines: list[LogLine], families: Families) -> int | None:
    if families.started is None:
        return None
    for line in lines:
        if families.started.search(line.text):
            return line.number
    return None


def _annotate(report: Report, diagnosis: Diagnosis, families: Families, facts: dict[str, Any],
              selector_errors: list[SelectorError], started: int | None, lines: list[LogLine],
              chains: list[ExceptionChain]) -> Report:
    """Family, where vLLM raised the message, the selector's reasons and the server-had-started note."""
    primary = diagnosis.primary
    exception = diagnosis.unknown
    if primary is None and exception is None:
        return _healthy_notes(report, lines, facts)
    family = diagnosis.family
    primary_line = primary.line if primary is not None else exception.line
    primary_exception = primary.exception if primary is not None else exception
    if primary_exception is not None and primary_exception.message:
        # the whole message, unwrapped: a selector error spans several log lines
        primary_text = f"{primary_exception.type}: " + " ".join(primary_exception.message.split())
    else:
        primary_text = primary.text if primary is not None else exception.summary
    rule_id = primary.rule.id if primary is not None else _unknown_rule()
    notes = list(report.notes)
    extra = dict(report.extra)
    located = _locate(primary_text, facts.get("vllm.version"))
    additions: list[str] = []
    cause_extra = ""
    if located is not None:
        additions.append(f"message {located.describe()}")
        extra["located"] = [
            {"package": l.package, "file": l.file, "function": l.function, "type": l.type, "kind": l.kind,
             "releases": l.releases} for l in located.locations[:5]
        ]
    if rule_id in _with_role("selector_error") and selector_errors:
        error = selector_errors[0]
        sentences = explain_reasons(error, families.selector_reasons, facts.get("gpu.capability"))
        config = ", ".join(f"{k}={v}" for k, v in error.config.items() if k in _SHOWN_CONFIG)
        cause_extra = (f" vLLM's selector saw {config or 'this configuration'}: " if config else " ") + "; ".join(
            sentences) + "."
        advice = _pack_advice(error, facts)
        if advice:
            cause_extra += " " + advice
        extra["selector"] = [{"kind": e.kind, "line": e.line, "config": e.config,
                              "reasons": {k: list(v) for k, v in e.reasons.items()}} for e in selector_errors]
    at_request = _request_time(diagnosis, families, chains, lines, started, primary_line)
    if at_request:
        notes.append(f"{at_request}: the failure happened while serving a request, not at start-up, so a start-up "
                     "check would not have shown it.")
        if family not in families.request_families_kept:
            family = "first_request_failure"
    failed_requests = _failed_requests(lines, families)
    if failed_requests:
        notes.append(f"{len(failed_requests)} request(s) failed with HTTP 500 (first at line {failed_requests[0]}).")
    findings = _refined(list(report.findings), diagnosis, families, facts)
    for i, finding in enumerate(findings):
        if finding.rule_id == rule_id:
            evidence = list(finding.evidence)
            evidence[1:1] = additions
            findings[i] = replace(finding, cause=finding.cause + cause_extra, evidence=tuple(evidence))
            break
    if family:
        notes.insert(0, f"Failure family: {family}.")
    if located is not None:
        notes.append(f"Where the message comes from: {located.describe()}.")
    extra["family"] = family
    return replace(report, findings=tuple(findings), notes=tuple(notes), extra=extra)


_SHOWN_CONFIG = ("head_size", "dtype", "kv_cache_dtype", "block_size", "use_mla", "has_sink", "use_sparse", "attn_type")


MAX_FOLLOWING_FRAMES = 200
_FRAME_LINE = re.compile(r'^\s+File "(.+?)", line (\d+), in (\w+)')


def _with_values(rule: Rule, facts: dict[str, Any]) -> Finding:
    """finding_for, with the log's values also written into the fixes' flags and env (--max-model-len 5632)."""
    from kvdoctor.rules.engine import fill

    finding = finding_for(rule, facts)
    fixes = tuple(replace(fix, flag=fill(fix.flag, facts) if fix.flag else fix.flag,
                          env=fill(fix.env, facts) if fix.env else fix.env) for fix in finding.fixes)
    return replace(finding, fixes=fixes)


def _refined(findings: list[Finding], diagnosis: Diagnosis, families: Families, facts: dict[str, Any]) -> list[Finding]:
    """A rules.yaml finding takes the title, cause and fixes of the family rule that refines it on the same line."""
    primary = diagnosis.primary
    if primary is None:
        return findings
    for refiner, parent in families.refines.items():
        if parent != primary.rule.id:
            continue
        match = next((m for m in diagnosis.by_rule.get(refiner, []) if m.line == primary.line), None)
        if match is None:
            continue
        better = _with_values(match.rule, {**facts, **_log_values(match)})
        values = ", ".join(f"{k}={v}" for k, v in sorted(dict(match.values).items()))
        out = []
        for finding in findings:
            if finding.rule_id == refiner:
                continue
            if finding.rule_id == parent:
                evidence = finding.evidence[:1] + (f"values in the log ({refiner}): {values}",) + finding.evidence[1:]
                finding = replace(finding, title=better.title, cause=better.cause, fixes=better.fixes,
                                  evidence=evidence)
            out.append(finding)
        return out
    return findings


def _request_time(diagnosis: Diagnosis, families: Families, chains: list[ExceptionChain], lines: list[LogLine],
                  started: int | None, primary_line: int) -> str | None:
    """Why the failure is a request-time one (the server had started, or a request-serving frame raised it)."""
    if started is not None and started < primary_line:
        return f"The server had started (line {started}) before this failed (line {primary_line})"
    exception = diagnosis.primary.exception if diagnosis.primary is not None else diagnosis.unknown
    if exception is None or families.request_frames is None:
        return None
    for chain_frame in _chain_frames(chains, exception):
        if chain_frame.function and families.request_frames.search(chain_frame.function):
            return f"It was raised under {chain_frame.function} ({chain_frame.file}:{chain_frame.line})"
    # a traceback the log cut before its exception line still shows where the failure surfaced
    innermost = None
    for line in lines[primary_line: primary_line + MAX_FOLLOWING_FRAMES]:
        found = _FRAME_LINE.match(line.text)
        if found and families.request_frames.search(found.group(3)):
            innermost = (found, line.number)
    if innermost:
        found, number = innermost
        return f"It surfaced under {found.group(3)} ({found.group(1)}:{found.group(2)}, log line {number})"
    return None


def _chain_frames(chains: list[ExceptionChain], exception: LoggedException):
    """Frames of every exception in the chain the exception belongs to (the causes it led to included)."""
    for chain in chains:
        if any(e is exception or (e.line == exception.line and e.stream == exception.stream) for e in chain.exceptions):
            for member in chain.exceptions:
                yield from member.frames
            return
    yield from exception.frames


def _failed_requests(lines: list[LogLine], families: Families) -> list[int]:
    if families.request_failed is None:
        return []
    return [line.number for line in lines if " 50" in line.text and families.request_failed.search(line.text)]


def _pack_advice(error: SelectorError, facts: dict[str, Any]) -> str | None:
    """Which backends the knowledge pack says would serve this configuration, on this and other GPUs."""
    from kvdoctor.explain.backend_advice import advise

    return advise(error, facts)


def _healthy_notes(report: Report, lines: list[LogLine], facts: dict[str, Any]) -> Report:
    """A healthy log's warnings, located in the message index, as notes (they never gate)."""
    warnings = [line for line in lines if line.level in ("WARNING", "WARN")]
    if not warnings:
        return report
    shown = []
    for line in warnings[:200]:
        located = _locate(line.text, facts.get("vllm.version"))
        if located is not None:
            shown.append(f"line {line.number}: {_clip(line.text, 120)} ({located.describe(1)})")
        if len(shown) >= 3:
            break
    note = f"{len(warnings)} warning line(s), none of them a failure"
    if shown:
        note += "; for example " + "; ".join(shown)
    extra = dict(report.extra, family=None)
    return replace(report, notes=report.notes + (note + ".",), extra=extra)
