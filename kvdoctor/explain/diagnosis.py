"""Choosing the one primary cause among the signature matches of a log, in four passes, and its failure family."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from kvdoctor.explain.families import Families, derived_values, load_families
from kvdoctor.explain.selector import SelectorError, family_for
from kvdoctor.explain.signatures import SignatureMatch
from kvdoctor.explain.tracebacks import ExceptionChain, Frame, LoggedException
from kvdoctor.explain.verdict import FailureEvidence, as_exception
from kvdoctor.rules.loader import Rule, Signature

# Evidence kinds a line can stand for the failure by, when no exception and no rule explains it.
_STANDS_FOR_FAILURE = ("error level", "error text", "raise site", "failed to start")
MAX_CANDIDATES = 50
MAX_FRAMES = 2  # the innermost frames only: an outer frame (the engine's start-up) explains nothing
_OTHER_DEVICE = re.compile(r"\b(NPU|XPU|HPU|MLU)(s?)\b")
# a package root not followed by another (a checkout's vllm/vllm/, a venv folder named vllm before site-packages/vllm)
# the libraries the message index reads (and families' raised_in names): a frame's path from its package on
_PACKAGES = "vllm|flashinfer|triton|torch|transformers|huggingface_hub|compressed_tensors"
_PACKAGE_PATH = re.compile(rf"(?:^|/)((?:{_PACKAGES})/(?!(?:{_PACKAGES})/).*)$")
_INSTALLED = re.compile(r"^.*/(?:site|dist)-packages/")
_PACKAGE_ROOT = re.compile(rf"(?:{_PACKAGES})/")


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
    only_wrappers: bool = False
    """True when the only failure lines in the log are wrappers: the failing process's own error is not in it."""


@lru_cache(maxsize=1)
def _rules_by_role() -> dict[str, frozenset[str]]:
    """explain_role (rules.yaml, families.yaml) -> the ids of the rules declared for it."""
    from kvdoctor.rules import load_all_rules

    roles: dict[str, set[str]] = {}
    for rule in load_all_rules([]) + list(load_families().rules):
        if rule.explain_role:
            roles.setdefault(rule.explain_role, set()).add(rule.id)
    return {role: frozenset(ids) for role, ids in roles.items()}


def rules_with_role(role: str) -> frozenset[str]:
    """The ids of the rules whose explain_role is ``role`` (wrapper, selector_error, unknown_failure, ...)."""
    return _rules_by_role().get(role, frozenset())


def unknown_failure_rule() -> str:
    """The rule for a failure no signature matched (explain_role: unknown_failure)."""
    return min(rules_with_role("unknown_failure"), default="")


def clip(text: str, limit: int = 240) -> str:
    """The text on one line, cut to ``limit`` characters with '...' when longer."""
    text = " ".join(text.split()) if "\n" in text else text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def message_origin(text: str, version: str | None):
    """The message-index entry (where vLLM raises it) a line or exception matches, or None (no index, no template)."""
    from kvdoctor.explain.message_index import load_index

    index = load_index()
    if index is None:
        return None
    located = index.locate(text, version)
    if located is None and ("PU" in text or "MLU" in text) and _OTHER_DEVICE.search(text):
        # a platform plugin (vllm-ascend, Intel's, Gaudi's) raises vLLM's message with its device's word for GPU
        located = index.locate(_OTHER_DEVICE.sub(lambda m: "GPU" + m.group(2), text), version)
    if located is not None and _python_wording(located.template.parts):
        return None  # "{} object has no attribute {}": Python's own words, raised by any access, locate nothing
    return located


