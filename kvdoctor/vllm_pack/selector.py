"""vLLM's attention selector as the pack records it: its inputs, its answer, and what both lookups read.

select.py replays a release's selection from 0.20.0 on, select_grid.py looks older releases' answers up in a
grid; both take `SelectorInputs`, give a `Selection`, and read the pack's answer trees, constructor guards and
vLLM's repr of the selector config the same way (this module).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SelectorInputs:
    """vLLM's AttentionSelectorConfig for one attention layer, plus the platform and the forced backend."""

    capability: tuple[int, int]
    head_size: int
    model_dtype: str
    """'bfloat16', 'float16' or 'float32' (the resolved model dtype)."""
    kv_cache_dtype: str = "auto"
    block_size: int | None = None
    """--block-size when the user gave it (vLLM passes None otherwise)."""
    use_mla: bool = False
    has_sink: bool = False
    use_sparse: bool = False
    attn_type: str = "decoder"
    forced_backend: str | None = None
    """--attention-backend / VLLM_ATTENTION_BACKEND, or None."""
    sliding_window: int | None = None
    num_heads: int | None = None
    """Attention heads of the layer on one rank (MLA priorities on SM10x depend on it); None: unknown."""
    use_mm_prefix: bool = False
    use_per_head_quant_scales: bool = False
    use_non_causal: bool = False
    use_batch_invariant: bool = False
    use_kv_connector: bool = False
    use_pcp: bool = False
    use_dcp: bool = False
    device_name: str | None = None
    """Substituted into messages that name the device (vLLM prints torch's device name)."""
    logits_soft_cap: float | None = None
    """The layers' attention logits soft cap (Gemma 2 style), or None."""
    use_alibi: bool = False
    """ALiBi slopes instead of rotary positions."""
    use_v1_env: str | None = None
    """VLLM_USE_V1 as the deployment sets it, or None when unset (0.7-0.10 pick their engine with it)."""
    flashinfer_cubin: str = "present"
    """The target's flashinfer-cubin (FlashInfer's TRT-LLM cubins reachable: 'present' | 'absent'; the official
    image's value by default, kvdoctor/model/modelled.py): the replay reads vLLM's answers asked with that value
    where the pack holds them (release.modelled_variant)."""

    def flag(self, name: str) -> bool:
        if name == "has_sliding_window":
            return self.sliding_window is not None
        return bool(getattr(self, name, False))


@dataclass(frozen=True)
class Selection:
    """What the release would do with these inputs."""

    backend: str | None
    """The backend vLLM picks (or the forced one when valid); None when it raises or it is undecided."""
    reasons: dict[str, tuple[str, ...]]
    """Each backend it rejected (in priority order), with vLLM's own reason strings."""
    error: str | None
    """vLLM's own error message when no backend is valid, the forced one is invalid or unknown, or the chosen
    backend's constructor refuses the configuration; else None."""
    undecided: tuple[str, ...] = ()
    """Inputs the pack cannot decide, with why (empty when the answer is decided)."""
    evidence: tuple[str, ...] = ()
    """Where the answer comes from: 'vllm/platforms/cuda.py:390 (vLLM 0.25.1)', ..."""
    priorities: tuple[str, ...] = ()
    """The priority list vLLM walks for these inputs."""
    error_kind: str | None = None
    """'no_valid_backend', 'forced_invalid', 'unknown_backend' or 'constructor' (with error), else None."""
    candidates: tuple[str, ...] = field(default=())
    """Every valid backend in priority order (vLLM logs them as 'potential backends')."""
    engine: str | None = "V1"
    """The engine that starts: 'V0' where 0.7-0.10 fall back to it (their oracle, VLLM_USE_V1's default or its
    setting), 'V1' otherwise (V0 is gone from 0.11); None when the pack cannot say which."""


def cap_key(capability: tuple[int, int]) -> str:
    """'8.9': a compute capability as the pack keys it."""
    return f"{capability[0]}.{capability[1]}"


def tree_has(tree, cell) -> bool:
    """Does the pack's answer tree (nested [values, subtree] pairs, True at a leaf) hold this cell of values?"""
    if tree is True:
        return True
    head, rest = cell[0], cell[1:]
    for values, sub in tree:
        if head in values:
            return tree_has(sub, rest)
    return False


