"""Judge `vllm serve` arguments as vLLM's own argument parser would, from a release's recorded parser.

vLLM's `FlexibleArgumentParser` is argparse with `allow_abbrev` on, `_` read as `-` in option names, and dotted
sub-keys for JSON arguments (`--compilation-config.level 3`). This module replays those semantics over the option
table the knowledge pack recorded from the release's parser, so an unknown or ambiguous flag and a refused choice
get vLLM's own words ("unrecognized arguments: ...", "ambiguous option: ...", "invalid choice: ...").
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
JUDGED_ELSEWHERE = frozenset({"kv_cache_dtype"})
"""Destinations whose values dedicated rules judge (KV dtype: the kv.* facts), so one mistake gives one finding."""


@dataclass(frozen=True)
class TakenOption:
    """One option as the parser took it."""

    typed: str
    """As written (normalised: `_` read as `-`), without a dotted sub-key or `=value`."""
    option: str
    """The option it is: `typed` itself, or the longer option `typed` is an unambiguous prefix of."""
    values: tuple[str, ...]

    @property
    def abbreviated(self) -> bool:
        return self.option != self.typed and not self.typed.startswith("--no-")


@dataclass(frozen=True)
class ArgvVerdict:
    """What the release's parser makes of the arguments."""

    error: str | None
    """vLLM's own message for the first problem, None when the parser accepts everything."""
    closest: str | None = None
    """The nearest real flag (or choice) for the offending token."""
    ambiguous: str | None = None
    """The option as typed when it is the prefix of several."""
    taken: tuple[TakenOption, ...] = ()
    """Every option the parser took, in order (filled only when it accepts the arguments)."""


@lru_cache(maxsize=1024)
def _close_options(word: str, long_options: tuple[str, ...]) -> list[str]:
    """The three real flags nearest a typed one (difflib is slow: a scan asks the same flag of every release)."""
    return difflib.get_close_matches(word, long_options, n=3, cutoff=0.6)


def judge_argv(tokens: list[str], options: Mapping[str, Any], allow_abbrev: bool = True,
               flexible: bool = True, json_dicts: bool = False) -> ArgvVerdict:
    """Parse `tokens` (serve flags, no `vllm serve` prefix) against `options` (option string -> ServeArg);
    `flexible`: vLLM's FlexibleArgumentParser (`_` read as `-`), False for the plain argparse of releases before 0.5;
    `json_dicts`: a dict-valued option takes JSON only (0.10+: engine/arg_utils.py parse_type(json.loads); 0.9 still
    read `image=1` as key=value)."""
    long_options = sorted(o for o in options if o.startswith("--"))
    tokens = _optimization_flags(tokens, options) if flexible else tokens
    unrecognized: list[str] = []
    taken: list[TakenOption] = []
    positionals = 0
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if not token.startswith("-") or token == "-" or NEGATIVE_NUMBER.match(token):
            positionals += 1
            if positionals > 1:  # `vllm serve` takes one positional: the model
                unrecognized.append(token)
            continue
        if token == "--":
            break
        name, has_inline, _ = token.partition("=")
        name = _normalise(name) if flexible else name
        base = name.split(".", 1)[0] if name.startswith("--") and "." in name else name
        spec_name, problem = _resolve(base, options, long_options, allow_abbrev)
        if problem == "ambiguous":
            matches = [o for o in long_options if o.startswith(base)]
            return ArgvVerdict(f"ambiguous option: {name} could match {', '.join(matches)}", closest=matches[0],
                               ambiguous=base)
        if spec_name is None:
            unrecognized.append(token)
            if not has_inline and index < len(tokens) and not tokens[index].startswith("-"):
                index += 1  # its value travels with it into the message, as argparse reports both
                unrecognized.append(tokens[index - 1])
            continue
        spec = options[spec_name]
        values, index = _values(spec, token, has_inline, tokens, index, is_subkey=base != name)
        if isinstance(values, ArgvVerdict):
            return values
        bad = (None if base != name else _bad_type(spec, spec_name, values, json_dicts)) or _bad_choice(spec, spec_name,
                                                                                                       values)
        if bad is not None:
            return bad
        taken.append(TakenOption(base, spec_name, tuple(values)))
    if unrecognized:
        first = unrecognized[0].partition("=")[0]
        close = _close_options(_normalise(first), tuple(long_options))
        # never the opposite setting, nor another setting that merely looks alike (--disable-log-stats)
        closest = [c for c in close if not _inverts(_normalise(first), c) and _same_words(_normalise(first), c)]
        return ArgvVerdict(
            f"unrecognized arguments: {' '.join(unrecognized)}", closest=closest[0] if closest else None
        )
    return ArgvVerdict(None, taken=tuple(taken))


