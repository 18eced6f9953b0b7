"""Weight quantization as a vLLM release decides it at start-up, replayed from the facts the pack read from its
own code (kvdoctor/data/vllm_pack/quantization/<version>.json, built by kvdoctor.builders.vllm_pack.quantization).

The replay follows ModelConfig._verify_quantization (vllm/config/model.py) and VllmConfig._get_quantization_config
(vllm/config/vllm.py): the checkpoint's `quant_method` against `--quantization`, the method registered or not,
deprecated or not, then the config class's `get_min_capability()` against the GPU and its
`get_supported_act_dtypes()` against the model dtype. What the pack cannot replay (an `override_quantization_method`
that may claim the checkpoint, a capability computed at run time) stays undecided, never passed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from kvdoctor.data.quant_claims import (modelopt_algo_refusal, override_model_types, rewritten_method,
                                        unconditional_overrides)
from kvdoctor.vllm_pack.quantization_schemes import judge_moe, judge_schemes
from kvdoctor.vllm_pack.store import read_pack_file

SUBDIR = "quantization"
# words an override compares with that name no quantization method (they name a config key)
_NOT_METHODS = frozenset({"quant_method", "model_type", "marlin"})


@dataclass(frozen=True)
class QuantMethod:
    """One registered `--quantization` value and the config class vLLM builds for it."""

    name: str
    config_class: str | None
    """'file:ClassName' of the class `get_quantization_config` maps it to (the CUDA branch), None if unread."""
    min_capability: int | None
    """Its `get_min_capability()` (75 for SM 7.5); None when not a literal (computed, or raises)."""
    min_capability_where: str | None
    act_dtypes: tuple[str, ...] | None
    """Its `get_supported_act_dtypes()` as torch names ('bfloat16', 'float16', 'float32'); None if not literal."""
    act_dtypes_where: str | None
    override_where: str | None
    """Where the class defines override_quantization_method (it may claim a checkpoint of another method)."""
    override_mentions: tuple[str, ...] = ()
    """The strings that override compares with (a checkpoint method it may claim)."""
    override_when_asked: tuple[str, ...] = ()
    """The `--quantization` values its claims all depend on; () when it may claim unasked."""


@dataclass(frozen=True)
class ReleaseQuantization:
    """What one release registers and how it refuses."""

    version: str
    methods: dict[str, QuantMethod]
    methods_where: str
    registered: tuple[str, ...]
    """QUANTIZATION_METHODS in vLLM's order."""
    deprecated: tuple[str, ...]
    messages: dict[str, tuple[str, str]]
    """key -> (template with {0}, {1}, ..., file:line): capability, unknown_method, mismatch, act_dtype, deprecated."""
    ct_schemes: dict | None = None
    """compressed-tensors' per-layer scheme selection as the builder read it (quantization_schemes.py)."""
    marlin: dict | None = None
    """Marlin's minimum capability and group sizes (what awq_marlin / gptq_marlin's overrides check)."""
    overrides_order: tuple[str, ...] = ()
    """ModelConfig._verify_quantization's `overrides`: the first that claims the checkpoint names the method."""
    modelopt_mixed: dict | None = None
    """ModelOpt MIXED_PRECISION's per-layer dispatch (builders/vllm_pack/quantization_mixed.py), None before 0.17.1."""
    model_type_overrides: tuple[tuple[str, frozenset[str]], ...] = ()
    """Overrides that claim only for these hf_config.model_type values (data/quant_claims.yaml)."""
    unconditional: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    """(method, checkpoint method, --quantization values) of overrides that always claim it (data/quant_claims.yaml)."""

    def message(self, key: str, *values: object) -> str | None:
        """vLLM's message filled with these values, or None when the release has no such message."""
        if key not in self.messages:
            return None
        template = self.messages[key][0]
        if key == "deprecated" and "%s" in template:
            # vLLM raises ValueError(template, method) (logger-style, never formatted: model.py:1091 in 0.23.0 ...
            # :1500 in 0.34.0), so its message is the two-item tuple: "('The quantization method %s is ...', 'x')"
            return str(ValueError(template, str(values[0])))
        return template.format(*values)

    def claimed_by_override(self, checkpoint_method: str, requested: str | None = None,
                            model_type: str | None = None) -> tuple[str, ...]:  # fmt: skip
        """Methods whose override_quantization_method compares with this checkpoint method (and so may claim it),
        leaving out those that claim only when `--quantization` asks for another value and the CPU/XPU ones (a
        negative minimum capability: their overrides never claim on CUDA). An override that claims only for some
        model types (model_type_overrides) claims exactly when the model's type is one, or `--quantization` asks."""
        word = checkpoint_method.lower()
        typed = dict(self.model_type_overrides)
        if model_type is not None:
            return tuple(m.name for m in self.methods.values() if m.name in typed and word in m.override_mentions
                         and (model_type in typed[m.name] or requested in m.override_when_asked)) + tuple(
                c for c in self.claimed_by_override(checkpoint_method, requested) if c not in typed)
        own = self.methods.get(word)
        # ModelOpt's classes (one module) claim by quant_algo, which the probe already turned into the method name
        family = own.config_class.split(":")[0] if own and own.config_class and word.startswith("modelopt") and \
            requested in (None, word) else None
        return tuple(m.name for m in self.methods.values()
                     if m.override_where and word in m.override_mentions and word not in _NOT_METHODS
                     and (family is None or not (m.config_class or "").startswith(family + ":"))
                     and (m.min_capability is None or m.min_capability >= 0)
                     and (not m.override_when_asked or requested in m.override_when_asked))  # fmt: skip


