"""Annotating the explain Report: the failure family, where vLLM raises the message, the selector's reasons, whether
the failure came at a request after start-up, and a healthy log's located warnings."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from kvdoctor.explain.diagnosis import Diagnosis, clip, message_origin, rules_with_role, unknown_failure_rule
from kvdoctor.explain.families import Families
from kvdoctor.explain.findings import finding_with_log_values, log_values
from kvdoctor.explain.log_lines import LogLine
from kvdoctor.explain.selector import SelectorError, explain_reasons
from kvdoctor.explain.tracebacks import ExceptionChain, LoggedException, frames_above
from kvdoctor.explain.verdict import ERROR_LEVELS, ready_after, refused_request
from kvdoctor.model.report import Finding, Report

# The selector's configuration fields worth quoting in the cause (the rest are noise to a reader).
_SHOWN_CONFIG = ("head_size", "dtype", "kv_cache_dtype", "block_size", "use_mla", "has_sink", "use_sparse", "attn_type")
MAX_FOLLOWING_FRAMES = 200
_ANSWERED = "A client printed it as the server's error answer"
# the unknown failure's title when the log shows vLLM up before it (its rule's own title says it failed to start)
_AT_REQUEST_TITLE = "vLLM was up; a request failed, and no known signature matched"
_FRAME_LINE = re.compile(r'^\s*File "(.+?)", line (\d+), in (\w+)')  # a paste may lose the indentation


def annotate(report: Report, diagnosis: Diagnosis, families: Families, facts: dict[str, Any],
             selector_errors: list[SelectorError], lines: list[LogLine], chains: list[ExceptionChain]) -> Report:
    """Family, where vLLM raised the message, the selector's reasons and the server-had-started note."""
    primary = diagnosis.primary
    exception = diagnosis.unknown
    if primary is None and exception is None:
        return _healthy_notes(report, lines, facts, chains)
    family = diagnosis.family
    primary_line = primary.line if primary is not None else exception.line
    primary_exception = primary.exception if primary is not None else exception
    if primary_exception is not None and primary_exception.message:
        # the whole message, unwrapped: a selector error spans several log lines
        primary_text = f"{primary_exception.type}: " + " ".join(primary_exception.message.split())
    else:
        primary_text = primary.text if primary is not None else exception.summary
    rule_id = primary.rule.id if primary is not None else unknown_failure_rule()
    notes = list(report.notes)
    extra = dict(report.extra)
    located = message_origin(primary_text, facts.get("vllm.version"))
    additions: list[str] = []
    cause_extra = ""
    if located is not None:
        additions.append(f"message {located.describe()}")
        extra["located"] = [
            {"package": l.package, "file": l.file, "function": l.function, "class": l.owner, "type": l.type,
             "kind": l.kind, "releases": l.releases, "condition": l.condition,
             "values": located.named_values(l) or None} for l in located.locations[:5]
        ]
    if rule_id == unknown_failure_rule() and not diagnosis.only_wrappers:  # a wrapper's origin says nothing new
        cause_extra = " " + _origin(located, families, facts, primary_text)
        additions.extend(_warned_before(lines, primary_line, facts.get("vllm.version")))
    if rule_id in rules_with_role("selector_error") and selector_errors:
        cause_extra = _selector_cause(selector_errors[0], families, facts)
        extra["selector"] = [{"kind": e.kind, "line": e.line, "config": e.config,
                              "reasons": {k: list(v) for k, v in e.reasons.items()}} for e in selector_errors]
    at_request = _request_time(diagnosis, families, chains, lines, primary_line)
    if at_request:
        notes.append(f"{at_request}: the failure happened while serving a request, not at start-up, so a start-up "
                     "check would not have shown it.")
        # a client's print of the answer says only that the server was up: a family the message names stays
        answered_only = at_request.startswith(_ANSWERED)
        kept = family in families.request_families_kept or rule_id in families.request_rules_kept
        if not kept and (family == "other" or not answered_only):
            family = "first_request_failure"
    if primary_exception is None or not primary_exception.frames:
        cut = _cut_traceback_end(lines, chains)
        if cut:
            notes.append(cut)
    failed_requests = _failed_requests(lines, families)
    if failed_requests:
        notes.append(f"{len(failed_requests)} request(s) failed with HTTP 500 (first at line {failed_requests[0]}).")
    if at_request:
        notes.extend(_refused_requests(lines))
    waited = _wait_given_up(lines, primary_line, primary_text)
    if waited:
        notes.append(waited)
    findings = _refined(list(report.findings), diagnosis, families, facts)
    for i, finding in enumerate(findings):
        if finding.rule_id == rule_id:
            evidence = list(finding.evidence)
            evidence[1:1] = additions
            title = _AT_REQUEST_TITLE if at_request and rule_id == unknown_failure_rule() else finding.title
            findings[i] = replace(finding, title=title, cause=finding.cause + cause_extra, evidence=tuple(evidence))
            break
    if family:
        notes.insert(0, f"Failure family: {family}.")
    if located is not None:
        notes.append(f"Where the message comes from: {located.describe()}.")
    extra["family"] = family
    return replace(report, findings=tuple(findings), notes=tuple(notes), extra=extra)


