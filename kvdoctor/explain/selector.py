"""vLLM's attention-selection errors as facts, and what each reason means.

    No valid attention backend found for cuda with AttentionSelectorConfig(head_size=576, dtype=torch.bfloat16,
    kv_cache_dtype=fp8_ds_mla, ..., use_mla=False, ...). Reasons: {FLASH_ATTN: [kv_cache_dtype not supported], ...}.
    Selected backend AttentionBackendEnum.FLASHINFER is not valid for this configuration. Reason: ['...']

(0.11-0.13 wrote the config as `head_size: 576, dtype: torch.bfloat16, ...`). The message often wraps over
several log lines; it is joined before parsing.
"""

from __future__ import annotations

import ast
import re
import string
from dataclasses import dataclass, field
from typing import Any

from kvdoctor.explain.log_lines import LogLine

_NONE_VALID = re.compile(r"No valid attention backend found for (\w+)")
_SELECTED = re.compile(
    r"Selected (?:MLA prefill )?backend (?:AttentionBackendEnum\.|_Backend\.)?([A-Za-z][A-Za-z0-9_]*) is not valid"
    r"\s+for\s+this\s+configuration\.\s*Reason:\s*(\[.*?\])", re.DOTALL)
_CONFIG = re.compile(r"AttentionSelectorConfig\((.*?)\)(?:\.|\s*Reasons)", re.DOTALL)
_OLD_CONFIG = re.compile(r"with\s+(head_size:.*?)\.\s*Reasons", re.DOTALL)
_PAIR = re.compile(r"(\w+)\s*[=:]\s*([^,()]+)")
_REASONS = re.compile(r"Reasons:\s*\{(.*)", re.DOTALL)
_BACKEND_REASONS = re.compile(r"([A-Z][A-Z0-9_]+)\s*:\s*\[(.*?)\]", re.DOTALL)
# a line holding the opening of a selector error, whole or cut by a wrap ('ValueError: Selected backend ')
_CUT_HEAD = re.compile(r"No valid attention backend found|is not valid"
                       r"|Selected (?:MLA prefill )?backend(?: \S+(?: is(?: not)?)?)?\s*$"
                       r"|(?:Error: No|No valid)(?: attention(?: backend)?| valid(?: attention(?: backend)?)?)?\s*$")
MAX_JOIN = 60