def config_repr(attention: dict, inputs: SelectorInputs) -> str:
    """The inputs as the release's AttentionSelectorConfig prints itself in vLLM's error messages."""
    template = attention["selector_config"]["repr_template"]
    values = {"head_size": inputs.head_size, "dtype": f"torch.{inputs.model_dtype}",
              "kv_cache_dtype": inputs.kv_cache_dtype, "block_size": inputs.block_size,
              "use_mla": inputs.use_mla, "has_sink": inputs.has_sink, "use_sparse": inputs.use_sparse,
              "use_mm_prefix": inputs.use_mm_prefix, "use_per_head_quant_scales": inputs.use_per_head_quant_scales,
              "attn_type": inputs.attn_type, "has_sliding_window": inputs.sliding_window is not None,
              "use_non_causal": inputs.use_non_causal, "use_batch_invariant": inputs.use_batch_invariant,
              "use_kv_connector": inputs.use_kv_connector, "use_pcp": inputs.use_pcp, "use_dcp": inputs.use_dcp}
    for name in attention["selector_config"]["fields"]:
        template = template.replace("{" + name + "}", str(values.get(name, False)))
    return template


def constructor_error(attention: dict, name: str, inputs: SelectorInputs) -> tuple[str, str] | None:
    """('Type: message', file:line) of the error the backend's implementation constructor raises here."""
    found = guard_entry(attention, name, inputs.capability, inputs.kv_cache_dtype)
    if found is None:
        return None
    kind, message, where = found
    text = f"{kind}: {message}"
    return (text.replace("{device_name}", inputs.device_name) if inputs.device_name else text), where


# the layer features the builder probes constructors with (child_layer_probes.FEATURES), as a layer has them
_FEATURE_WORDS = {"sliding_window": "sliding-window layers", "logits_soft_cap": "a logits soft cap",
                  "sinks": "attention sinks", "alibi": "ALiBi slopes", "head_size_64": "head size 64",
                  "head_size_256": "head size 256"}


def layer_features(inputs: SelectorInputs) -> tuple[str, ...]:
    """The features of the model's attention layers that a backend's constructors may refuse (beyond the plain
    8 x 128 decoder layer the constructor guards were probed with)."""
    features = []
    if inputs.sliding_window:
        features.append("sliding_window")
    if inputs.logits_soft_cap:
        features.append("logits_soft_cap")
    if inputs.has_sink:
        features.append("sinks")
    if inputs.use_alibi:
        features.append("alibi")
    if not inputs.use_mla and f"head_size_{inputs.head_size}" in _FEATURE_WORDS:
        features.append(f"head_size_{inputs.head_size}")
    return tuple(features)


def layer_error(attention: dict, name: str, inputs: SelectorInputs,
                version: str) -> tuple[tuple[str, str] | None, str | None]:
    """(('Type: message', file:line), None) when `name`'s implementation constructor or metadata builder refuses
    one of the model's layer features here (the pack's `layer_guards`); (None, why) when the pack did not probe
    it, so nothing may pass on it; (None, None) when the probes constructed it."""
    features = layer_features(inputs)
    if not features:
        return None, None
    words = ", ".join(_FEATURE_WORDS[f] for f in features)
    layer = attention.get("layer_guards")
    if layer is None:
        return None, (f"{name} with {words}: the pack did not probe vLLM {version}'s constructors with these layer "
                      "features")
    cell = f"{cap_key(inputs.capability)}|{inputs.kv_cache_dtype}"
    refusals = layer["refusals"].get(name, {})
    for message, entry in refusals.items():
        if message != "<not probed>" and any(f"{cell}|{f}" in entry["cells"] for f in features):
            text = f"{entry['type']}: {message}"
            return ((text.replace("{device_name}", inputs.device_name) if inputs.device_name else text),
                    entry["where"]), None
    if "sliding_window" in features and inputs.kv_cache_dtype.startswith("turboquant_"):
        # TurboQuant's own KV-cache spec and the page-size unification with sliding-window layers (0.25.1 stops
        # there: an AssertionError in page_size_bytes) are not among the probes
        return None, (f"{name} with {words} and --kv-cache-dtype {inputs.kv_cache_dtype}: the pack did not probe "
                      f"vLLM {version}'s TurboQuant KV-cache spec with sliding-window layers")
    probed = layer["probed"].get(name, {})
    unprobed = set(refusals.get("<not probed>", {}).get("cells", ()))
    layer_read = [f for f in features if not f.startswith("head_size")]  # what a metadata builder reads of layers
    if cell not in probed.get("impl", ()) or any(f"{cell}|{f}" in unprobed for f in features) or (
            layer_read and cell not in probed.get("builder", ())):
        return None, (f"{name} with {words} on SM {cap_key(inputs.capability)}, --kv-cache-dtype "
                      f"{inputs.kv_cache_dtype}: vLLM {version}'s constructors could not be probed here")
    return None, None


def guard_entry(attention: dict, name: str, capability: tuple[int, int], kv_cache_dtype: str):
    """(exception type, message template, file:line) of the guard `name`'s constructor trips here, or None."""
    cell = f"{cap_key(capability)}|{kv_cache_dtype}"
    for message, entry in attention.get("guards", {}).get(name, {}).items():
        if cell in entry["cells"]:
            return entry["type"], message, entry["where"]
    return None
