"""Building the explain Report from a diagnosis: one finding per matched rule (the primary first), the findings
the log's facts imply, and the notes (the primary cause, why the last error lines mislead, the check to run)."""

from __future__ import annotations

import re
import shlex
from dataclasses import replace
from typing import Any

from kvdoctor.explain.diagnosis import Diagnosis, clip, rules_with_role, unknown_failure_rule
from kvdoctor.explain.families import derived_values
from kvdoctor.explain.signatures import SignatureMatch
from kvdoctor.explain.texts import NOT_GIVEN, fill_known, missing_sentence, unfilled
from kvdoctor.explain.tracebacks import ExceptionChain, LoggedException
from kvdoctor.model.report import Finding, Report
from kvdoctor.rules.engine import evaluate_rules, finding_for
from kvdoctor.rules.loader import Rule

# a helper that only checks a call's status and raises (NCCL_CHECK, CUDA_CHECK, _check_error): the call it checked,
# one frame out, is what failed
_STATUS_CHECKER = re.compile(r"^_?(?:[A-Z]+_CHECK|(?:[a-z]+_)*check(?:_[a-z]+)*)$")

MAX_EVIDENCE = 6
MAX_EXCEPTIONS = 20
MAX_PRIMARY_LINE = 700  # characters of the failure's own line quoted in full: a long message keeps its values


def build_report(
    rules: list[Rule],
    facts: dict[str, Any],
    fact_lines: list[str],
    chains: list[ExceptionChain],
    diagnosis: Diagnosis,
) -> Report:
    """The explain Report: findings for the diagnosis and the facts, and the notes that say what failed and why."""
    rules_by_id = {rule.id: rule for rule in rules}
    findings: list[Finding] = []
    notes: list[str] = []
    failure = diagnosis.primary is not None or diagnosis.unknown is not None
    ordered = ([diagnosis.primary] if diagnosis.primary else []) + list(diagnosis.secondary)
    for match in ordered:
        findings.append(_matched_finding(match, diagnosis.by_rule[match.rule.id], facts, match is diagnosis.primary))
    if diagnosis.unknown is not None and unknown_failure_rule() in rules_by_id:
        findings.insert(0, unknown_finding(rules_by_id[unknown_failure_rule()], diagnosis.unknown, facts,
                                           diagnosis.only_wrappers))
    hidden = _inferred_findings(rules, facts, set(diagnosis.by_rule)) if failure else []
    findings.extend(hidden)

    primary_summary = _primary_summary(diagnosis, findings[0].title if diagnosis.primary and findings else None)
    if primary_summary:
        notes.append(primary_summary["note"])
    misleading = _misleading(chains, diagnosis, findings[0].title if diagnosis.primary and findings else None)
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


def log_values(match: SignatureMatch, facts: dict[str, Any] | None = None) -> dict[str, Any]:
    """A match's named groups as log.<name> facts (with derived forms: log.min_capability_sm), and, given the log's
    facts, what the match's family adds from them and the knowledge pack (explain/family_values.py)."""
    values = derived_values(dict(match.values))
    if match.exception is not None and "stage_text" not in values:
        from kvdoctor.explain.start_up_stage import start_up_stage

        if (stage := start_up_stage(match.exception.frames)) is not None:
            values["stage_text"] = f" during {stage[0]} ({stage[1]}),"
    if facts is not None:
        from kvdoctor.explain.families import load_families
        from kvdoctor.explain.family_values import family_values

        family = load_families().family_of.get(match.rule.id)
        values.update({k: v for k, v in family_values(family, values, facts).items() if k not in values})
    return {f"log.{name}": value for name, value in values.items()}


def finding_with_log_values(rule: Rule, facts: dict[str, Any]) -> Finding:
    """finding_for, with the log's values also written into the fixes' flags and env (--max-model-len 5632), and
    texts that name only the values the log gave (explain/texts.py): a sentence that needs a missing value is
    left out, and the cause ends by saying which values the log did not give."""
    from kvdoctor.rules.engine import fill, offered_fixes

    finding = finding_for(rule, facts)
    # a flag that needs a value the log did not give is left out ('--max-model-len unknown' is no fix); its title stays
    fixes = tuple(replace(fix, title=fill_known(spec.title, facts),
                          flag=fill(spec.flag, facts) if spec.flag and not unfilled(spec.flag, facts) else None,
                          env=fill(fix.env, facts) if fix.env else fix.env)
                  for fix, spec in zip(finding.fixes, offered_fixes(rule, facts)))
    cause = fill_known(rule.cause, facts)
    missing = missing_sentence(unfilled(rule.cause, facts))
    return replace(finding, title=fill_known(rule.title, facts), cause=f"{cause} {missing}".strip(), fixes=fixes)