WARNED_LOOKBACK = 400
"""How many lines above an unknown failure are searched for vLLM's own warnings (a long log's start-up is older)."""
MAX_WARNED = 3
_NOT_WARNINGS = ("DEBUG", "INFO")


def _warned_before(lines: list[LogLine], failure_line: int, version: str | None) -> list[str]:
    """For a failure no rule knows: the last warnings vLLM's source logs (the message index locates each as a
    logger.warning) before it, nearest first, each message once; what vLLM said went wrong may be the cause."""
    found: list[str] = []
    seen: set[tuple] = set()
    looked = 0
    for line in reversed(lines):
        if line.number >= failure_line or not line.text.strip():
            continue
        looked += 1
        if looked > WARNED_LOOKBACK or len(found) >= MAX_WARNED:
            break
        if line.level in ERROR_LEVELS or line.level in _NOT_WARNINGS:
            continue  # a record of another level (INFO: the running release logged it as information)
        located = message_origin(line.text, version)
        warning = next((l for l in located.locations if l.kind == "warning"), None) if located else None
        if warning is None or located.template.parts in seen:
            continue
        seen.add(located.template.parts)
        found.append(f"vLLM warned before the failure, line {line.number}: {clip(line.text.strip(), 240)} "
                     f"(logged by {warning.file} in {warning.qualname})")
    return found


def _origin(located, families: Families, facts: dict[str, Any], text: str) -> str:
    """Where the message is raised and under which condition (explain/raise_site.py), or what the index searched."""
    from kvdoctor.explain.message_index import load_index
    from kvdoctor.explain.raise_site import origin_sentence, searched_sentence

    if located is None:
        index = load_index()
        return searched_sentence(index.packages if index is not None else None, text)
    return origin_sentence(located, facts.get("vllm.version"), families.raise_site_names)


def _selector_cause(error: SelectorError, families: Families, facts: dict[str, Any]) -> str:
    """What vLLM's selector saw and what each of its reasons means, then the pack's advice: appended to the cause."""
    sentences = explain_reasons(error, families.selector_reasons, facts.get("gpu.capability"))
    config = ", ".join(f"{k}={v}" for k, v in error.config.items() if k in _SHOWN_CONFIG)
    cause_extra = (f" vLLM's selector saw {config or 'this configuration'}: " if config else " ") + "; ".join(
        sentences) + "."
    advice = _pack_advice(error, facts)
    if advice:
        cause_extra += " " + advice
    return cause_extra


def _refined(findings: list[Finding], diagnosis: Diagnosis, families: Families, facts: dict[str, Any]) -> list[Finding]:
    """A rules.yaml finding takes the title, cause and fixes of the family rule that refines it on the same line."""
    primary = diagnosis.primary
    if primary is None:
        return findings
    for refiner, parent in families.refines.items():
        if parent != primary.rule.id:
            continue
        # on the primary's line, or on another line the refined rule matched too (a warning line before the error)
        lines = [primary.line] + [m.line for m in diagnosis.by_rule.get(parent, []) if m.line != primary.line]
        match = next((m for line in lines for m in diagnosis.by_rule.get(refiner, []) if m.line == line), None)
        if match is None:
            continue
        better = finding_with_log_values(match.rule, {**facts, **log_values(match, facts)})
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
                  primary_line: int) -> str | None:
    """Why the failure is a request-time one (the server had started, or a request-serving frame raised it)."""
    started = _started_line(lines, families)
    if started is not None and started < primary_line:
        return f"The server had started (line {started}) before this failed (line {primary_line})"
    if families.answered is not None and any(
            line.number == primary_line and families.answered.search(line.text) for line in lines):
        return f"{_ANSWERED} (line {primary_line}), so the server was up"
    if families.request_failed is not None and any(  # the failure's own line is a request the server failed (a 5xx)
            line.number == primary_line and families.request_failed.search(line.text) for line in lines):
        return f"The server answered a request with HTTP 5xx (line {primary_line}), so it was up"
    answer = _answered_after(lines, families, primary_line)
    if answer is not None:
        text = answer.text.strip()
        request = text[text.find('"'):] if '"' in text else text  # the request and its status, not the client address
        return f"The server answered a request with {clip(request, 120)} right after (line {answer.number})"
    exception = diagnosis.primary.exception if diagnosis.primary is not None else diagnosis.unknown
    if exception is None or families.request_frames is None:
        return None
    for chain_frame in _chain_frames(chains, exception):
        # a request-serving function of vLLM's own code (torch Inductor's codegen has a `generate` too)
        if chain_frame.function and ((families.request_frames.search(chain_frame.function)
                                      and _in_vllm(chain_frame.file)) or (
                families.request_places is not None
                and families.request_places.search(f"{_posix(chain_frame.file)}:{chain_frame.function}"))):
            place = f"{chain_frame.file}:{chain_frame.line}" if chain_frame.line else chain_frame.file
            return f"It was raised under {chain_frame.function} ({place})"
    # a traceback the log cut before its exception line still shows where the failure surfaced
    innermost = None
    for line in lines[primary_line: primary_line + MAX_FOLLOWING_FRAMES]:
        found = _FRAME_LINE.match(line.text)
        if found and families.request_frames.search(found.group(3)) and _in_vllm(found.group(1)):
            innermost = (found, line.number)
    if innermost:
        found, number = innermost
        return f"It surfaced under {found.group(3)} ({found.group(1)}:{found.group(2)}, log line {number})"
    return None


