"""Which attention backend a vLLM release picks on CUDA, replayed from that release's own answers (the pack).

vLLM's `CudaPlatformBase.get_attn_backend_cls` walks `_get_backend_priorities(...)` and keeps the first backend
whose `validate_configuration(...)` returns no reasons; a forced backend (`--attention-backend`) is checked
alone. The pack stores, per release and compute capability, the order and wording of the base checks and
each backend's answer to each, `supports_combination` over a grid, the priority lists and the constructor
guards; this module replays them. Where an answer was not stored (a head size outside the grid, a check that
needs a run-time value), the selection is `undecided` with what and why, never guessed.
"""

from __future__ import annotations

from kvdoctor.vllm_pack.release import ReleaseFacts, modelled_variant
from kvdoctor.vllm_pack.select_grid import select_from_grid
from kvdoctor.vllm_pack.selector import (
    Selection,
    SelectorInputs,
    cap_key,
    config_repr,
    constructor_error,
    guard_entry,
    layer_error,
    tree_has,
)
from kvdoctor.vllm_pack.store import load_backend_grid, load_selection

__all__ = ["NotInPack", "Selection", "SelectorInputs", "constructor_guard", "forced_backend_unknown", "priorities",
           "quantizes_query", "select_backend"]


def _in_ints(spec: dict, value: int) -> bool | None:
    if "all" in spec:
        lo, hi = spec["all"]
        return True if lo <= value <= hi else None
    if "none" in spec:
        return False
    if "values" in spec:
        return value in spec["values"]
    step = spec["step"]
    return any(lo <= value <= hi and (value - lo) % step == 0 for lo, hi in spec["ranges"])


class _Replay:
    """validate_configuration of one release, replayed for one capability."""

    def __init__(self, attention: dict, inputs: SelectorInputs):
        self.a = attention
        self.inputs = inputs
        self.per = attention["per_capability"].get(cap_key(inputs.capability))
        self.undecided: list[str] = []

    def _value_answer(self, answers: dict, method: str, value):
        answer = answers.get(method)
        if answer is None:
            return None
        if method == "supports_head_size":
            ok = _in_ints(answer, value)
            if ok is None:
                self.undecided.append(f"head_size {value}: outside the sizes the pack asked vLLM about (1-1024)")
            return ok
        if method == "supports_block_size":
            if value in self.a["block_domain"]:
                return value in answer
            kernel = answers.get("kernel_block_sizes")
            if isinstance(kernel, list):  # the base rule: a multiple of any kernel block size
                return not kernel or any(value % (k["multiple_of"] if isinstance(k, dict) else k) == 0
                                         for k in kernel)
            self.undecided.append(f"block_size {value}: not among the sizes the pack asked vLLM about")
            return None
        if method == "supports_compute_capability":
            return answer if isinstance(answer, bool) else None
        return value in answer

    def validate(self, name: str) -> tuple[str, ...] | None:
        """vLLM's reasons for rejecting `name` (empty: valid); None when the pack cannot say."""
        index = (self.per or {}).get(name)
        answers = None if index is None else self.a["answer_sets"][index]
        klass = self.a["classes"].get(name, {})
        if answers is None or "error" in answers or "import_error" in klass:
            why = klass.get("import_error") or (answers or {}).get("error", "not read")
            self.undecided.append(f"{name}: the pack could not ask vLLM about it ({str(why).splitlines()[-1]})")
            return None
        i = self.inputs
        values = {"head_size": i.head_size, "dtype": i.model_dtype, "kv_cache_dtype": i.kv_cache_dtype,
                  "block_size": i.block_size, "attn_type": i.attn_type, "device_capability": i.capability,
                  "use_mla": i.use_mla, "use_sparse": i.use_sparse}
        reasons: list[str] = []
        decided = True
        for check in self.a["checks"]["order"]:
            if not all(i.flag(g) for g in check["gates"]):
                continue
            method, kind = check["method"], check["kind"]
            if kind == "equal":
                if values[check["input"]] == check["when_input"] and answers.get(method) != check["when_input"]:
                    reasons.append(check["message"])
                continue
            if kind == "value":
                ok = self._value_answer(answers, method, values[check["input"]])
            else:
                ok = answers.get(method)
            if isinstance(ok, str) or ok is None:
                self.undecided.append(f"{name}.{method}: vLLM's answer needs run-time state ({ok})"
                                      if isinstance(ok, str) else f"{name}: check '{check['message']}' not recorded")
                decided = False
                continue
            if ok is False:
                reasons.append(check["message"].replace("{attn_type}", i.attn_type))
        combo = self._combination(name, answers.get("combination"))
        if combo is False:
            decided = False
        elif combo:
            reasons.append(combo)
        return tuple(reasons) if decided else None

    def _combination(self, name: str, combo: dict | None):
        if not combo:
            return None
        i = self.inputs
        cell = []
        for axis in combo["axes"]:
            value = {"head_size": i.head_size, "dtype": i.model_dtype, "kv_cache_dtype": i.kv_cache_dtype,
                     "block_size": i.block_size, "has_sink": i.has_sink, "use_mm_prefix": i.use_mm_prefix,
                     "use_mla": i.use_mla, "use_sparse": i.use_sparse}[axis]
            if value not in combo["grid"][axis]:
                self.undecided.append(f"{name}.supports_combination: {axis}={value} is outside the grid the "
                                      "pack asked vLLM about")
                return False
            cell.append(value)
        for reason, tree in combo["reasons"].items():
            if tree_has(tree, cell):
                if reason.startswith("<error"):
                    self.undecided.append(f"{name}.supports_combination raised without a GPU: {reason}")
                    return False
                return reason
        return None