def _whole(exception: LoggedException) -> str:
    """An exception as quoted: a message that wraps over log lines (its continuation lines hold values too: a path,
    a shape) whole, on one line; a compile error's first line (its excerpt is quoted apart)."""
    if "\n" in exception.message.strip() and not exception.compile_excerpt:
        return exception.joined_summary
    return exception.summary


def _whole_message(match: SignatureMatch) -> str:
    """The matched line as quoted: a matched exception's whole message (_whole), any other line as it is."""
    if match.exception is not None and match.text == match.exception.summary:
        return _whole(match.exception)
    return match.text


def _matched_finding(match: SignatureMatch, group: list[SignatureMatch], facts: dict[str, Any], primary: bool) -> Finding:
    values = log_values(match, facts)
    base = finding_with_log_values(match.rule, {**facts, **values})
    if NOT_GIVEN in base.title and values.get("log.raise_site"):
        # claimed by where vLLM raised it, in words the rule's title does not take: the check and its own words
        words = values.get("log.detail") or (match.exception.type if match.exception is not None else "")
        base = replace(base, title=clip(f"vLLM's check in {values['log.raise_site']} failed: {words}", 200))
        if NOT_GIVEN in base.cause:
            missing = missing_sentence(unfilled(match.rule.cause, {**facts, **values}))
            base = replace(base, cause=f"vLLM raised this in {values['log.raise_site']}, a function whose checks all "
                                       f"belong to this failure family; its message names none of the values this "
                                       f"explanation needs. {missing}".strip())
    evidence = ["PRIMARY root cause" if primary else f"Secondary ({'wrapper' if match.role == 'wrapper' else 'also seen'})"]
    seen: set[int] = set()
    for item in group:
        if item.line in seen or len(seen) >= MAX_EVIDENCE:
            continue
        seen.add(item.line)
        stream = f" [{item.exception.stream}]" if item.exception is not None and item.exception.stream else ""
        evidence.append(f"log line {item.line}{stream}: {clip(_whole_message(item), MAX_PRIMARY_LINE if primary else 240)}")
        if item.exception is not None and item.exception.where:
            evidence.append(f"  raised at {item.exception.where}")
            if item.exception.vllm_where:
                evidence.append(f"  in vLLM at {item.exception.vllm_where}")
        if item.exception is not None and item.exception.compile_excerpt:
            evidence.extend(f"  | {clip(line, 100)}" for line in item.exception.compile_excerpt[-4:])
        if item.signature.note:
            evidence.append(f"  note: {item.signature.note}")
    if match.values:
        evidence.append("values in the log: " + ", ".join(f"{k.removeprefix('log.')}={v}" for k, v in
                                                       sorted(dict(match.values).items())))
    evidence.extend(base.evidence)
    return replace(base, evidence=tuple(evidence))


def _checked_call(exception: LoggedException) -> str | None:
    """'function (file:line)' of the call a status-checking helper checked, when the innermost frame is one."""
    if len(exception.frames) < 2 or not _STATUS_CHECKER.match(exception.frames[-1].function or ""):
        return None
    caller = exception.frames[-2]
    return f"{caller.function} ({caller.file}:{caller.line})"


def unknown_finding(rule: Rule, exception: LoggedException, facts: dict[str, Any], only_wrappers: bool = False
                    ) -> Finding:
    """The finding for a failure no rule knows: what failed, where, and what kvdoctor could not find."""
    base = finding_for(rule, facts)
    evidence = [
        "PRIMARY (no known signature matched)",
        f"wrapper line: {clip(exception.message, MAX_PRIMARY_LINE)}" if only_wrappers
        else f"innermost exception: {clip(_whole(exception), MAX_PRIMARY_LINE)}",
        f"raised at {exception.where or 'unknown (no traceback frames in the log)'}",
        f"log line {exception.line}" + (f" [{exception.stream}]" if exception.stream else ""),
    ]
    if exception.vllm_where:
        evidence.insert(3, f"in vLLM at {exception.vllm_where}")
    checked = _checked_call(exception)
    if checked:
        evidence.insert(3, f"checking the call in {checked}")
    if only_wrappers:
        cause = (f"{base.cause} The log holds only a wrapper line (line {exception.line}: "
                 f"{clip(exception.message, 160).rstrip('.')}): the error of the process that failed is not in this log. "
                 "Capture that process's whole output (the full `docker logs`/`kubectl logs`, not its tail).")
    else:
        cause = f"{base.cause} The failure: {clip(exception.summary, 320).rstrip('.')}"
        cause += f", raised at {exception.where}" if exception.where else ""
        cause += f" checking the call in {checked}" if checked else ""
        code = exception.frames[-1].code if exception.frames else None
        # the line that failed says which value was wrong when the message is Python's own ('int' * 'NoneType')
        cause += f", in `{clip(code, 160)}`" if code else ""
        constructing = exception.constructing
        if constructing is not None:  # a constructor raised: the class being built names the component
            name, caller = constructing
            cause += f", while constructing {name} (in {caller.function}, {caller.file}:{caller.line})"
        caller = exception.frames[-2] if len(exception.frames) >= 2 and not exception.message.strip() else None
        if caller is not None and caller.code:  # a bare exception ('TimeoutError'): the call it was raised under
            cause += f", called from {caller.function or 'its caller'}: `{clip(caller.code, 160)}`"
        cause += "."
    missing = ["the failing process's own error"] if only_wrappers else ["a rule whose signature matches it"]
    if not exception.where and not only_wrappers:
        missing.append("traceback frames (where it was raised)")
    if not facts.get("vllm.version"):
        missing.append("the vLLM release")
    cause += " Not found in the log or in kvdoctor's rules: " + ", ".join(missing) + "."
    return replace(base, cause=cause, evidence=tuple(evidence))