def _in_vllm(file: str) -> bool:
    """Whether a frame's file may be vLLM's own code: under a vllm/ folder, or a bare file name a paste kept."""
    path = _posix(file)
    return "vllm/" in path or "/" not in path


def _posix(file: str) -> str:
    """A Windows path with the separators request_places is written with."""
    return file.replace("\\", "/")


def _chain_frames(chains: list[ExceptionChain], exception: LoggedException):
    """Frames of every exception in the chain the exception belongs to (the causes it led to included)."""
    for chain in chains:
        if any(e is exception or (e.line == exception.line and e.stream == exception.stream) for e in chain.exceptions):
            for member in chain.exceptions:
                yield from member.frames
            return
    yield from exception.frames


CUT_FRAME_TAIL = 3
"""Lines a log may hold after a cut traceback's last frame line (its code line, carets, a blank line)."""


def _cut_traceback_end(lines: list[LogLine], chains: list[ExceptionChain]) -> str | None:
    """Where a log that ends inside a traceback (cut before its exception line, after every exception it shows)
    had got to: its innermost frame and code line; None for any other log."""
    last_exception = max((e.line for chain in chains for e in chain.exceptions), default=0)
    frame_at = None
    for index in range(len(lines) - 1, max(-1, len(lines) - 2 - CUT_FRAME_TAIL), -1):  # the frame, its code, carets
        line = lines[index]
        if line.number <= last_exception:
            return None
        if 'File "' in line.text and _FRAME_LINE.match(line.text):
            frame_at = index
            break
    if frame_at is None:
        return None
    found = _FRAME_LINE.match(lines[frame_at].text)
    below = lines[frame_at + 1].text.strip() if frame_at + 1 < len(lines) else ""
    code = f": `{clip(below, 160)}`" if below and not below.startswith(("File ", "^", "~")) else ""
    end = frame_at + (2 if code else 1)
    last = lines[end - 1]  # the frames end there: an empty line of their record stands for the exception line
    frames = frames_above(lines[:end] + [last._replace(number=last.number + 1, text="")], end)
    constructing = LoggedException("", "", frames, "", 0).constructing if frames else None
    built = f", while constructing {constructing[0]} (in {constructing[1].function})" if constructing else ""
    return (f"The log ends inside a traceback, cut before its exception line (line {lines[frame_at].number}); its "
            f"innermost frame: {found.group(1)}:{found.group(2)} in {found.group(3)}{code}{built}.")


def _failed_requests(lines: list[LogLine], families: Families) -> list[int]:
    if families.request_failed is None:
        return []
    return [line.number for line in lines if " 50" in line.text and families.request_failed.search(line.text)]


# a failure that is a waiter giving up ('failed to start within timeout', 'Timed out waiting for ...'), and the line
# where the waiter said how long it would wait ('Waiting for vllm-server to be ready (timeout: 0s)...', 'timeout=600')
_GAVE_UP = re.compile(r"(?i)\bwithin (?:the )?timeout\b|\btimed? ?out\b|\btimeout (?:reached|expired|exceeded)\b")
_WAIT_LIMIT = re.compile(r"(?i)\btime ?out\s*[:=]?\s*(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>ms|s|sec|seconds?|m|min|minutes?)?\b")
MAX_WAIT_LOOKBACK = 200  # lines above the failure where the waiter may have said its limit


