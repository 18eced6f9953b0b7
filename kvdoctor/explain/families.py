"""Failure families (kvdoctor/data/rules/explain.yaml): explain-only rules with the family each belongs to, what
each attention-selector reason means, and which lines show that the server had started."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from kvdoctor.base.errors import RulesFileError
from kvdoctor.rules.loader import Rule

FAMILY_KEYS = {"family", "raised_in", "context", "not_followed_by", "explained_by", "refines", "only_when"}


@dataclass(frozen=True)
class Families:
    rules: tuple[Rule, ...]
    family_of: dict[str, str]
    """Rule id -> family, for the rules here and for check.yaml's own."""
    raised_in: tuple[tuple[re.Pattern[str], str], ...]
    """('file:function' regex, rule id): messages raised there belong to that rule, whatever their wording."""
    context: dict[str, re.Pattern[str]]
    """Rule id -> a regex the log must contain for the rule to apply."""
    not_followed_by: dict[str, re.Pattern[str]]
    """Rule id -> a regex no line after the match may hold (a command that never ran: vLLM's own records follow)."""
    only_when: dict[str, dict[str, str]]
    """Rule id -> facts the log must show with these values for the rule to apply ({serve.tensor_parallel_size: 1})."""
    refines: dict[str, str]
    """Rule id -> the check.yaml rule whose finding it rewrites with the log's values when both match one line."""
    explained_by: dict[str, tuple[str, ...]]
    """Rule id -> rules that cause it: when one of them matched anywhere in the log, it is the primary cause."""
    selector_reasons: tuple[tuple[re.Pattern[str], str, str | None], ...]
    """(reason pattern, what it means, what to say instead when the log lacks a value it names)."""
    selector_families: tuple[dict[str, str], ...]
    started: re.Pattern[str] | None
    """Lines that show the server had started (a later failure happened at a request)."""
    answered: re.Pattern[str] | None
    """A client's print of the server's error answer: the server was up, the failure came at a request."""
    request_failed: re.Pattern[str] | None
    """A request that failed (an HTTP 5xx access-log line)."""
    request_frames: re.Pattern[str] | None
    """Functions that run only while serving requests: an exception raised under one is a request-time failure."""
    request_families_kept: tuple[str, ...]
    """Families that are request-time by nature and keep their own name."""
    request_places: re.Pattern[str] | None = None
    """'file:function' of frames that run only while serving a request (a web framework's route, vLLM's serving
    modules past their set-up)."""
    raise_site_names: dict[str, str] = field(default_factory=dict)
    """A name vLLM's raise sites use (in a condition or an interpolated expression) -> the kvdoctor fact it is."""
    frame_families: tuple[tuple[re.Pattern[str], str], ...] = ()
    """(package-path regex, family): an unknown failure whose traceback passes through a module only that family's
    feature runs (a TurboQuant attention backend) is that family's."""
    word_families: tuple[tuple[re.Pattern[str], str], ...] = ()
    """(regex, family): an unknown failure whose own words (its type, message and frames as the log prints them) name
    a feature only that family concerns (sparse MLA, TurboQuant, a FlashInfer JIT module build)."""
    value_families: tuple[tuple[frozenset[str], str, re.Pattern[str] | None, str], ...] = ()
    """(rule ids, derived value, the regex it must match or None, family): a match of one of those rules whose values
    give that derived value (an OOM whose numbers show other processes holding most of the GPU: others_hold_most),
    matching the regex where one is given (the feature the V1 engine refused: --kv-cache-dtype), belongs to that
    family."""
    frame_decides: frozenset[str] = frozenset()
    """Rules whose message any allocation or call can raise (a CUDA OOM): when the exception's frames are in a place
    another family's `raised_in` claims, that family explains it."""
    visible_devices_rule: str = ""
    """The rule for a run whose own layout needs more GPUs than its CUDA_VISIBLE_DEVICES lists (diagnosis.py)."""
    interface_drift_rule: str = ""
    """The rule for a caller and a callee of different releases disagreeing on vLLM's interface (interface_drift.py)."""
    interface_drift_libraries: frozenset[str] = frozenset()
    """Top-level packages whose own code raising such an error means the interface is theirs, not vLLM's."""
    flag_families: dict[str, str] = field(default_factory=dict)
    """Serve flag -> the family of a failure no rule knows whose message names that flag (explain/named_flag.py)."""
    frameworks_on_vllm: dict[str, str] = field(default_factory=dict)
    """Package -> name of frameworks that drive vLLM (explain/framework_call.py)."""
    request_rules_kept: frozenset[str] = frozenset()
    """Rules whose failure can only come after start-up (waking from sleep mode): their family stays at request time."""