@lru_cache(maxsize=None)
def release_quantization(version: str) -> ReleaseQuantization | None:
    """The release's quantization facts, or None when the pack did not read them."""
    if "/" in version or version.startswith("."):
        return None
    data = read_pack_file(f"{SUBDIR}/{version}.json")
    if data is None:
        return None
    methods = {
        name: QuantMethod(
            name, m["config_class"], m["min_capability"], m["min_capability_where"],
            tuple(m["act_dtypes"]) if m["act_dtypes"] is not None else None, m["act_dtypes_where"],
            m["override_where"], tuple(m.get("override_mentions") or ()), tuple(m.get("override_when_asked") or ()),
        )
        for name, m in data["methods"].items()
    }  # fmt: skip
    return ReleaseQuantization(
        version, methods, data["methods_where"], tuple(data.get("registered") or methods),
        tuple(data.get("deprecated") or ()),
        {key: (m["template"], m["where"]) for key, m in data.get("messages", {}).items()}, data.get("ct_schemes"),
        data.get("marlin"), tuple((data.get("overrides_order") or {}).get("values") or ()), data.get("modelopt_mixed"),
        tuple(override_model_types(version).items()), unconditional_overrides(version),
    )  # fmt: skip


@dataclass(frozen=True)
class QuantVerdict:
    """What one release does with this checkpoint, `--quantization`, GPU and dtype at start-up."""

    method: str | None
    """The method vLLM ends up with ('none' when unquantized); None when undecided."""
    error_kind: str | None
    """'capability', 'scheme' (a compressed-tensors layer scheme refuses the GPU), 'moe_scheme' (no compressed-tensors
    MoE method takes the experts' scheme), 'unknown_method', 'mismatch', 'deprecated', 'act_dtype', 'modelopt_algo'
    (the config convertor refuses a ModelOpt quant_algo), or 'none'; None when undecided."""
    error: str | None
    """vLLM's own message, or 'none'; None when undecided."""
    undecided: str
    """Why the answer is not decided, or 'none'."""
    where: str
    """The vLLM file:line the answer comes from (the release is the caller's)."""
    min_capability: int | None = None
    schemes: tuple[str, ...] = ()
    """compressed-tensors: the scheme classes vLLM builds for the checkpoint's config groups on this GPU."""
    fallback: str = "none"
    """What changes where vLLM runs the weights by a slower path on this GPU (Marlin weight-only), or 'none'."""


def normalise_method(quant_method: str | None) -> str | None:
    """A checkpoint's quant_method as vLLM compares it: lower case, 'compressed_tensors' spelt with a dash,
    '' read as none."""
    if quant_method is None:
        return None
    method = quant_method.lower().replace("compressed_tensors", "compressed-tensors")
    return method or None


