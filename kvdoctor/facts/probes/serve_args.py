"""Parse a `vllm serve` command line and the VLLM_* environment into ServeFacts.

Accepts every spelling vLLM does (`--kv-cache-dtype X`, `--kv-cache-dtype=X`, `--kv_cache_dtype X`,
`-tp 2`), a leading `vllm serve MODEL` or `python -m vllm.entrypoints.openai.api_server`, and
`VAR=value` prefixes. Flags it does not model are kept in `unknown_flags`, never rejected.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from kvdoctor.data import read_data
from kvdoctor.data.dtypes import MODEL_DTYPES
from kvdoctor.base.errors import UsageError
from kvdoctor.model.facts import ServeFacts
from kvdoctor.base.yaml_safe import YAMLError, load_yaml, load_yaml_cached

MAX_CONFIG_BYTES = 1024 * 1024


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError("must be at least 1")
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise ValueError("must be in (0, 1]")
    return value


def _model_dtype(text: str) -> str:
    if text not in MODEL_DTYPES:
        raise ValueError(f"must be one of {', '.join(MODEL_DTYPES)}")
    return text


def human_readable_int(text: str) -> int:
    """A positive int in vLLM's human form: 32k = 32000, 32K = 32768, 4G = 4 GiB (kvdoctor/data/serve_flags.yaml)."""
    stripped = text.strip()
    scale = _flag_table()["human_readable_int"].get(stripped[-1:], 1)
    number = stripped[:-1] if scale != 1 else stripped
    return _positive_int(str(int(float(number) * scale)))


def _human_readable_int_or_auto(text: str) -> int:
    """human_readable_int that also takes 'auto' or -1 (--max-model-len 0.14.1+: the longest context that fits)."""
    return -1 if text.strip().lower() in ("auto", "-1") else human_readable_int(text)


def _human_readable_int_or_zero(text: str) -> int:
    """human_readable_int that also takes 0 (--kv-cache-memory-bytes 0: vLLM profiles as without the flag)."""
    return 0 if text.strip() in ("0", "0.0") else human_readable_int(text)


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:  # also refuses nan
        raise ValueError("must be at least 0")
    return value


_VALUE_CHECKS: dict[str, Callable[[str], Any]] = {
    "text": str, "model_dtype": _model_dtype, "upper_case": str.upper, "positive_int": _positive_int,
    "fraction": _fraction, "human_readable_int": human_readable_int,
    "human_readable_int_or_auto": _human_readable_int_or_auto,
    "human_readable_int_or_zero": _human_readable_int_or_zero, "non_negative_float": _non_negative_float,
}  # fmt: skip


@dataclass(frozen=True)
class _Flags:
    valued: dict[str, tuple[str, Callable[[str], Any]]]
    """option -> (ServeFacts field, value check)."""
    switches: dict[str, str]
    """boolean option -> ServeFacts field."""
    short: dict[str, str]
    """short form -> its option."""


@lru_cache(maxsize=1)
def _flag_table() -> dict[str, Any]:
    return load_yaml_cached(read_data("serve_flags.yaml"), "serve_flags.yaml")


@lru_cache(maxsize=1)
def _flags() -> _Flags:
    table = _flag_table()
    valued = {e["option"]: (field, _VALUE_CHECKS[e["value"]]) for field, e in table["valued"].items()}
    short = {s: e["option"] for e in table["valued"].values() for s in e.get("short", ())}
    return _Flags(valued, {option: field for field, option in table["switches"].items()}, short)


@dataclass(frozen=True)
class ServeCommand:
    """What a pasted command says: the model it serves and its flags."""

    model: str | None
    serve: ServeFacts


def parse_serve_command(argv: list[str], environ: dict[str, str]) -> ServeCommand:
    """Parse serve argv (with or without a leading `vllm serve`); raises UsageError on bad values."""
    env = {k: v for k, v in environ.items() if k.startswith("VLLM_")}
    tokens = list(argv)
    while tokens and "=" in tokens[0] and not tokens[0].startswith("-"):
        name, _, value = tokens.pop(0).partition("=")
        if name.startswith("VLLM_"):
            env[name] = value
    tokens = _strip_launcher(tokens)
    argv = tuple(tokens)
    model, values, unknown = _scan(tokens)
    if "config" in values:
        config_values = _read_config_file(values.pop("config"))
        values = {**config_values, **values}
        model = model or config_values.pop("model", None)
    model = values.pop("model", None) or model
    serve = ServeFacts(unknown_flags=tuple(unknown), argv=argv)
    serve = replace(serve, **{k: v for k, v in values.items() if k in ServeFacts.__dataclass_fields__})
    backend_env = env.get("VLLM_ATTENTION_BACKEND")
    if serve.attention_backend:
        serve = replace(serve, attention_backend_source="--attention-backend")
    elif backend_env:
        serve = replace(serve, attention_backend=backend_env.upper(), attention_backend_source="VLLM_ATTENTION_BACKEND")
    return ServeCommand(model=model, serve=replace(serve, env=tuple(sorted(env.items()))))