def _optimization_flags(tokens: list[str], options: Mapping[str, Any]) -> list[str]:
    """FlexibleArgumentParser's `-O3` / `-O=3` / `-Odecode` (and `-O 3`): `--optimization-level VALUE` where the
    release has that option (0.11+, utils/argparse_utils.py), else `-O VALUE` where `-O` is an option of its own (the
    compilation config's alias before)."""
    target = "--optimization-level" if "--optimization-level" in options else "-O" if "-O" in options else None
    if target is None:
        return tokens
    out: list[str] = []
    for index, token in enumerate(tokens):
        if token.startswith("-O") and token != "-O" and not token.startswith("--"):
            out += [target, token[3:] if token[2] == "=" else token[2:]]
        elif token == "-O" and index + 1 < len(tokens) and tokens[index + 1] in {"0", "1", "2", "3"}:
            out.append(target)
        else:
            out.append(token)
    return out


def _inverts(typed: str, option: str) -> bool:
    """--no-enable-x vs --enable-x, --disable-x vs --enable-x: the spelling that means the opposite."""
    def bare(name: str) -> str:
        for prefix in ("--no-", "--disable-", "--enable-", "--"):
            if name.startswith(prefix):
                return name[len(prefix):]
        return name

    def stem(name: str) -> str:
        return "--" + name[5:] if name.startswith("--no-") else name

    return typed != option and (stem(typed) == stem(option) or
                                (bare(typed) == bare(option) and typed[:5] != option[:5]))  # fmt: skip


def _same_words(typed: str, option: str) -> bool:
    """Whether the option could be what was typed: each word of the typed name (--disable-log-requests: disable,
    log, requests) is a word of the option, up to a typo or a cut ('dtyp', 'len'); a word the option lacks
    ('requests' against --disable-log-stats) names another setting, which is no spelling of this one."""
    words = option.lstrip("-").split("-")

    def near(word: str) -> bool:
        return any(w.startswith(word) or word.startswith(w) or difflib.SequenceMatcher(None, word, w).ratio() >= 0.6
                   for w in words)  # fmt: skip

    return all(near(word) for word in typed.lstrip("-").split("-") if word)


def _normalise(name: str) -> str:
    # FlexibleArgumentParser reads --max_model_len as --max-model-len (only the option name up to its first '.', not
    # a dotted dict key such as --hf-overrides.max_position_embeddings, nor values: argparse_utils.py:378 in 0.34.0)
    if not name.startswith("--"):
        return name
    option, dot, key = name[2:].partition(".")
    return "--" + option.replace("_", "-") + dot + key


def _resolve(name: str, options: Mapping[str, Any], long_options: list[str], allow_abbrev: bool):
    if name in options:
        return name, None
    hidden = "--" + name[5:] if name.startswith("--no-") else None
    if hidden in options and getattr(options[hidden], "action", None) == "EnableDisableAction":
        # vLLM 0.33+ (vllm/utils/argparse_utils.py EnableDisableAction): --no-enable-x / --no-disable-x are still
        # accepted, only hidden from help, so the recorded option strings lack them
        return hidden, None
    if allow_abbrev and name.startswith("--") and len(name) > 2:
        matches = [o for o in long_options if o.startswith(name)]
        if len(matches) == 1:
            return matches[0], None
        if len(matches) > 1:
            return None, "ambiguous"
    return None, None


def _values(spec: Any, token: str, has_inline: bool, tokens: list[str], index: int, is_subkey: bool):
    """The values the option consumes, and the next index; an ArgvVerdict when a required value is missing."""
    nargs = getattr(spec, "nargs", None)
    takes_value = getattr(spec, "takes_value", True)
    if is_subkey:
        takes_value, nargs = True, None
    if has_inline:
        value = token.partition("=")[2]
        if not takes_value or nargs == 0:  # argparse's consume_optional: a switch given `=value` (--x=false)
            return ArgvVerdict(f"argument {_display(spec, token)}: ignored explicit argument {value!r}"), index
        return [value], index
    if not takes_value or nargs == 0:
        return [], index
    if nargs in ("?", "*"):
        values = []
        while index < len(tokens) and not looks_like_option(tokens[index]):
            values.append(tokens[index])
            index += 1
            if nargs == "?":
                break
        return values, index
    if nargs == "+" or isinstance(nargs, int):
        wanted = 1 if nargs == "+" else nargs
        values = []
        while index < len(tokens) and not looks_like_option(tokens[index]) and (nargs == "+" or len(values) < wanted):
            values.append(tokens[index])
            index += 1
        if len(values) < wanted:
            expected = "at least one argument" if nargs == "+" else f"{wanted} arguments"
            return ArgvVerdict(f"argument {_display(spec, token)}: expected {expected}"), index
        return values, index
    if index >= len(tokens) or looks_like_option(tokens[index]):
        return ArgvVerdict(f"argument {_display(spec, token)}: expected one argument"), index
    return [tokens[index]], index + 1


def looks_like_option(token: str) -> bool:
    """argparse's reading of a word after an option: another option unless it is '-' or a negative number."""
    return token.startswith("-") and token != "-" and not NEGATIVE_NUMBER.match(token)


def _display(spec: Any, token: str) -> str:
    strings = getattr(spec, "option_strings", None) or (token.partition("=")[0],)
    return "/".join(strings)