def priorities(attention: dict, inputs: SelectorInputs) -> tuple[list[str] | None, str | None]:
    """The priority list for these inputs, or (None, why) when it depends on something unknown."""
    table = attention["priorities"]["table"]
    lists = attention["priorities"]["lists"]
    non_causal = inputs.use_non_causal and "use_non_causal" in attention["priorities"]["params"]
    cap, mla, kv = cap_key(inputs.capability), f"{int(inputs.use_mla)}{'n' if non_causal else ''}", \
        inputs.kv_cache_dtype
    for key in (f"{cap}|{mla}|*|*", f"{cap}|{mla}|{kv}|*", f"{cap}|{mla}|{kv}|{inputs.num_heads}"):
        if key in table:
            return lists[table[key]], None
    heads = sorted(int(k.rsplit("|", 1)[1]) for k in table
                   if k.startswith(f"{cap}|{mla}|{kv}|") and not k.endswith("|None"))
    if inputs.num_heads is None or not heads:
        return None, "num_heads: vLLM's priority list on this GPU depends on the layer's head count"
    below = [h for h in heads if h <= inputs.num_heads]
    above = [h for h in heads if h >= inputs.num_heads]
    answers = {table[f"{cap}|{mla}|{kv}|{h}"] for h in (below[-1:] + above[:1])}
    if len(answers) == 1:
        return lists[answers.pop()], None
    return None, f"num_heads {inputs.num_heads}: between head counts the pack asked about with different answers"


def select_backend(release: ReleaseFacts, inputs: SelectorInputs) -> Selection:
    """The backend `release` picks for `inputs` on CUDA, with every rejected backend's reasons."""
    variant = modelled_variant(release, "flashinfer-cubin", inputs.flashinfer_cubin)
    attention = load_selection(release.version, inputs.capability, variant)
    if attention is None and load_backend_grid(release.version) is not None:
        return select_from_grid(release, load_backend_grid(release.version), inputs)
    if attention is None:
        why = (release.data.get("not_read") or {}).get("backend_choice")
        return Selection(None, {}, None, (f"the pack holds no attention facts for vLLM {release.version}"
                                          + (f": {why}" if why else ""),))
    where = attention["templates"].get("get_attn_backend_cls")
    evidence = [f"{where} (vLLM {release.version})"] if where else []
    if variant:  # asked of vLLM by the builder with the modelled input stated so (not the release's first read)
        evidence.append(f"vLLM {release.version} asked with {variant.replace('=', ' ')} (modelled input)")
    replay = _Replay(attention, inputs)
    if replay.per is None:
        return Selection(None, {}, None, (f"capability {cap_key(inputs.capability)}: not among the "
                                          "capabilities the pack asked vLLM about",), tuple(evidence))
    enum = attention["enum"]
    if inputs.forced_backend is not None:
        return _forced(release, attention, replay, inputs, evidence)

    order, why = priorities(attention, inputs)
    if order is None:
        return Selection(None, {}, None, (why,), tuple(evidence))
    evidence.append(f"{attention['priorities']['where']} (vLLM {release.version})")
    reasons: dict[str, tuple[str, ...]] = {}
    valid: list[str] = []
    blocked = False  # an undecided backend ahead of the first valid one makes the choice undecided
    for name in order:
        result = replay.validate(name) if name in enum else ("ImportError",)
        if result is None:
            blocked = blocked or not valid
            continue
        if result:
            reasons[name] = result
        else:
            valid.append(name)
    undecided = tuple(dict.fromkeys(replay.undecided)) if blocked else ()
    if undecided:
        return Selection(None, reasons, None, undecided, tuple(evidence), tuple(order))
    if not valid:
        reasons_str = "{" + ", ".join(f"{n}: [{', '.join(r)}]" for n, r in reasons.items()) + "}"
        message = (f"No valid attention backend found for cuda with {config_repr(attention, inputs)}. "
                   f"Reasons: {reasons_str}.")
        return Selection(None, reasons, message, (), tuple(evidence), tuple(order), "no_valid_backend")
    chosen = valid[0]
    guard, why = _guard(attention, chosen, inputs, release.version)
    evidence.append(f"{attention['classes'][chosen]['where']} (vLLM {release.version})")
    if why:
        return Selection(None, reasons, None, (why,), tuple(evidence), tuple(order))
    if guard:
        evidence.append(f"{guard[1]} (vLLM {release.version})")
    return Selection(chosen, reasons, guard[0] if guard else None, (), tuple(evidence), tuple(order),
                     "constructor" if guard else None, tuple(valid))