@dataclass(frozen=True)
class SelectorError:
    """One attention-selection failure."""

    kind: str
    """'none_valid' (no backend accepts) or 'selected_invalid' (the forced backend refuses)."""
    line: int
    device: str | None
    config: dict[str, str] = field(default_factory=dict)
    """AttentionSelectorConfig fields as printed: head_size, dtype, kv_cache_dtype, use_mla, has_sink, ..."""
    reasons: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Backend -> its reasons, in the order vLLM printed them."""

    def facts(self) -> dict[str, Any]:
        facts: dict[str, Any] = {"log.selector_backends": ", ".join(self.reasons)}
        for name, value in self.config.items():
            facts[f"log.selector.{name}"] = value
        kv = self.config.get("kv_cache_dtype")
        if kv and kv != "None":
            facts["log.kv_cache_dtype"] = kv
        if self.kind == "selected_invalid":
            facts["log.backend"] = next(iter(self.reasons), None)
        return facts


def parse_selector_errors(lines: list[LogLine]) -> list[SelectorError]:
    found = []
    for i, line in enumerate(lines):
        text = line.text
        if ("valid" not in text and "backend" not in text and "No" not in text) or not _CUT_HEAD.search(text):
            continue
        joined = _join(lines, i)
        match = _NONE_VALID.search(joined)
        if match:
            config = _config(joined)
            reasons_match = _REASONS.search(joined)
            reasons = {}
            if reasons_match:
                for backend, body in _BACKEND_REASONS.findall(reasons_match.group(1)):
                    reasons[backend] = tuple(_split_reasons(body))
            found.append(SelectorError("none_valid", line.number, match.group(1), config, reasons))
            continue
        match = _SELECTED.search(joined)
        if match:
            try:
                items = ast.literal_eval(match.group(2))
            except (ValueError, SyntaxError):
                items = [r.strip(" '\"") for r in match.group(2).strip("[]").split(",")]
            reasons = {match.group(1).upper(): tuple(" ".join(str(r).split()) for r in items)}
            found.append(SelectorError("selected_invalid", line.number, None, {}, reasons))
    return _dedupe(found)


def _join(lines: list[LogLine], i: int) -> str:
    """The message from line i on, continued over wrapped lines until braces and brackets balance and its reasons
    are in (a hard wrap at any column cuts it anywhere: 'is not valid for' / 'this configuration.')."""
    head = lines[i]
    parts = [head.text]
    depth = _depth(head.text)
    j = i + 1
    while j < len(lines) and j - i < MAX_JOIN and (
        depth > 0 or _continues(parts[-1]) or lines[j].text.lstrip().startswith(("Reason", "AttentionSelectorConfig"))
        or (not _complete(" ".join(parts)) and _same_record(head, lines[j]))
    ):
        text = lines[j].text
        if not text.strip() or text.lstrip().startswith(("Traceback", "File \"")):
            break
        parts.append(text.strip())
        depth += _depth(text)
        j += 1
    return " ".join(parts)


def _complete(text: str) -> bool:
    """Whether a selector message holds its reasons ('Reason: [...]', 'Reasons: {...}') to their closing bracket."""
    at = text.rfind("Reason")
    return at >= 0 and ("[" in text[at:] or "{" in text[at:]) and _depth(text[at:]) <= 0


def _same_record(head: LogLine, line: LogLine) -> bool:
    """A line that may continue the head's message: the same process, and no record header or the head's."""
    return line.stream == head.stream and (line.level is None or (line.level, line.source) == (head.level, head.source))


def _continues(text: str) -> bool:
    stripped = text.rstrip()
    return stripped.endswith(("with", "configuration.", "Reasons:", "Reason:", ",", "(", "{", "["))


def _depth(text: str) -> int:
    return text.count("(") + text.count("{") + text.count("[") - text.count(")") - text.count("}") - text.count("]")


def _config(text: str) -> dict[str, str]:
    match = _CONFIG.search(text) or _OLD_CONFIG.search(text)
    if not match:
        return {}
    config = {}
    for name, value in _PAIR.findall(match.group(1)):
        value = value.strip().rstrip(".")
        config[name] = value.removeprefix("torch.").removeprefix("AttentionType.")
    return config


def _split_reasons(body: str) -> list[str]:
    return [" ".join(r.split()) for r in re.split(r",\s*(?![^()]*\))", body) if r.strip()]


def _dedupe(found: list[SelectorError]) -> list[SelectorError]:
    seen, unique = set(), []
    for error in found:
        key = (error.kind, tuple(sorted(error.config.items())), tuple(sorted(error.reasons.items())))
        if key not in seen:
            seen.add(key)
            unique.append(error)
    return unique


def explain_reasons(error: SelectorError, meanings: tuple[tuple[re.Pattern[str], str, str | None], ...],
                    capability: float | None) -> list[str]:
    """One sentence per distinct reason, naming the backends that gave it and the config's values; where the log
    lacks a value the meaning names, the meaning's words for an unknown value (or the reason as vLLM gave it)."""
    by_reason: dict[str, list[str]] = {}
    for backend, reasons in error.reasons.items():
        for reason in reasons:
            by_reason.setdefault(reason, []).append(backend)
    values = {k: v for k, v in error.config.items() if v not in (None, "", "None")}
    values["capability_text"] = f" (SM {capability:.1f})" if capability is not None else ""
    sentences = []
    for reason, backends in by_reason.items():
        names = ", ".join(backends)
        meaning, unknown = next(((text, other) for pattern, text, other in meanings if pattern.search(reason)),
                                (None, None))
        fields = dict(values, backends=names, reason=reason)
        if meaning is not None and not set(_placeholders(meaning)) <= set(fields):
            meaning = unknown
        if meaning is None:
            sentences.append(f"{names}: {reason}")
            continue
        try:
            sentences.append(f"{meaning.format(**fields)} ('{reason}')")
        except (KeyError, IndexError, ValueError):
            sentences.append(f"{names}: {reason}")
    return sentences


def _placeholders(text: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(text) if name]


def family_for(error: SelectorError, rules: tuple[dict[str, str], ...]) -> str:
    """The first selector_families entry whose every condition holds."""
    all_reasons = " | ".join(r for reasons in error.reasons.values() for r in reasons)
    for rule in rules:
        ok = True
        for key, wanted in rule.items():
            if key == "family":
                continue
            have = (all_reasons if key == "reason" else " | ".join(error.reasons) if key == "backend"
                    else error.config.get(key, ""))
            if not re.search(wanted, have or ""):
                ok = False
                break
        if ok:
            return rule["family"]
    return "kv_dtype_backend"