def diagnose(
    matches: list[SignatureMatch],
    chains: list[ExceptionChain],
    rules: list[Rule],
    families: Families,
    facts: dict[str, Any],
    selector_errors: list[SelectorError],
    evidence: tuple[FailureEvidence, ...] = (),
    cut_frames: tuple[Frame, ...] = (),
) -> Diagnosis:
    """The primary cause: the best root match, else the cause it is a consequence of, else the family that owns the
    place vLLM raised the innermost exception, else a failure line (verdict.failure_evidence): an ERROR line, a
    compiler's error, a raise site, and only when there is nothing else a wrapper; with the primary cause's family.
    ``cut_frames``: the frames of a traceback the log ends in before its exception line
    (tracebacks.trailing_cut_frames), which place an unknown failure that has no frames of its own."""
    diagnosis = _root_of_consequence(_by_rank(matches, chains), families)
    diagnosis = _by_frame(diagnosis, rules, families)
    diagnosis = _by_location(diagnosis, rules, families, facts)
    diagnosis = _from_evidence(diagnosis, evidence)
    # a failure line with no exception around it (an ERROR record, a bare message) is placed by the index too
    if not diagnosis.only_wrappers:  # a wrapper's line is not where the failure was raised
        diagnosis = _by_location(diagnosis, rules, families, facts)
    diagnosis = _by_interface_drift(diagnosis, rules, families, chains, evidence, facts)
    diagnosis = _by_visible_devices(diagnosis, rules, families, facts)
    return replace(diagnosis, family=_family(diagnosis, families, selector_errors, facts, cut_frames))


def _by_rank(matches: list[SignatureMatch], chains: list[ExceptionChain]) -> Diagnosis:
    by_rule: dict[str, list[SignatureMatch]] = {}
    for match in sorted(matches, key=SignatureMatch.rank):
        by_rule.setdefault(match.rule.id, []).append(match)
    best = sorted((group[0] for group in by_rule.values()), key=SignatureMatch.rank)
    # A wrapper is never primary while a root explains the failure, and a generic (non-error) one never is.
    candidates = [m for m in best if m.rule.severity == "error" and m.role == "root"]
    # a root that is so only when no other root matched and no exception came before it (a native crash: often the
    # consequence of an error before it, which then is the failure to explain)
    first_exception = min((e.line for chain in chains for e in chain.exceptions), default=None)
    candidates = candidates or [m for m in best if m.rule.severity == "error" and m.role == "last_root"
                                and m.exception is None and (first_exception is None or first_exception > m.line)]
    candidates = candidates or [m for m in best if m.rule.severity == "error" and m.role != "last_root"
                                and m.rule.id != unknown_failure_rule()]
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
    """When no rule's wording matched, a family whose `raised_in` holds the place vLLM raises the message explains it
    (the message index's places first, then the traceback's innermost frames)."""
    if diagnosis.primary is not None or diagnosis.unknown is None or not families.raised_in:
        return diagnosis
    exception = diagnosis.unknown
    located = message_origin(exception.joined_summary, facts.get("vllm.version"))
    places = [f"{loc.file}:{loc.function}" for loc in located.locations] if located is not None else []
    raised_in = {place.rpartition(":")[2] for place in _frame_places(exception)}
    if raised_in:  # the traceback says where it was raised: a function the index gives elsewhere is another message's
        places = [place for place in places if place.rpartition(":")[2] in raised_in]
    # a message the index does not hold (a bare assert, an IndexError): where the traceback says it was raised; a
    # KeyError or assert raised in a helper (torch, the standard library) still names vLLM's raise site: the
    # innermost frame in vLLM's own code. Not a call Python refused (a keyword the callee does not take): the frame
    # made a call another release of the callee takes, it is not the family's check failing
    # ... unless the index placed the message at a frame of this traceback: its callers (a drafter's loader calling the
    # model loader that raised) are not where it was raised
    if not _CALL_REFUSED.search(exception.message) and not places:
        places += _frame_places(exception)
    rules_by_id = {rule.id: rule for rule in rules}
    for where in places:
        typed = f"{where} {exception.type.rpartition('.')[2]}"  # a place may claim one type raised there only
        for pattern, rule_id in families.raised_in:
            if (pattern.search(where) or pattern.search(typed)) and rule_id in rules_by_id:
                signature = Signature(source=re.escape(where.rpartition(":")[2]), role="root",
                                      note=f"matched by where vLLM raises it: {where}")
                values = (("detail", clip(exception.message or _bare_detail(exception, where), 200)),
                          ("raise_site", where.rpartition(":")[2]))
                match = SignatureMatch(rules_by_id[rule_id], signature, exception.line, exception.summary,
                                       exception, 0, values)
                by_rule = dict(diagnosis.by_rule)
                by_rule[rule_id] = [match]
                return replace(diagnosis, primary=match, unknown=None, by_rule=by_rule)
    return diagnosis