def judge_quantization(release: ReleaseQuantization, *, checkpoint: str | None, requested: str | None,
                       capability: int | None, model_dtype: str | None, allow_deprecated: bool = False,
                       quant_config: dict | None = None, moe: bool = False, model_type: str | None = None,
                       architectures: tuple[str, ...] = ()) -> QuantVerdict:  # fmt: skip
    """Replay the release's start-up checks (see the module docstring); `capability` as vLLM's int (75);
    `quant_config` the checkpoint's quantization config (compressed-tensors' per-layer schemes are judged from it);
    `moe` whether the model has routed experts (their method is chosen separately); `model_type` (config.json's
    top-level) and `architectures` decide the overrides and architecture hooks that depend on them."""
    checkpoint, requested = normalise_method(checkpoint), requested or None
    refusal = modelopt_algo_refusal(release.version, quant_config) if checkpoint is not None else None
    if refusal is not None:  # the config convertor refuses it before any quantization class is asked
        return _refused("modelopt_algo", refusal[0], refusal[1], checkpoint)
    checkpoint = rewritten_method(release.version, architectures, checkpoint, quant_config)
    typed = dict(release.model_type_overrides)
    registered = release.methods
    verify_where = release.messages.get("unknown_method", ("", release.methods_where))[1]
    method = requested
    if checkpoint is not None:
        claimers = release.claimed_by_override(checkpoint, requested, model_type)
        if requested is None or requested == checkpoint:
            if checkpoint not in registered and not claimers:
                message = release.message("unknown_method", checkpoint, list(release.registered))
                return _refused("unknown_method", message, verify_where, checkpoint)
            # vLLM lets the first override that claims the checkpoint rename its method; the Marlin overrides'
            # conditions are replayed, the others decided when every method it can end up with answers alike
            renamed = _unconditional_claims(release, claimers, checkpoint, requested)
            claims = [True if c in renamed or c in typed and model_type is not None else  # kept only when it claims
                      _marlin_claims(release, c, quant_config or {}, capability) for c in claimers]  # fmt: skip
            if requested is None and claimers:
                # vLLM asks the methods that are not in `overrides` first, then `overrides` in order; the first claim wins
                order = [c for c in claimers if c not in release.overrides_order] + \
                    [c for c in release.overrides_order if c in claimers]
                decided = []
                for c in order:
                    decided.append(claims[claimers.index(c)])
                    if decided[-1] is not False:
                        break
                if None not in decided:
                    end = next((renamed.get(c, c) for c, d in zip(order, decided) if d), checkpoint)
                    if end in registered:
                        return _start(release, end, capability, model_dtype, allow_deprecated, quant_config, moe)
            ends = [m for m in dict.fromkeys((*claimers, checkpoint)) if m in registered]
            answers = [_start(release, m, capability, model_dtype, allow_deprecated, quant_config, moe) for m in ends]
            if len({(a.error_kind, a.undecided) for a in answers}) == 1:
                return answers[-1] if checkpoint in registered else answers[0]
            split = "; ".join(f"{m}: {a.error_kind or a.undecided}" for m, a in zip(ends, answers))
            return _undecided(f"override_quantization_method of {', '.join(claimers)} may claim the {checkpoint} "
                              f"checkpoint, and the methods it can end up with answer differently here ({split})",
                              verify_where)  # fmt: skip
        else:
            asked = registered.get(requested)
            if claimers or (asked is not None and asked.override_where and checkpoint in asked.override_mentions):
                who = ", ".join(dict.fromkeys((*claimers, *([requested] if asked and asked.override_where else []))))
                return _undecided(f"--quantization {requested} on a {checkpoint} checkpoint: vLLM asks "
                                  f"override_quantization_method of {who} at start-up", verify_where)
            return _refused("mismatch", release.message("mismatch", checkpoint, requested),
                            release.messages.get("mismatch", ("", verify_where))[1], requested)
    if method is None:
        return QuantVerdict("none", "none", "none", "none", verify_where)
    return _start(release, method, capability, model_dtype, allow_deprecated, quant_config, moe)