def paste_tolerant(pattern: str) -> str:
    """Outside a character class, a literal space matches any whitespace run (messages wrap in logs) and a literal
    backtick may be missing (a log pasted outside a code block loses its backticks to Markdown)."""
    out, in_class, escaped = [], False, False
    for ch in pattern:
        if escaped:
            out.append(ch)
            escaped = False
        elif ch == "\\":
            out.append(ch)
            escaped = True
        elif ch == "[" and not in_class:
            in_class = True
            out.append(ch)
        elif ch == "]" and in_class:
            in_class = False
            out.append(ch)
        elif ch == " " and not in_class:
            out.append(r"\s+")
        elif ch == "`" and not in_class:
            out.append("`?")
        else:
            out.append(ch)
    return "".join(out)


@lru_cache(maxsize=1)
def load_families() -> Families:
    """explain.yaml's rules (through the one rules loader) with the family knowledge beside them."""
    from kvdoctor.data.fact_names import is_fact_name
    from kvdoctor.rules.loader import bundled_files, bundled_rules

    rules = bundled_rules("explain", is_fact_name, stage_keys=frozenset(FAMILY_KEYS), pattern_rewrite=paste_tolerant)
    (rule_file,) = [f for f in bundled_files() if f.stage == "explain"]
    data = rule_file.data
    family_of, raised_in, context, explained_by = dict(data.get("rule_families") or {}), [], {}, {}
    only_when: dict[str, dict[str, str]] = {}
    refines: dict[str, str] = {}
    not_followed_by: dict[str, re.Pattern[str]] = {}
    for index, (rule, raw) in enumerate(zip(rules, rule_file.raw_rules())):
        extra = {k: v for k, v in raw.items() if k in FAMILY_KEYS}
        if "family" not in extra:
            raise RulesFileError(f"{rule_file.path}: rule #{index + 1} needs a 'family'")
        family_of[rule.id] = extra["family"]
        raised_in += [(re.compile(p), rule.id) for p in extra.get("raised_in", [])]
        if extra.get("refines"):
            refines[rule.id] = extra["refines"]
        if extra.get("explained_by"):
            explained_by[rule.id] = tuple(extra["explained_by"])
        if extra.get("context"):
            context[rule.id] = re.compile(extra["context"])
        if extra.get("not_followed_by"):
            not_followed_by[rule.id] = re.compile(extra["not_followed_by"])
        if extra.get("only_when"):
            for fact in extra["only_when"]:
                if not is_fact_name(fact):
                    raise RulesFileError(f"{rule_file.path}: rule {rule.id}: only_when names {fact!r}, not a fact name")
            only_when[rule.id] = {fact: str(value) for fact, value in extra["only_when"].items()}
    for rule_id, causes in (data.get("check_rules_explained_by") or {}).items():  # check.yaml's rules hold no explain keys
        explained_by[rule_id] = explained_by.get(rule_id, ()) + tuple(causes)
    reasons = tuple((re.compile(r["reason"]), r["means"], r.get("unknown"))
                    for r in data.get("selector_reasons") or [])
    started = data.get("started") or []
    return Families(
        rules=tuple(rules),
        family_of=family_of,
        raised_in=tuple(raised_in),
        context=context,
        not_followed_by=not_followed_by,
        only_when=only_when,
        explained_by=explained_by,
        refines=refines,
        selector_reasons=reasons,
        selector_families=tuple(dict(f) for f in data.get("selector_families") or []),
        started=re.compile("|".join(f"(?:{p})" for p in started)) if started else None,
        answered=re.compile("|".join(f"(?:{p})" for p in data["answered"])) if data.get("answered") else None,
        request_failed=re.compile(data["request_failed"]) if data.get("request_failed") else None,
        request_frames=re.compile(data["request_frames"]) if data.get("request_frames") else None,
        request_places=re.compile(data["request_places"]) if data.get("request_places") else None,
        request_families_kept=tuple(data.get("request_families_kept") or ()),
        raise_site_names=_raise_site_names(data.get("raise_site_names") or {}, is_fact_name, rule_file.path),
        frame_decides=frozenset(data.get("frame_decides") or ()),
        frame_families=tuple((re.compile(f["place"]), f["family"]) for f in data.get("frame_families") or ()),
        word_families=tuple((re.compile(f["words"]), f["family"]) for f in data.get("word_families") or ()),
        value_families=tuple((frozenset(f["rules"]), f["value"], re.compile(f["matches"]) if f.get("matches") else None,
                              f["family"]) for f in data.get("value_families") or ()),  # fmt: skip
        visible_devices_rule=str(data.get("visible_devices_rule") or ""),
        interface_drift_rule=str((data.get("interface_drift") or {}).get("rule") or ""),
        interface_drift_libraries=frozenset((data.get("interface_drift") or {}).get("other_packages") or ()),
        request_rules_kept=frozenset(data.get("request_rules_kept") or ()),
        flag_families={str(flag): str(family) for flag, family in (data.get("flag_families") or {}).items()},
        frameworks_on_vllm={str(package): str(name) for package, name in (data.get("frameworks_on_vllm") or {}).items()},
    )