def _by_interface_drift(diagnosis: Diagnosis, rules: list[Rule], families: Families, chains: list[ExceptionChain],
                        evidence: tuple[FailureEvidence, ...], facts: dict[str, Any]) -> Diagnosis:
    """An unexplained failure that is a caller and a callee of different releases disagreeing on vLLM's (or a vLLM
    plugin's) interface (explain/interface_drift.py) is wrapper_api_mismatch. Read only when no rule, raise site or
    module of a family's own feature explained it: every specific family wins."""
    exception = diagnosis.unknown
    rule = next((r for r in rules if r.id == families.interface_drift_rule), None)
    if diagnosis.primary is not None or exception is None or rule is None or not _DRIFT_WORDS.search(exception.message):
        return diagnosis
    if _family_by_frames(exception, families):
        return diagnosis
    from kvdoctor.explain.interface_drift import all_drifts, match_values, read_drift

    first = read_drift(exception.joined, exception.frames, families.interface_drift_libraries)
    if first is None:
        return diagnosis
    texts = [(e.joined, e.frames) for chain in chains for e in chain.exceptions]
    texts += [(e.text, ()) for e in evidence if _DRIFT_WORDS.search(e.text)]
    values = match_values(first, all_drifts(texts, families.interface_drift_libraries))
    signature = Signature(source=re.escape(first.detail), role="root",
                          note="matched as interface drift: Python's words for a caller and a callee of different releases")
    match = SignatureMatch(rule, signature, exception.line, exception.summary, exception, 0, values)
    return replace(diagnosis, primary=match, unknown=None, by_rule={**diagnosis.by_rule, rule.id: [match]})


_DEVICE_LIST = re.compile(r"\d+(?:\s*,\s*\d+)*")


def _by_visible_devices(diagnosis: Diagnosis, rules: list[Rule], families: Families, facts: dict[str, Any]
                        ) -> Diagnosis:  # fmt: skip
    """An unexplained failure of a run whose own command asks for more GPUs (--tensor-parallel-size x
    --pipeline-parallel-size x --data-parallel-size) than the CUDA_VISIBLE_DEVICES the log sets lists: the layout
    cannot be placed on one node whatever the cut traceback said (device_placement, with both numbers)."""
    exception = diagnosis.unknown
    visible = str(facts.get("logged.cuda_visible_devices") or "").strip()
    if diagnosis.primary is not None or exception is None or not _DEVICE_LIST.fullmatch(visible):
        return diagnosis
    sizes = [facts.get(name) for name in ("serve.tensor_parallel_size", "serve.pipeline_parallel_size")]
    sizes.append(facts.get("logged.data_parallel_size", 1))
    rule = next((r for r in rules if r.id == families.visible_devices_rule), None)
    if rule is None or not all(isinstance(size, int) and size > 0 for size in sizes):
        return diagnosis
    required, available = sizes[0] * sizes[1] * sizes[2], len(visible.split(","))
    if required <= available:
        return diagnosis
    detail = (f"The run's command asks for {required} GPUs (tensor {sizes[0]} x pipeline {sizes[1]} x data "
              f"{sizes[2]}) on one node, and its CUDA_VISIBLE_DEVICES={visible} lists {available}")
    signature = Signature(source=re.escape(visible), role="root",
                          note="matched by the run's own layout against the GPUs its log makes visible")
    values = (("required", str(required)), ("available", str(available)), ("detail", detail))
    match = SignatureMatch(rule, signature, exception.line, exception.summary, exception, 0, values)
    return replace(diagnosis, primary=match, unknown=None, by_rule={**diagnosis.by_rule, rule.id: [match]})


_DRIFT_WORDS = re.compile(r"unexpected keyword argument|required (?:positional |keyword-only )?argument|positional[ -]"
                          r"(?:arguments? but|only arguments)|multiple values for argument|has no attribute|cannot "
                          r"import name|No module named|instantiate abstract class")


# Python's own exception wordings: a template that says nothing more is raised by any attribute access or call
_PYTHON_WORDING = re.compile(r"(?:object |module\s*)?has no attribute|got an unexpected keyword argument|missing \d+ required "
                             r"positional argument|takes \d+ positional arguments?|object is not (?:subscriptable|"
                             r"callable|iterable)|unsupported operand type|index out of range|by zero|No module named")