def without_checkpoint(release: ReleaseQuantization, requested: str, verdict: QuantVerdict) -> QuantVerdict:
    """The verdict on an unregistered `--quantization` when the model's config was not read. vLLM asks every
    method's override_quantization_method with a checkpoint's quantization_config before it checks the name
    (ModelConfig._verify_quantization), and an override that claims whatever was asked (ModelOpt's, for an NVFP4
    checkpoint) replaces `--quantization`: where the release has such an override, the checkpoint decides."""
    if verdict.error_kind != "unknown_method":
        return verdict
    words = dict.fromkeys(word for m in release.methods.values() for word in m.override_mentions)
    rescuers = sorted({c for word in words for c in release.claimed_by_override(word, requested)})
    if not rescuers:
        return verdict  # refused whatever the checkpoint: unknown without one, a mismatch with one
    named = ", ".join(rescuers[:3]) + (f" and {len(rescuers) - 3} more" if len(rescuers) > 3 else "")
    return _undecided(f"--quantization {requested} is not registered, but vLLM first asks the "
                      f"override_quantization_method of {named} with a quantized checkpoint's config, and a claim "
                      f"replaces --quantization (as ModelOpt's does for NVFP4): config.json decides", verdict.where)


def _start(release: ReleaseQuantization, method: str, capability: int | None, model_dtype: str | None,
           allow_deprecated: bool, quant_config: dict | None = None, moe: bool = False) -> QuantVerdict:  # fmt: skip
    """The checks once the method is settled: registered, deprecated, minimum capability, activation dtype."""
    registered = release.methods
    verify_where = release.messages.get("unknown_method", ("", release.methods_where))[1]
    if method not in registered:
        return _refused("unknown_method", release.message("unknown_method", method, list(release.registered)),
                        verify_where, method)  # fmt: skip
    if method in release.deprecated and not allow_deprecated and "deprecated" in release.messages:
        return _refused("deprecated", release.message("deprecated", method), release.messages["deprecated"][1],
                        method)  # fmt: skip
    entry = registered[method]
    if entry.min_capability is None:
        return _undecided(f"{method}'s get_min_capability() is not a constant vLLM's code states",
                          entry.min_capability_where or release.methods_where)
    if capability is None:
        return _undecided("the GPU's compute capability is unknown", entry.min_capability_where, entry.min_capability)
    if capability < entry.min_capability:
        return _refused("capability", release.message("capability", method, entry.min_capability, capability),
                        entry.min_capability_where, method, entry.min_capability)  # fmt: skip
    if entry.act_dtypes is not None and model_dtype is not None and model_dtype not in entry.act_dtypes:
        listed = "[" + ", ".join(f"torch.{d}" for d in entry.act_dtypes) + "]"
        return _refused("act_dtype", release.message("act_dtype", f"torch.{model_dtype}", method, listed),
                        entry.act_dtypes_where, method, entry.min_capability)  # fmt: skip
    if entry.act_dtypes is not None and model_dtype is None:
        return _undecided("the model dtype is unknown", entry.act_dtypes_where, entry.min_capability)
    if method == "compressed-tensors" and quant_config:
        return _layer_schemes(release, quant_config, capability, entry, moe)
    fallback = _fp8_marlin(release, capability) if method == "fp8" else "none"
    return QuantVerdict(method, "none", "none", "none", entry.min_capability_where, entry.min_capability,
                        fallback=fallback)  # fmt: skip


def _unconditional_claims(release: ReleaseQuantization, claimers: tuple[str, ...], checkpoint: str,
                          requested: str | None) -> dict[str, str]:  # fmt: skip
    """claimer -> the method it names, for the claimers whose config class is an override that claims every
    checkpoint of this method on CUDA (data/quant_claims.yaml unconditional_overrides): the override returns its
    class's get_name(), whichever of the names mapped to that class vLLM asked it under."""
    out = {}
    for name, claims, asked in release.unconditional:
        own = release.methods.get(name)
        if own is None or checkpoint != claims or requested not in (None, *asked):
            continue
        for c in claimers:
            if release.methods[c].config_class == own.config_class:
                out[c] = name
    return out


MARLIN_TYPES = {"AWQMarlinConfig": lambda q: q.get("bits") == 4 and q.get("zero_point") is not None,
                "GPTQMarlinConfig": lambda q: (q.get("bits"), q.get("sym")) in ((4, True), (8, True))
                and q.get("desc_act") is not None}  # fmt: skip
"""is_awq_marlin_compatible / is_gptq_marlin_compatible: the bit widths (and symmetry) their TYPE_MAP holds."""


