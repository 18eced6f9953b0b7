"""The flag of the run that a failure no rule knows names: `Backend TORCH_SDPA must be registered before use` after
`--attention-backend TORCH_SDPA`, `DeepSeek-V3 Tool parser could not locate ...` after `--tool-call-parser deepseek_v3`,
`NUMA binding was requested ...` after `--numa-bind`. The value (or, for a switch, the flag's own words) is what vLLM
refused there: the finding says so and offers the run without it, and the failure's family is the flag's.

The flags are read from every line before the failure that writes them as `--name value` / `--name=value` and is no
log record (a command line, a sentence quoting one: a record's 'pass --x to override' sets nothing) and from vLLM's own
'non-default args' record (the `logged.command` fact)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace
from typing import Any

from kvdoctor.explain.log_lines import LogLine
from kvdoctor.model.report import Fix, Report

_FLAG = re.compile(r"""(?<![\w-])--([a-z][a-z0-9]*(?:[-_][a-z0-9]+)*)(?:[ =]+("[^"]*"|'[^']*'|[^\s"'-][^\s,;]*))?""")
# flags that say where vLLM listens, what it serves or where it reads: a message naming their value (a model's path, a
# port) says nothing of a setting vLLM refused
_NOT_SETTINGS = frozenset({"model", "host", "port", "served-model-name", "api-key", "download-dir", "tokenizer",
                           "uvicorn-log-level", "root-path", "ssl-keyfile", "ssl-certfile", "model-tag"})
# a vLLM environment variable set on a command line or exported ('VLLM_ATTENTION_BACKEND=FLASHINFER vllm serve ...')
ENV_ASSIGNMENT = re.compile(r"(?<![\w$])(VLLM_[A-Z0-9_]+)=([\w.:,-]+)")
_PLAIN_VALUE = re.compile(r"^(?:[\d.]+[kKmMgG]?|auto|true|false|none|null|on|off|yes|no)$", re.I)
MIN_VALUE = 4  # a shorter value ('fp8', 'ray') is a word many messages hold for other reasons
# a line that echoes the command (a shell's 'Killed vllm serve ...', argparse's usage) names every flag: no blame (a
# message that suggests a flag or two, 'Pass --numa-bind-node', is no echo)
_ECHOES_COMMAND = re.compile(r"vllm serve|entrypoints|usage:|(?:--\w.*){3}")


@dataclass(frozen=True)
class NamedFlag:
    flag: str
    """The flag as the run wrote it, '--attention-backend', or the environment variable, 'VLLM_ATTENTION_BACKEND'."""
    value: str | None
    """Its value, None for a switch."""
    by: str
    """'value' when the message holds the value, 'name' when it holds the flag's words."""
    line: int | None
    """The log line that set it (None: vLLM's non-default args record, as the logged.command fact)."""

    @property
    def setting(self) -> str:
        """'--attention-backend TORCH_SDPA', '--numa-bind', 'VLLM_USE_V1=0'."""
        if not self.flag.startswith("--"):
            return f"{self.flag}={self.value}"
        return f"{self.flag} {self.value}" if self.value else self.flag


def _normal(text: str) -> str:
    """Lower case, '-', '_' and '.' as spaces: 'DeepSeek-V3' and 'deepseek_v3' read the same."""
    return " " + re.sub(r"[-_.\s]+", " ", text.lower()).strip() + " "


def flags_set(lines: list[LogLine], before: int, facts: dict[str, Any]) -> list[tuple[str, str | None, int | None]]:
    """(flag, value, line) for each flag ('--name', without its dashes) and vLLM environment variable ('VLLM_X') the
    log sets before line ``before``, then the flags of the logged command."""
    found: list[tuple[str, str | None, int | None]] = []
    for line in lines:
        if line.number >= before:
            break
        if line.level is not None:  # a log record's own words ('pass --x to override') set nothing
            continue
        if "--" in line.text:
            for match in _FLAG.finditer(line.text):
                value = match.group(2)
                found.append((match.group(1).replace("_", "-"), value.strip("'\"") if value else None, line.number))
        if "VLLM_" in line.text:
            found += [(name, value, line.number) for name, value in ENV_ASSIGNMENT.findall(line.text)]
    command = facts.get("logged.command")
    if isinstance(command, str):
        try:
            words = shlex.split(command)
        except ValueError:
            words = command.split()
        for index, word in enumerate(words):
            if word.startswith("--"):
                name, _, inline = word[2:].partition("=")
                following = words[index + 1] if index + 1 < len(words) else None
                value = inline or (following if following is not None and not following.startswith("-") else None)
                found.append((name.replace("_", "-"), value, None))
    return found


def named_flag(message: str, flags: list[tuple[str, str | None, int | None]]) -> NamedFlag | None:
    """The flag whose value (else whose words, for a flag of two words or more) the message holds; None when none or
    when the message echoes a command line."""
    if not message or _ECHOES_COMMAND.search(message):
        return None
    said = _normal(message)
    by_name = None
    for name, value, line in flags:
        if name in _NOT_SETTINGS:
            continue
        flag = name if name.startswith("VLLM_") else "--" + name
        if value and len(value) >= MIN_VALUE and not _PLAIN_VALUE.match(value) and "/" not in value \
                and not value.startswith(("{", "[")) and _normal(value) in said:
            return NamedFlag(flag, value, "value", line)
        words = name.split("-")
        if by_name is None and flag.startswith("--") and len(words) >= 2 \
                and all(re.search(rf" {re.escape(w)}", said) for w in words):
            by_name = NamedFlag(flag, value, "name", line)
    return by_name


def with_named_flag(report: Report, lines: list[LogLine], facts: dict[str, Any], rule_id: str,
                    families: dict[str, str]) -> Report:
    """The unknown-failure finding (``rule_id``) says which flag of the run its message names, with a fix that runs
    without it; the failure's family becomes that flag's (``families``; 'serve_args' for any other) when the rules
    and raise sites gave none."""
    primary = report.extra.get("primary") or {}
    at, message = primary.get("line"), str(primary.get("message") or "")
    if not report.findings or report.findings[0].rule_id != rule_id or not isinstance(at, int):
        return report
    found = named_flag(message, flags_set(lines, at, facts))
    if found is None:
        return report
    setting = found.setting
    where = f"line {found.line}" if found.line else "vLLM's non-default args"
    what = (f"its value {found.value!r} is what vLLM refused there" if found.by == "value"
            else "vLLM could not honour that setting there")
    first = report.findings[0]
    cause = (f"{first.cause} The failure names `{setting}`, which the run set ({where}): {what}, so the run without it "
             "(or with a value this release accepts) is the first thing to try.")
    fix = Fix(f"Run without `{setting}`, or with another value (`vllm serve --help` lists what this release accepts): "
              "the failure names it")
    first = replace(first, cause=cause, fixes=(fix,) + first.fixes,
                    evidence=first.evidence + (f"names the flag {setting} ({where})",))
    extra = dict(report.extra, named_flag={"flag": found.flag, "value": found.value, "by": found.by,
                                           "line": found.line})
    notes = report.notes
    if report.extra.get("family_by_rules", report.extra.get("family")) in (None, "other"):
        family = families.get(found.flag, "serve_args")
        extra.update(family=family, family_by_rules=family)
        note = f"Failure family: {family} (the failure names {found.flag}, a flag the run set)."
        notes = tuple(note if n.startswith("Failure family:") else n for n in notes)
        if not any(n.startswith("Failure family:") for n in notes):
            notes += (note,)
    return replace(report, findings=(first,) + report.findings[1:], extra=extra, notes=notes)