def _strip_launcher(tokens: list[str]) -> list[str]:
    if tokens[:2] == ["vllm", "serve"]:
        return tokens[2:]
    if len(tokens) >= 3 and Path(tokens[0]).name.startswith("python") and tokens[1] == "-m":
        return tokens[3:]
    if tokens[:1] == ["serve"]:
        return tokens[1:]
    return tokens


def _canonical(flag: str) -> str:
    flag = _flags().short.get(flag, flag)
    return "--" + flag[2:].replace("_", "-") if flag.startswith("--") else flag


def _scan(tokens: list[str]) -> tuple[str | None, dict[str, Any], list[str]]:
    model: str | None = None
    values: dict[str, Any] = {}
    unknown: list[str] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if not token.startswith("-") or token == "-":
            if model is None:
                model = token
            else:
                unknown.append(token)
            continue
        flag, has_inline, inline = token.partition("=")
        flag = _canonical(flag)
        switches = _flags().switches
        if flag in switches or (flag.startswith("--no-") and "--" + flag[5:] in switches):
            field = switches.get(flag) or switches["--" + flag[5:]]
            values[field] = not flag.startswith("--no-")
            continue
        takes_value = flag in _flags().valued or flag in ("--model", "--config")
        if has_inline:
            value = inline
        elif takes_value or _unknown_takes_value(flag, tokens, index):
            if index >= len(tokens):
                raise UsageError(f"serve flag {flag} needs a value", f"e.g. {flag} VALUE")
            if takes_value and _is_an_option(tokens[index]):  # argparse's "expected one argument"
                raise UsageError(f"serve flag {flag} needs a value: the next word, {tokens[index]}, is an option "
                                 "(a variable left empty?)", f"e.g. {flag} VALUE")
            value = tokens[index]
            index += 1
        else:
            unknown.append(flag)
            continue
        if flag in ("--model", "--config"):
            values[flag[2:]] = value
        elif flag in _flags().valued:
            field, parse = _flags().valued[flag]
            values[field] = _parse_value(flag, value, parse)
        else:
            unknown.append(f"{flag}={value}")
    return model, values, unknown


def _is_an_option(word: str) -> bool:
    """Whether argparse reads the word as an option string, so the option before it gets no value (vLLM's parser as
    vllm_pack/serve_parser.py reads it; a word holding a space is a value to argparse's _parse_optional)."""
    from kvdoctor.vllm_pack.serve_parser import looks_like_option

    return looks_like_option(word) and " " not in word


def _unknown_takes_value(flag: str, tokens: list[str], index: int) -> bool:
    if flag.startswith(("--enable-", "--disable-", "--no-")):
        return False
    return index < len(tokens) and not tokens[index].startswith("-")


def _parse_value(flag: str, value: str, parse: Callable[[str], Any]) -> Any:
    try:
        return parse(value)
    except (ValueError, OverflowError) as exc:  # OverflowError: --max-model-len inf
        reason = str(exc) if "must" in str(exc) else "is not a valid value"
        raise UsageError(f"serve flag {flag} {value!r}: {reason}") from None


def _read_config_file(path_text: str) -> dict[str, Any]:
    """vLLM's --config YAML: keys are flag names; values are checked like flags."""
    path = Path(path_text)
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise UsageError(f"--config {path}: file is over 1 MiB")
        raw = load_yaml(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"--config {path}: file not found") from None
    except (OSError, UnicodeDecodeError, YAMLError, RecursionError) as exc:
        kind = exc.kind if isinstance(exc, YAMLError) else type(exc).__name__
        raise UsageError(f"--config {path}: cannot read it as YAML ({kind})") from None
    if not isinstance(raw, dict):
        raise UsageError(f"--config {path}: expected a mapping of flag names to values")
    tokens: list[str] = []
    for key, value in raw.items():
        flag = _canonical("--" + str(key))
        if value is True:
            tokens.append(flag)
        elif value not in (False, None):
            tokens.append(f"{flag}={value}")
    _, values, _ = _scan(tokens)
    if "model" in raw:
        values["model"] = str(raw["model"])
    return values