def _wait_given_up(lines: list[LogLine], failure_line: int, failure_text: str) -> str | None:
    """When the failure is a waiter giving up, the limit it said it would wait, quoted; a limit of 0 said outright."""
    if not _GAVE_UP.search(failure_text):
        return None
    above = [line for line in lines if failure_line - MAX_WAIT_LOOKBACK <= line.number <= failure_line]
    for line in reversed(above):
        found = _WAIT_LIMIT.search(line.text)
        if found is None or found.group(0) in failure_text:
            continue
        limit = f"{found.group('value')}{found.group('unit') or ''}"
        note = f"The wait that gave up said its limit at line {line.number}: {clip(line.text, 200)}"
        if float(found.group("value")) == 0:
            note += f" (timeout: {limit}: a limit of zero gives up the moment the wait starts, whatever the server does)"
        return note + "."
    return None


# uvicorn's access line of a refused request: '"POST /v1/chat/completions HTTP/1.1" 400 Bad Request'
_REFUSED_ANSWER = re.compile(r'"(?:POST|GET|PUT|DELETE|PATCH) (/\S*) HTTP/\d(?:\.\d)?"\s+(4\d\d(?: [A-Z][A-Za-z ]*[a-z])?)\s*$')


def _refused_requests(lines: list[LogLine]) -> list[str]:
    """What the clients were answered when the failure is a request's: the 4xx access lines, one note per answer."""
    answers: dict[tuple[str, str], list[int]] = {}
    for line in lines:
        if "HTTP/" in line.text and '" 4' in line.text:
            found = _REFUSED_ANSWER.search(line.text)
            if found:
                answers.setdefault((found.group(1), found.group(2)), []).append(line.number)
    return [f"{len(numbers)} request(s) to {path} were answered {status} (first at line {numbers[0]})."
            for (path, status), numbers in answers.items()]


def _pack_advice(error: SelectorError, facts: dict[str, Any]) -> str | None:
    """Which backends the knowledge pack says would serve this configuration, on this and other GPUs."""
    from kvdoctor.explain.backend_advice import advise

    return advise(error, facts)


def _healthy_notes(report: Report, lines: list[LogLine], facts: dict[str, Any], chains: list[ExceptionChain]
                   ) -> Report:
    """A healthy log's refused requests and warnings (located in the message index) as notes (they never gate)."""
    errors = [(line.number, line.text) for line in lines if line.level in ERROR_LEVELS and not refused_request(line.text)]
    errors = sorted(errors + [(chain.exceptions[-1].line, chain.exceptions[-1].summary) for chain in chains
                              if chain.exceptions])
    ready = ready_after(lines, errors[-1][0]) if errors else None
    if ready is not None:
        first_line, first_text = errors[0]
        report = replace(report, notes=report.notes + (
            f"{len(errors)} ERROR record(s) or exception(s), after which the server came up (line {ready.number}): "
            f"errors it went on from, not a failure (first at line {first_line}: {clip(first_text, 200)}).",))
    refused = [line for line in lines if line.level in ERROR_LEVELS and refused_request(line.text)]
    if refused:
        report = replace(report, notes=report.notes + (
            f"{len(refused)} request(s) refused with a 4xx status by the running server: the request's fault, not "
            f"the server's (first at line {refused[0].number}: {clip(refused[0].text, 200)}).",))
    warnings = [line for line in lines if line.level in ("WARNING", "WARN")]
    if not warnings:
        return report
    shown = []
    for line in warnings[:200]:
        located = message_origin(line.text, facts.get("vllm.version"))
        if located is not None:
            shown.append(f"line {line.number}: {clip(line.text, 120)} ({located.describe(1)})")
        if len(shown) >= 3:
            break
    note = f"{len(warnings)} warning line(s), none of them a failure"
    if shown:
        note += "; for example " + "; ".join(shown)
    extra = dict(report.extra, family=None)
    return replace(report, notes=report.notes + (note + ".",), extra=extra)


ANSWER_WITHIN = 3
"""How many lines after a failure the server's 5xx access-log line may come to be that failure's answer (vLLM and
uvicorn print the exception, then log the request they answered with it)."""


def _answered_after(lines: list[LogLine], families: Families, primary_line: int) -> LogLine | None:
    """The access-log line of a request the server failed (5xx) just after the failure line, if any."""
    if families.request_failed is None:
        return None
    following = [line for line in lines if primary_line < line.number <= primary_line + ANSWER_WITHIN]
    return next((line for line in following if families.request_failed.search(line.text)), None)


def _started_line(lines: list[LogLine], families: Families) -> int | None:
    """The first line that shows the server had started, if any."""
    if families.started is None:
        return None
    for line in lines:
        if families.started.search(line.text):
            return line.number
    return None
