"""What to change after an attention-selection failure, from the knowledge pack's backend selector.

`kvdoctor.vllm_pack.select.select_backend(release, SelectorInputs(...))` replays vLLM's own selection for one
release. For the configuration the log printed it is asked: which backend serves it on this GPU with the KV
dtype left to vLLM, and on which other GPU generations it is served as configured. Without the selector, or
for a release the pack does not hold, the advice says so and nothing is guessed.
"""

from __future__ import annotations

from typing import Any

from kvdoctor.explain.selector import SelectorError

# One representative compute capability per GPU generation a deployment engineer would move to.
GENERATIONS = ((7.5, "Turing (T4)"), (8.0, "Ampere (A100)"), (8.6, "Ampere (A10/RTX 30)"), (8.9, "Ada (L4/L40S)"),
               (9.0, "Hopper (H100/H200)"), (10.0, "Blackwell (B200)"), (12.0, "Blackwell (RTX 50/PRO 6000)"))
_BOOL = {"True": True, "False": False}


def advise(error: SelectorError, facts: dict[str, Any]) -> str | None:
    try:
        from kvdoctor.vllm_pack import load_release, newest_release
        from kvdoctor.vllm_pack.select import SelectorInputs, select_backend
    except ImportError:
        return None
    version = facts.get("vllm.version")
    release = load_release(version) if version else None
    label = version
    if release is None:
        newest = newest_release()
        release = load_release(newest) if newest else None
        if release is None:
            return None
        label = f"{newest} (the newest release kvdoctor knows; the log's is {version or 'not named'})"
    inputs = _inputs(error, facts, SelectorInputs)
    if inputs is None:
        return None

    undecided = []

    def serves(capability: float, **change: Any) -> str | None:
        result = select_backend(release, SelectorInputs(**dict(inputs, capability=_cap(capability), **change)))
        backend = getattr(result, "backend", None)
        if not (backend or getattr(result, "error", None) or getattr(result, "reasons", None)):
            undecided.append(capability)  # the pack could not replay this release's selection: say nothing
        return backend

    capability = facts.get("gpu.capability")
    kv_forced = inputs.get("kv_cache_dtype") not in (None, "auto")
    parts = []
    try:
        if capability is not None and kv_forced:
            backend = serves(capability, kv_cache_dtype="auto")
            if backend:
                parts.append(f"with --kv-cache-dtype auto vLLM {label} would serve it with {backend} on this GPU")
        if inputs.get("forced_backend"):
            backend = serves(capability or 9.0, forced_backend=None)
            if backend:
                parts.append(f"without the forced backend vLLM {label} would pick {backend}")
        served = [f"{name}: {backend}" for cap, name in GENERATIONS if (backend := serves(cap))]
        if undecided:
            parts = [p for p in parts if p]
            if not served:
                return None
        if served:
            parts.append(f"as configured, vLLM {label} would serve it on " + ", ".join(served))
        else:
            parts.append(f"as configured, vLLM {label} serves it on no NVIDIA GPU generation")
            if kv_forced and capability is None:
                auto = [f"{name}: {backend}" for cap, name in GENERATIONS if (backend := serves(cap, kv_cache_dtype="auto"))]
                if auto:
                    parts.append("with --kv-cache-dtype auto it would on " + ", ".join(auto))
    except (TypeError, ValueError, KeyError, AttributeError):
        return None
    return "Knowledge pack: " + "; ".join(parts) + "."


def _cap(capability: float) -> tuple[int, int]:
    major = int(capability)
    return major, round((capability - major) * 10)


def _inputs(error: SelectorError, facts: dict[str, Any], inputs_class: type) -> dict[str, Any] | None:
    """SelectorInputs fields from the printed AttentionSelectorConfig (only those this pack version knows)."""
    from dataclasses import fields

    config = error.config
    head_size = config.get("head_size")
    if head_size is None or not head_size.isdigit():
        return None
    values: dict[str, Any] = {
        "head_size": int(head_size),
        "model_dtype": config.get("dtype", facts.get("model.dtype", "bfloat16")),
        "kv_cache_dtype": config.get("kv_cache_dtype", facts.get("serve.kv_cache_dtype", "auto")),
        "attn_type": config.get("attn_type", "decoder").lower(),
        "forced_backend": next(iter(error.reasons)) if error.kind == "selected_invalid" else None,
    }
    block_size = config.get("block_size")
    if block_size and block_size.isdigit():
        values["block_size"] = int(block_size)
    for name, value in config.items():
        if value in _BOOL and name not in values:
            values[name] = _BOOL[value]
    known = {f.name for f in fields(inputs_class)}
    return {name: value for name, value in values.items() if name in known}