def _raise_site_names(table: dict, is_fact_name, path) -> dict[str, str]:
    """raise_site_names, each value a declared fact name (data/fact_names.yaml)."""
    for name, fact in table.items():
        if not isinstance(fact, str) or not is_fact_name(fact):
            raise RulesFileError(f"{path}: raise_site_names.{name}: {fact!r} is not a declared fact name")
    return {str(name): fact for name, fact in table.items()}


def derived_values(values: dict[str, Any]) -> dict[str, Any]:
    """log.X_capability = '86' also gives log.X_capability_sm = '8.6'; numbers keep their text."""
    derived = dict(values)
    for name, value in values.items():
        if name.endswith("capability") and isinstance(value, str) and value.isdigit() and len(value) >= 2:
            derived[f"{name}_sm"] = f"{int(value) // 10}.{int(value) % 10}"
    if values.get("path"):
        derived["path_text"] = f", writing {values['path']}"
    if values.get("device"):  # NCCL's duplicate-GPU warning: the two ranks and the device's PCI bus id
        ranks = f"ranks {values['rank_a']} and {values['rank_b']} " if values.get("rank_a") and values.get("rank_b") else ""
        derived["device_text"] = f" ({ranks}both on CUDA device {values['device']})"
    if "in_use" in values and values["in_use"]:
        derived["in_use_text"] = f"; a process already held {values['in_use']}"
    if {"free", "total"} <= set(values) and "used" not in values:
        try:
            derived["used"] = f"{float(values['total']) - float(values['free']):.2f} GiB"
            derived["fits"] = f"{max(0.05, float(values['free']) / float(values['total']) - 0.05):.2f}"
        except ValueError:
            pass
    # one clause naming several values, present only when the log gave all of them (explain/texts.py)
    if {"free", "total", "wanted"} <= set(values):
        derived["memory_text"] = f" ({values['free']} of {values['total']} GiB free, vLLM wants {values['wanted']} GiB)"
    if {"needed", "available"} <= set(values):
        derived["kv_text"] = f" ({values['needed']} GiB needed, {values['available']} GiB left)"
    if values.get("total"):
        free = f" with {values['free']} free" if values.get("free") else ""
        derived["total_text"] = f" on a GPU of {values['total']}{free}"
    others = _held_by_others_gib(values)
    if others is not None:
        derived["others_text"] = f"; other processes held {others:.2f} GiB of it"
        if others > _gib(values["total"]) / 2:
            derived["others_hold_most"] = "true"
    if values.get("ptx") and values.get("current"):
        derived["ptx_text"] = f" (Triton emitted PTX ISA {values['ptx']}; this ptxas reads up to {values['current']})"
    backend = values.get("backend")
    if isinstance(backend, str):
        from kvdoctor.data.backend_names import backend_enum_name  # the one table, data/backend_names.yaml

        derived["backend_flag"] = backend_enum_name(backend)
    return derived


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B)?\s*$")
_TO_GIB = {"KiB": 1 / 1024**2, "KB": 1 / 1024**2, "MiB": 1 / 1024, "MB": 1 / 1024, "GiB": 1.0, "GB": 1.0,
           "TiB": 1024.0, "TB": 1024.0}


def _gib(size: Any) -> float:
    """'48.62 MiB' -> 0.0475; a bare number is GiB (vLLM's own lines give GiB without a unit)."""
    match = _SIZE.match(str(size))
    if match is None:
        raise ValueError(size)
    return float(match.group(1)) * _TO_GIB.get(match.group(2) or "GiB", 1.0)


def _held_by_others_gib(values: dict[str, Any]) -> float | None:
    """What the GPU's other processes held when an allocation failed: its total, less what was free and what this
    process held (torch's OOM message gives all three); None unless the log gave the three."""
    if not all(values.get(name) for name in ("total", "free", "in_use")):
        return None
    try:
        return max(0.0, _gib(values["total"]) - _gib(values["free"]) - _gib(values["in_use"]))
    except ValueError:
        return None