def _forced(release, attention, replay, inputs, evidence) -> Selection:
    name = inputs.forced_backend.upper()
    if name not in attention["enum"]:
        message = attention["templates"]["unknown_backend"].replace("{name}", inputs.forced_backend)
        return Selection(None, {}, message, (), tuple(evidence), (), "unknown_backend")
    result = replay.validate(name)
    if result is None:
        return Selection(None, {}, None, tuple(dict.fromkeys(replay.undecided)), tuple(evidence), (name,))
    if result:
        shown = attention["templates"]["enum_str"].replace("{name}", name)
        message = f"Selected backend {shown} is not valid for this configuration. Reason: {list(result)}"
        return Selection(None, {name: result}, message, (), tuple(evidence), (name,), "forced_invalid")
    guard, why = _guard(attention, name, inputs, release.version)
    if why:
        return Selection(None, {}, None, (why,), tuple(evidence), (name,))
    if guard:
        evidence.append(f"{guard[1]} (vLLM {release.version})")
    return Selection(name, {}, guard[0] if guard else None, (), tuple(evidence), (name,),
                     "constructor" if guard else None, (name,))


def _guard(attention: dict, name: str, inputs: SelectorInputs, version: str):
    """(('Type: message', file:line) or None, why undecided or None): the plain constructor guard first, then
    what the constructors say of the model's layer features."""
    guard = constructor_error(attention, name, inputs)
    if guard:
        return guard, None
    return layer_error(attention, name, inputs, version)


# A release's backend enum and its "unknown backend" message are the same for every capability; any one reads them.
_ANY_CAPABILITY = (9, 0)


def forced_backend_unknown(release: ReleaseFacts, name: str) -> tuple[bool | None, str | None, tuple[str, ...]]:
    """(True, vLLM's own error, enum) when `name` is not a member of the release's backend enum, so vLLM stops on
    the name whatever the GPU or model; (False, None, enum) when it is one; (None, None, ()) when the pack holds
    no enum for the release."""
    table = load_selection(release.version, _ANY_CAPABILITY) or load_backend_grid(release.version)
    if not table or "enum" not in table:
        return None, None, ()
    enum = tuple(table["enum"])
    if name.upper() in enum:
        return False, None, enum
    template = (table.get("templates") or {}).get("unknown_backend") or table.get("unknown_backend")
    return True, (template.replace("{name}", name) if template else None), enum


class NotInPack(LookupError):
    """The pack did not ask this release's constructors."""


def constructor_guard(version: str, backend: str, capability: tuple[int, int], kv_cache_dtype: str,
                      device_name: str | None = None) -> tuple[str, str, str] | None:
    """(exception type, vLLM's message, file:line) of the error `backend`'s implementation constructor raises on
    this capability and KV dtype in `version`, as the pack recorded it; None when it lets the configuration
    through. Raises NotInPack when the pack did not ask that release's constructors."""
    attention = load_selection(version, capability)
    if attention is None or "guards" not in attention:
        raise NotInPack(f"the pack holds no constructor answers for vLLM {version}")
    found = guard_entry(attention, backend, capability, kv_cache_dtype)
    if found is None:
        return None
    kind, message, where = found
    return kind, message.replace("{device_name}", device_name or "this GPU"), where


def quantizes_query(release: ReleaseFacts, backend: str | None, inputs: SelectorInputs) -> bool | None:
    """Whether the backend's implementation, constructed for this capability and KV dtype, says
    `supports_quant_query_input` (the pack's `backends.query_quant`); None when the release's pack lacks the answer."""
    variant = modelled_variant(release, "flashinfer-cubin", inputs.flashinfer_cubin)
    attention = load_selection(release.version, inputs.capability, variant)
    if not backend or attention is None or "query_quant" not in attention:
        return None
    return f"{cap_key(inputs.capability)}|{inputs.kv_cache_dtype}" in attention["query_quant"].get(backend, ())