def _human_readable_int(value: str) -> int:
    """vllm/utils/argparse_utils.py human_readable_int: '32k', '1.5M', or what int() takes."""
    if re.fullmatch(r"\d+(?:\.\d+)?[kKmMgGtT]", value.strip()):
        return 0
    return int(value)


def _human_readable_int_or_auto(value: str) -> int:
    """... _or_auto (--max-model-len from 0.14.1): also 'auto' (any case) and -1."""
    return -1 if value.strip().lower() == "auto" else _human_readable_int(value)


_PLAIN_TYPES = {"int": int, "float": float, "human_readable_int": _human_readable_int,
                "human_readable_int_or_auto": _human_readable_int_or_auto}
"""argparse `type` callables replayed (0.7-0.9 read --max-model-len as a plain int: '32k' is refused there; 0.10-0.13
as human_readable_int: 'auto' is refused there)."""


def _bad_type(spec: Any, spec_name: str, values: list[str], json_dicts: bool = False) -> ArgvVerdict | None:
    """argparse's own refusal of a value its `type` callable cannot convert (before choices, as argparse does)."""
    type_name = getattr(spec, "type_name", None)
    if type_name == "_parse_type" and spec.default in ({}, "{}"):
        for value in values:  # a dict-valued option: parse_type(json.loads)
            if not json_dicts and not re.match("^{.*}$", value):  # 0.9 read anything else as key=value pairs
                if (refused := _key_int_pairs_refused(value)) is not None:
                    return ArgvVerdict(f"argument {_display(spec, spec_name)}: {refused}")
                continue
            if not _is_json(value):
                return ArgvVerdict(f"argument {_display(spec, spec_name)}: Value {value} cannot be converted to "
                                   "<function loads>. (it takes JSON, e.g. '{\"image\": 1}')")
        return None
    if type_name == "loads":  # 0.7-0.8 `type=json.loads`: argparse's own wording
        bad = next((value for value in values if not _is_json(value)), None)
        return ArgvVerdict(f"argument {_display(spec, spec_name)}: invalid loads value: {bad!r}") if bad is not None \
            else None
    if type_name == "nullable_kvs":  # 0.5-0.7's --limit-mm-per-prompt
        refused = next(filter(None, map(_key_int_pairs_refused, values)), None)
        return ArgvVerdict(f"argument {_display(spec, spec_name)}: {refused}") if refused else None
    convert = _PLAIN_TYPES.get(type_name or "")
    if convert is None:
        return None
    for value in values:
        try:
            convert(value)
        except ValueError:
            return ArgvVerdict(f"argument {_display(spec, spec_name)}: invalid {spec.type_name} value: {value!r}")
    return None


def _is_json(value: str) -> bool:
    try:
        json.loads(value)
    except ValueError:
        return False
    return True


def _key_int_pairs_refused(value: str) -> str | None:
    """What vLLM's nullable_kvs (engine/arg_utils.py, 0.5-0.9) raises for a value that is not `key=int,...`; an empty
    value is None there (0.5-0.8)."""
    if value == "":
        return None
    for item in value.split(","):
        parts = [part.lower().strip() for part in item.split("=")]
        if len(parts) != 2:
            return "Each item should be in the form KEY=VALUE"
        try:
            int(parts[1])
        except ValueError:
            return f"Failed to parse value of item {parts[0]}={parts[1]}"
    return None


def _bad_choice(spec: Any, spec_name: str, values: list[str]) -> ArgvVerdict | None:
    choices = getattr(spec, "choices", None)
    if not choices or getattr(spec, "dest", None) in JUDGED_ELSEWHERE:
        return None
    names = [str(c) for c in choices]
    for value in values:
        if value not in names:
            closest = difflib.get_close_matches(value, names, n=1, cutoff=0.4)
            listed = ", ".join(repr(c) for c in names)
            return ArgvVerdict(
                f"argument {_display(spec, spec_name)}: invalid choice: {value!r} (choose from {listed})",
                closest=closest[0] if closest else None,
            )
    return None


def canonical_argv(tokens: list[str], options: Mapping[str, Any], allow_abbrev: bool = True,
                   flexible: bool = True) -> list[str]:
    """The tokens with every option the parser would resolve (a unique prefix, `_` for `-` where `flexible`) spelt
    out in full, so kvdoctor reads `--kv-cache-dtyp fp8` as vLLM does when that prefix is unambiguous in the release."""
    long_options = sorted(o for o in options if o.startswith("--"))
    out = []
    for token in tokens:
        if not token.startswith("--") or token == "--":
            out.append(token)
            continue
        name, has_inline, value = token.partition("=")
        name = _normalise(name) if flexible else name
        base, dot, rest = name.partition(".")
        resolved, _ = _resolve(base, options, long_options, allow_abbrev)
        negated = base.startswith("--no-") and resolved == "--" + base[5:]  # 0.33+'s hidden --no-x: keep its sense
        if resolved is not None and not negated:
            name = resolved + dot + rest
        out.append(name + (f"={value}" if has_inline else ""))
    return out
