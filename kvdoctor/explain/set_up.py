"""The set-up a log shows around a failure no rule knows: the warning logged just before it, the features it ran with
(weight quantization, attention backend, KV-cache dtype, KV connector, speculative decoding, LoRA, parallel sizes),
each with the line that shows it, and the other warnings logged before the failure. An unknown failure is read against what was in play; these are the
first places to look (a connector's transfer, a quantization's fallback, a backend's missing feature)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from kvdoctor.explain.log_lines import LogLine
from kvdoctor.explain.named_flag import ENV_ASSIGNMENT
from kvdoctor.model.report import Report

# facts the log readers set (log_facts, command_line): (fact, how it is said, the value that is no feature)
FEATURE_FACTS = (
    ("model.quant_method", "weight quantization", None),
    ("log.attention_backend", "attention backend", None),
    ("serve.kv_cache_dtype", "KV-cache dtype", "auto"),
    ("serve.tensor_parallel_size", "tensor parallel size", 1),
    ("serve.pipeline_parallel_size", "pipeline parallel size", 1),
)
# features no fact holds, read from the line that configures them (a command line, non-default args, an engine config
# or a line the feature logs when it starts)
# (what, a literal every match holds: lines without it are not searched, the pattern)
FEATURE_LINES = (
    ("KV connector", "onnector", re.compile(r"""\bkv_connector['"]?\s*[:=]\s*['"]?(\w+)|\b(\w+Connector) detected""")),
    ("speculative decoding", "speculative",
     re.compile(r"""\bspeculative[_-]config\b.{0,80}?\bmethod['"]?\s*[:=(]\s*['"]?(\w+)""")),
    ("LoRA", "lora", re.compile(r"""\benable[_-]lora['"]?\s*(?:[:=]\s*(True)|(?=\s|$))""")),
)
# a glog warning record (torch's C++ and Dynamo loggers: 'W0106 23:01:14.131000 2929551 file.py:1016] ...')
GLOG_WARNING = re.compile(r"^W\d{4} \d\d:\d\d:\d\d[.\d]* +\d+ +\S+:\d+\] ")
MAX_WARNINGS = 3
WARNED = re.compile(r"\bWARN(?:ING)?\b")
LOOK_BACK = 5
CLIP = 200
QUOTE_UP_TO = 100


@dataclass(frozen=True)
class Feature:
    name: str
    value: str
    line: int | None


MAX_ENVIRONMENT = 4


def features(lines: list[LogLine], facts: dict, fact_lines: list[str]) -> list[Feature]:
    """The features in play, in the order of FEATURE_FACTS then FEATURE_LINES, then the vLLM environment variables the
    run set (on its command line, exported: `VLLM_USE_V1=0 vllm serve ...`)."""
    found: list[Feature] = []
    lines_of = {text.partition(" = ")[0]: int(number) for text in fact_lines
                if (number := text.rpartition("log line ")[2].rstrip(")")).isdigit()}
    for fact, said, plain in FEATURE_FACTS:
        value = facts.get(fact)
        if value not in (None, "", plain, str(plain)):
            found.append(Feature(said, str(value), lines_of.get(fact)))
    for said, literal, pattern in FEATURE_LINES:
        for line in lines:
            match = pattern.search(line.text) if literal in line.text else None
            if match:
                found.append(Feature(said, next((g for g in match.groups() if g), "on"), line.number))
                break
    environment: dict[str, str] = {}
    first = None
    for line in lines:
        if line.level is None and "VLLM_" in line.text:  # a log record's own words set nothing
            for name, value in ENV_ASSIGNMENT.findall(line.text):
                if len(environment) < MAX_ENVIRONMENT:
                    environment.setdefault(name, value)
                    first = first or line.number
    if environment:
        found.append(Feature("environment", ", ".join(f"{k}={v}" for k, v in environment.items()), first))
    return found


def _where(number: int | None, lines: list[LogLine]) -> str:
    """' (line N)', or ' (line N: the line)' when the line is short enough to quote."""
    if not number:
        return ""
    text = next((line.text.strip() for line in lines if line.number == number), "")
    return f" (line {number}: {text})" if 0 < len(text) <= QUOTE_UP_TO else f" (line {number})"


def warnings_before(lines: list[LogLine], at: int, skip: set[int]) -> list[LogLine]:
    """The last distinct warnings logged before line ``at`` (numbers aside), oldest first; a glog record's
    continuation lines (the same header, a message torch prints over several records) count as its first line."""
    seen: set[str] = set()
    firsts: list[LogLine] = []
    header = None
    for line in lines:
        if line.number >= at:
            break
        glog = GLOG_WARNING.match(line.text)
        if glog and re.sub(r"\d+", "#", glog.group(0)) == header:
            continue
        header = re.sub(r"\d+", "#", glog.group(0)) if glog else None
        if (line.level == "WARNING" or glog) and line.number not in skip:
            firsts.append(line)
    kept: list[LogLine] = []
    for line in reversed(firsts):
        key = re.sub(r"\d+", "#", GLOG_WARNING.sub("", line.text)).strip()
        if key and key not in seen:
            seen.add(key)
            kept.append(line)
            if len(kept) == MAX_WARNINGS:
                break
    return kept[::-1]


def warning_just_before(lines: list[LogLine], at: int) -> LogLine | None:
    """The warning logged just before line ``at``, within a few lines (an error line there is failure evidence the
    diagnosis already weighed): what a plugin or the engine said about the state it failed in (`[kvcached][WARNING]
    available_size()=71 < need_size=76` before 'EngineCore encountered a fatal error')."""
    before = [line for line in lines if at - LOOK_BACK <= line.number < at and line.text.strip()
              and (line.level == "WARNING" or WARNED.search(line.text))]
    return before[-1] if before else None


def with_set_up(report: Report, lines: list[LogLine], facts: dict, fact_lines: list[str], rule_id: str) -> Report:
    """The unknown-failure finding (``rule_id``) with the warning just before the failure, the set-up the log shows
    and the other warnings before it."""
    at = (report.extra.get("primary") or {}).get("line")
    if not report.findings or report.findings[0].rule_id != rule_id or not isinstance(at, int):
        return report
    parts = []
    just_before = warning_just_before(lines, at)
    if just_before is not None:
        parts.append(f"Logged just before it (line {just_before.number}): {just_before.text.strip()[:240]}")
    shown = features(lines, facts, fact_lines)
    if shown:
        said = [f"{f.name} {f.value}" + _where(f.line, lines) for f in shown]
        parts.append("The set-up the log shows: " + ", ".join(said) + ".")
    warned = warnings_before(lines, at, {just_before.number} if just_before is not None else set())
    if warned:
        parts.append("Warned before it: " + "; ".join(
            f"line {line.number}: {line.text.strip()[:CLIP]}" for line in warned) + ".")
    if not parts:
        return report
    first = report.findings[0]
    first = replace(first, cause=f"{first.cause} {' '.join(parts)}")
    return replace(report, findings=(first,) + tuple(report.findings[1:]))