def _marlin_claims(release: ReleaseQuantization, method: str, quant_config: dict, capability: int | None) -> bool | None:
    """Whether awq_marlin / gptq_marlin's override claims this checkpoint on this GPU (the TYPE_MAP, the group size
    Marlin takes, its minimum capability); None for any other override (not replayed) or what is unknown."""
    entry = release.methods.get(method)
    kind = (entry.config_class or "").rsplit(":", 1)[-1] if entry else ""
    marlin = release.marlin
    if kind not in MARLIN_TYPES or not marlin or capability is None or not quant_config:
        return None
    groups = marlin.get("group_sizes") or []
    return MARLIN_TYPES[kind](quant_config) and quant_config.get("group_size") in groups and \
        capability >= marlin["min_capability"]


def _layer_schemes(release: ReleaseQuantization, quant_config: dict, capability: int, entry: QuantMethod,
                   moe: bool) -> QuantVerdict:  # fmt: skip
    """compressed-tensors builds a scheme per layer after the config class passed: its minimum decides then; a MoE
    model's experts get their method from get_moe_method, which refuses a scheme none of its branches takes."""
    verdict = judge_schemes(release.ct_schemes, quant_config, capability)
    # the attention projections (linear schemes) are built before a layer's experts: their refusal comes first
    experts = judge_moe(release.ct_schemes, quant_config, capability) if moe and not (verdict and verdict.error) \
        else None
    if experts is not None and experts.undecided:
        return _undecided(experts.undecided, experts.where)
    if experts is not None and experts.error:
        return QuantVerdict("compressed-tensors", "moe_scheme", experts.error, "none", experts.where)
    if verdict is None:  # no config groups, or the release's scheme code was not read: the class check stands
        return QuantVerdict("compressed-tensors", "none", "none", "none", entry.min_capability_where,
                            entry.min_capability)  # fmt: skip
    if verdict.undecided:
        return _undecided(verdict.undecided, verdict.where, verdict.min_capability)
    fallback = "; ".join(verdict.fallbacks) or "none"
    if verdict.error:
        return QuantVerdict("compressed-tensors", "scheme", verdict.error, "none", verdict.where,
                            verdict.min_capability, verdict.schemes, fallback)  # fmt: skip
    return QuantVerdict("compressed-tensors", "none", "none", "none", verdict.where, verdict.min_capability,
                        verdict.schemes, fallback)  # fmt: skip


def _fp8_marlin(release: ReleaseQuantization, capability: int) -> str:
    """Fp8LinearMethod below the FP8 matmul's capability: weight-only through Marlin. The threshold is what
    fp8.py states (`use_marlin = not has_device_capability(N)`), else the release's W8A8-FP8 scheme minimum."""
    schemes = release.ct_schemes or {}
    stated = schemes.get("fp8_marlin_below") or {}
    scheme = (schemes.get("classes") or {}).get("CompressedTensorsW8A8Fp8") or {}
    threshold, where = (stated.get("value"), stated.get("where")) if stated else (scheme.get("min_capability"),
                                                                                    scheme.get("where"))
    if threshold is None or capability >= threshold:
        return "none"
    return (f"Fp8LinearMethod: FP8 weights run weight-only through Marlin below SM {threshold / 10:.1f} "
            f"(activations stay 16-bit, no FP8 tensor-core matmul, so slower than on SM {threshold / 10:.1f}+; "
            f"weights keep 1 byte a parameter; threshold from {where.split(':')[0].rsplit('/', 1)[-1]})")


def serving_capability(release: ReleaseQuantization, method: str) -> int | None:
    """The minimum capability the release's class for `method` states, or None."""
    entry = release.methods.get(method)
    return entry.min_capability if entry else None


def _refused(kind: str, message: str | None, where: str | None, method: str | None,
             min_capability: int | None = None) -> QuantVerdict:  # fmt: skip
    if message is None:  # the release raises here but its words were not read
        return _undecided(f"vLLM refuses this ({kind}) but its message was not read", where or "", min_capability)
    return QuantVerdict(method, kind, message, "none", where or "", min_capability)


def _undecided(why: str, where: str | None, min_capability: int | None = None) -> QuantVerdict:
    return QuantVerdict(None, None, None, why, where or "", min_capability)
