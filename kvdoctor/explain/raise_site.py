"""A message no family knows, explained from where vLLM raises it: the release, the file and Class.function, the
condition it is raised under with the log's values put in for the names the message interpolates, and the
kvdoctor check flag and rules that read those names (explain.yaml's raise_site_names say which fact each is)."""

from __future__ import annotations

import re
from functools import lru_cache

from kvdoctor.explain.message_index import Located, Location

MAX_PLACES = 3
MAX_RULES = 4
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
# the check's flag for a fact namespace other than serve (serve flags come from data/serve_flags.yaml)
_NAMESPACE_FLAGS = {"gpu": "--gpu", "model": "--model", "vllm": "--vllm-version"}


def substituted(condition: str, values: dict[str, str]) -> str:
    """The condition with each interpolated expression the log gave a value for replaced by that value
    ('head_size not in (64, 128)' with {'head_size': '576'} -> '576 not in (64, 128)')."""
    out = condition
    for name, value in sorted(values.items(), key=lambda item: -len(item[0])):
        shown = value if len(value) <= 60 else value[:57] + "..."
        out = re.sub(rf"(?<![\w.]){re.escape(name)}(?![\w(])", lambda _: shown, out)
    return out


def names_read(location: Location) -> set[str]:
    """Every identifier of the condition and of the interpolated expressions ('self.cache_config.cache_dtype' gives
    self, cache_config, cache_dtype)."""
    words: set[str] = set()
    for text in (location.condition or "", *(n for n in location.names if n)):
        words.update(_IDENTIFIER.findall(text))
    return words


def facts_for(words: set[str], aliases: dict[str, str]) -> list[str]:
    """The kvdoctor facts the words name (explain.yaml raise_site_names), in a stable order."""
    return sorted({aliases[word] for word in words if word in aliases})


@lru_cache(maxsize=1)
def _serve_options() -> dict[str, str]:
    from kvdoctor.base.yaml_safe import load_yaml_cached
    from kvdoctor.data import read_data

    table = load_yaml_cached(read_data("serve_flags.yaml"), "serve_flags.yaml")
    options = {name: spec["option"] for name, spec in (table.get("valued") or {}).items()}
    options.update(table.get("switches") or {})
    return options


def flag_for(fact: str) -> str | None:
    """The flag that gives kvdoctor check the fact: the serve option for serve.X, --gpu for gpu.*, ..."""
    namespace, _, name = fact.partition(".")
    if namespace == "serve":
        return _serve_options().get(name)
    return _NAMESPACE_FLAGS.get(namespace)


@lru_cache(maxsize=32)
def rules_reading(fact: str) -> tuple[str, ...]:
    """The ids of kvdoctor check's rules whose `when` tests the fact."""
    from kvdoctor.rules import load_all_rules

    return tuple(sorted(rule.id for rule in load_all_rules([]) if rule.when is not None
                        and fact in rule.when.facts_used()))


def check_sentence(facts_named: list[str]) -> str | None:
    """Which kvdoctor check flags and rules read the facts a raise site's condition names."""
    if not facts_named:
        return None
    parts = []
    for fact in facts_named:
        flag = flag_for(fact)
        rules = rules_reading(fact)
        text = fact + (f" ({flag})" if flag else "")
        if rules:
            shown = ", ".join(rules[:MAX_RULES]) + (f" and {len(rules) - MAX_RULES} more" if len(rules) > MAX_RULES else "")
            text += f", which {shown} test"
        parts.append(text)
    return ("The check that reads what this condition tests before start-up: kvdoctor check with "
            + "; ".join(parts) + ".")


def place_sentence(located: Located, location: Location, version: str | None) -> str:
    """'vLLM 0.30.0 raises ValueError in vllm/x.py:Class.function when `cond` (here `value cond`)'."""
    if location.package != "vllm":
        who = location.package
    elif version and location.has_release(version):
        who = f"vLLM {version}"
    else:
        who = f"vLLM {location.releases}"
    verb = f"raises {location.type}" if location.kind == "raise" and location.type else (
        "raises it" if location.kind == "raise" else f"logs it at {location.kind.upper()}")
    text = f"{who} {verb} in {location.file}:{location.qualname}"
    values = located.named_values(location)
    if location.condition:
        text += f" when `{location.condition}`"
        filled = substituted(location.condition, values)
        if filled != location.condition:
            text += f" (in this log: `{filled}`)"
    shown = {name: value for name, value in values.items() if not location.condition
             or substituted(location.condition, {name: value}) == location.condition}
    if shown:
        text += " with " + ", ".join(f"{name} = {value}" for name, value in list(shown.items())[:4])
    return text


def origin_sentence(located: Located | None, version: str | None, aliases: dict[str, str] | None = None,
                    searched: str | None = None) -> str:
    """Where vLLM (or Triton, torch, FlashInfer) raises the message and under which condition, and the check that
    reads it; or, when the index does not hold it, what was searched."""
    if located is None:
        return searched or "This kvdoctor was built without the message index, so where the message is raised is not known."
    locations = located.locations[:MAX_PLACES]
    places = [place_sentence(located, location, version) for location in locations]
    more = (f" (and {len(located.locations) - MAX_PLACES} more places)"
            if len(located.locations) > MAX_PLACES else "")
    closing = "" if all(loc.condition for loc in locations) else "; read that function for the condition"
    text = "The message index locates it: " + "; ".join(places) + more + closing + "."
    words: set[str] = set()
    for location in locations:
        words |= names_read(location)
    check = check_sentence(facts_for(words, aliases or {}))
    return f"{text} {check}" if check else text


def searched_sentence(packages: dict[str, list[str]] | None, text: str) -> str:
    """The unknown-failure finding's sentence when the index holds nothing for the message: which packages and
    releases it searched."""
    if packages is None:
        return "This kvdoctor was built without the message index, so where the message is raised is not known."
    read = ", ".join(f"{package} {releases[0]}" + (f"-{releases[-1]}" if len(releases) > 1 else "")
                     for package, releases in sorted(packages.items()) if releases)
    words = len(set(_IDENTIFIER.findall(text)))
    return (f"The message index ({read}) does not hold this message either: no raise, assert or error-level logger "
            f"call of those releases prints it in these words (looked up by each of the line's {words} words).")