def _inferred_findings(rules: list[Rule], facts: dict[str, Any], matched: set[str]) -> list[Finding]:
    """Rules whose `when` holds on the facts the log shows but whose signature is not in it."""
    findings = []
    rules_by_id = {rule.id: rule for rule in rules}
    for finding in evaluate_rules(rules, facts):
        if finding.status != "fired" or finding.rule_id in matched:
            continue
        evidence = ("Not seen in the log: inferred from the facts the log shows (kvdoctor check reports it)",)
        rule = rules_by_id.get(finding.rule_id)
        if rule is not None:  # texts that name only what the log gave
            written = finding_with_log_values(rule, facts)
            finding = replace(finding, title=written.title, cause=written.cause)
        findings.append(replace(finding, evidence=evidence + finding.evidence))
    return findings


def _primary_summary(diagnosis: Diagnosis, title: str | None = None) -> dict[str, Any] | None:
    """The primary cause's note (its title as filled with the log's values) and data."""
    if diagnosis.primary is not None:
        match = diagnosis.primary
        data = _match_data(match)
        where = f", raised at {data['where']}" if data.get("where") else ""
        note = f"Primary cause: {match.rule.id} ({title or match.rule.title}); log line {match.line}: {clip(match.text)}{where}."
        return {"data": data, "note": note}
    if diagnosis.unknown is not None:
        exception = diagnosis.unknown
        data = {
            "rule_id": unknown_failure_rule(),
            "exception_type": exception.type,
            "message": clip(exception.message, 500),
            "where": exception.where,
            "line": exception.line,
            "stream": exception.stream or None,
        }
        note = (
            f"No known signature matched. Innermost exception (line {exception.line}): {clip(exception.summary)}"
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
        "text": clip(match.text, 500),
        "exception_type": exception.type if exception else None,
        "message": clip(exception.message, 500) if exception else None,
        "where": exception.where if exception else None,
        "stream": (exception.stream or None) if exception else None,
    }


def _chain_data(chain: ExceptionChain) -> dict[str, Any]:
    return {
        "stream": chain.stream or None,
        "innermost": {"type": chain.innermost.type, "message": clip(chain.innermost.message, 300),
                      "where": chain.innermost.where, "line": chain.innermost.line},
        "outermost": {"type": chain.outermost.type, "message": clip(chain.outermost.message, 300),
                      "line": chain.outermost.line},
        "length": len(chain.exceptions),
    }


def _misleading(chains: list[ExceptionChain], diagnosis: Diagnosis, primary_title: str | None = None) -> str | None:
    """Why the last error lines of the log are not the failure, when they are not (the primary named by its finding's
    title, filled with the log's values)."""
    if not chains or (diagnosis.primary is None and diagnosis.unknown is None):
        return None
    primary = diagnosis.primary
    primary_line = primary.line if primary else diagnosis.unknown.line
    real = f"{primary.rule.id} ({primary_title or primary.rule.title})" if primary else "the innermost exception named above"
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
        named = [m for m in at_line if m.rule.id not in rules_with_role("wrapper")
                 and (primary is None or m.rule.id != primary.rule.id)]
        part = f"\"{clip(at_line[0].exception.summary, 160)}\" (line {line})"
        if any(m.rule.id in rules_with_role("wrapper") for m in at_line):
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
            f"The last error line, \"{clip(last.summary, 160)}\" (line {last.line}), is a consequence: the "
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
    if facts.get("logged.command"):  # the run's own command, as the log shows it: every flag it was given
        parts = ["kvdoctor", "check"]
        gpu = _gpu_target(facts)
        parts += ["--gpu", gpu] if gpu else []
        parts += ["--vllm-version", facts["vllm.version"]] if facts.get("vllm.version") else []
        return " ".join(shlex.quote(p) for p in parts) + " -- " + facts["logged.command"]
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