_CALL_REFUSED = re.compile(r"\) got an unexpected keyword argument|\) got some positional-only arguments passed as keyword|"
                           r"\) missing \d+ required (?:positional|keyword-only) argument|\) takes \d+ positional argument")


def _python_wording(parts: tuple[str | None, ...]) -> bool:
    """Whether a template's literals are only Python's own exception wording (and quotes, punctuation)."""
    literal = " ".join(part for part in parts if part)
    rest = _PYTHON_WORDING.sub("", literal)
    return rest != literal and sum(ch.isalpha() for ch in rest) < 8


def _bare_detail(exception: LoggedException, where: str) -> str:
    """A message-less exception told by what it ran ('assert "factor" in rope_scaling'), else by its type and the
    function that raised it ('NotImplementedError in is_async_output_supported')."""
    code = _failed_code(exception)
    if code and not code.startswith("raise "):
        return code
    return f"{exception.type} in {where.rpartition(':')[2]}"


def _failed_code(exception: LoggedException) -> str:
    """A bare exception's own words: the code line the log shows under its innermost frame ('assert "factor" in
    rope_scaling'), or nothing."""
    frame = exception.frames[-1] if exception.frames else None
    return frame.code.strip() if frame is not None and frame.code else ""


def _by_frame(diagnosis: Diagnosis, rules: list[Rule], families: Families) -> Diagnosis:
    """A primary match of a rule whose message is raised anywhere (families.frame_decides: a CUDA OOM) gives way to
    the rule whose `raised_in` claims the place the exception surfaced in vLLM (allocating the KV cache, not the
    profiling run), keeping the message's values."""
    primary = diagnosis.primary
    if primary is None or primary.rule.id not in families.frame_decides or primary.exception is None:
        return diagnosis
    rules_by_id = {rule.id: rule for rule in rules}
    for where in _frame_places(primary.exception):
        for pattern, rule_id in families.raised_in:
            if rule_id in rules_by_id and pattern.search(where):
                signature = Signature(source=re.escape(where.rpartition(":")[2]), role="root",
                                      note=f"matched by where the failure surfaced: {where}")
                values = primary.values + (("detail", clip(primary.exception.message, 200)),)
                match = SignatureMatch(rules_by_id[rule_id], signature, primary.line, primary.text,
                                       primary.exception, primary.depth, values)
                by_rule = dict(diagnosis.by_rule)
                by_rule[rule_id] = [match]
                return replace(diagnosis, primary=match, secondary=(primary,) + diagnosis.secondary, by_rule=by_rule)
    return diagnosis


def _frame_places(exception: LoggedException) -> list[str]:
    """'file:function' of the exception's innermost frames and of its innermost frame in vLLM's own code."""
    innermost = [frame for frame in exception.frames[::-1][:MAX_FRAMES] if frame.function]
    in_vllm = next((frame for frame in exception.frames[::-1] if frame.function and "vllm/" in frame.file), None)
    if in_vllm is not None and in_vllm not in innermost:
        innermost.append(in_vllm)
    return [f"{_package_path(frame.file)}:{frame.function}" for frame in innermost]


def _with_run_kv_dtype(error: SelectorError, facts: dict[str, Any]) -> SelectorError:
    """A selector error whose message did not print the KV dtype ('Selected backend X is not valid for this
    configuration. Reason: [...]') takes the one the run asked for, where the log shows it (its arguments)."""
    run_dtype = facts.get("serve.kv_cache_dtype")
    if error.config.get("kv_cache_dtype") or not run_dtype or run_dtype == "auto":
        return error
    return replace(error, config={**error.config, "kv_cache_dtype": str(run_dtype)})


def _package_path(file: str) -> str:
    """'/usr/lib/python3/dist-packages/vllm/v1/x.py' -> 'vllm/v1/x.py' (message-index style); other paths as they are."""
    path = file.replace("\\", "/")  # a Windows path too
    installed = _INSTALLED.sub("", path)
    if installed != path and _PACKAGE_ROOT.match(installed):
        return installed  # what follows the last site-packages/ is the package, whatever folders precede it
    match = _PACKAGE_PATH.search(path)
    return match.group(1) if match else file


def _from_evidence(diagnosis: Diagnosis, evidence: tuple[FailureEvidence, ...]) -> Diagnosis:
    """No exception and no rule: a failure line is still the failure (the first the message index locates among
    the first few, else the first); with only wrapper lines, the first wrapper, saying so. An exception that is only
    a wrapper ('Engine core initialization failed') gives way to a failure line too: it points at one."""
    wrapper = diagnosis.unknown is not None and _is_wrapper(diagnosis)
    if diagnosis.primary is not None or (diagnosis.unknown is not None and not wrapper):
        return diagnosis
    # in place of a wrapper exception, not an ERROR record: vLLM logs the wrapper's own traceback at ERROR
    kinds = _STANDS_FOR_FAILURE[1:] if wrapper else _STANDS_FOR_FAILURE
    candidates = [e for e in evidence if e.kind in kinds
                  and not e.text.startswith(("File \"", "Traceback", "^"))][:MAX_CANDIDATES]
    if candidates:
        best = next((e for e in candidates if message_origin(e.text, None) is not None), candidates[0])
        return replace(diagnosis, unknown=as_exception(best))
    if diagnosis.unknown is not None:
        return diagnosis  # the wrapper exception itself, when nothing else shows the failure
    wrappers = [e for e in evidence if e.kind == "wrapper"]
    if wrappers:
        return replace(diagnosis, unknown=as_exception(wrappers[0]), only_wrappers=True)
    return diagnosis


def _is_wrapper(diagnosis: Diagnosis) -> bool:
    """Whether the unknown exception is a bare wrapper line (a wrapper rule matched it and it quotes no payload)."""
    exception = diagnosis.unknown
    if exception is None or exception.wrapped:
        return False
    return any(m.role == "wrapper" and m.line == exception.line for group in diagnosis.by_rule.values() for m in group)


def _family(diagnosis: Diagnosis, families: Families, selector_errors: list[SelectorError],
            facts: dict[str, Any] | None = None, cut_frames: tuple[Frame, ...] = ()) -> str | None:
    if diagnosis.primary is not None:
        rule_id = diagnosis.primary.rule.id
        if rule_id in rules_with_role("selector_error") and selector_errors:
            return family_for(_with_run_kv_dtype(selector_errors[0], facts or {}), families.selector_families)
        return _family_by_values(diagnosis, families) or families.family_of.get(rule_id, "other")
    if diagnosis.unknown is None:
        return None
    # the words first: they name one feature exactly (a FlashInfer JIT build under a MoE layer is the toolkit's)
    unknown = diagnosis.unknown
    if not unknown.frames and cut_frames:  # a wrapper whose traceback the log cut before its exception line
        unknown = replace(unknown, frames=cut_frames)
    return _family_by_words(unknown, families) or _family_by_frames(unknown, families) or "other"


def _family_by_values(diagnosis: Diagnosis, families: Families) -> str | None:
    """The family the primary match belongs to by what the values on its line show (families.value_families): the
    values of every rule of the entry matched there (a check.yaml rule and the explain rule that refines it)."""
    primary = diagnosis.primary
    for rule_ids, value, wanted, family in families.value_families:
        if primary.rule.id not in rule_ids:
            continue
        on_its_line = [m for rule_id in rule_ids for m in diagnosis.by_rule.get(rule_id, ()) if m.line == primary.line]
        shown = [derived_values(dict(m.values)).get(value) for m in on_its_line]
        if any(v and (wanted is None or wanted.search(str(v))) for v in shown):
            return family
    return None


def _family_by_words(exception: LoggedException, families: Families) -> str | None:
    """The family whose feature an unknown failure's own words name (families.word_families)."""
    if not families.word_families:
        return None
    text = " ".join([exception.type or "", exception.message or ""] + [
        f"{frame.file} in {frame.function} {frame.code or ''}" for frame in exception.frames])
    return next((family for pattern, family in families.word_families if pattern.search(text)), None)


def _family_by_frames(exception: LoggedException, families: Families) -> str | None:
    """The family whose own module (families.frame_families) an unknown failure's traceback passes through, the
    innermost such frame deciding (a MoE layer's constructor asking a quantization method: the method's family)."""
    for frame in reversed(exception.frames):
        place = _package_path(frame.file)
        for pattern, family in families.frame_families:
            if pattern.search(place):
                return family
    return None
