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
        if newest is None:
            return None
        release, label = load_release(newest), f"{newest} (the newest release kvdoctor knows; the log's is {version or 'not named'})"
        if release is None:
            return None
    inputs = _inputs(error, facts)
    if inputs is None:
        return None
    capability = facts.get("gpu.capability")
    parts = []
    try:
        if capability is not None and inputs.get("kv_cache_dtype") not in (None, "auto"):
            result = select_backend(release, SelectorInputs(**dict(inputs, capability=_cap(capability), kv_cache_dtype="auto")))
            if result.backend:
                parts.append(f"with --kv-cache-dtype auto vLLM {label} would serve it with {result.backend} on this GPU")
        if inputs.get("forced_backend"):
            result = select_backend(release, SelectorInputs(**dict(inputs, capability=_cap(capability or 9.0), forced_backend=None)))
            if result.backend:
                parts.append(f"without the forced backend vLLM {label} would pick {result.backend}")
        served = []
        for cap, name in GENERATIONS:
            result = select_backend(release, SelectorInputs(**dict(inputs, capability=_cap(cap))))
            if result.backend:
                served.append(f"{name}: {result.backend}")
        if served:
            parts.append(f"as configured, vLLM {label} would serve it on " + ", ".join(served))
        elif not parts:
            parts.append(f"vLLM {label} serves this configuration on no NVIDIA GPU generation; change the KV dtype or the model")
    except (TypeError, ValueError, KeyError):
        return None
    return ("Knowledge pack: " + "; ".join(parts) + ".") if parts else None


def _cap(capability: float) -> tuple[int, int]:
    major = int(capability)
    return major, round((capability - major) * 10)


def _inputs(error: SelectorError, facts: dict[str, Any]) -> dict[str, Any] | None:
    config = error.config
    head_size = config.get("head_size")
    if head_size is None or not head_size.isdigit():
        return None
    return {
        "head_size": int(head_size),
        "model_dtype": config.get("dtype", facts.get("model.dtype", "bfloat16")),
        "kv_cache_dtype": config.get("kv_cache_dtype", facts.get("serve.kv_cache_dtype", "auto")),
        "use_mla": _BOOL.get(config.get("use_mla", "False"), False),
        "has_sink": _BOOL.get(config.get("has_sink", "False"), False),
        "use_sparse": _BOOL.get(config.get("use_sparse", "False"), False),
        "attn_type": config.get("attn_type", "DECODER"),
        "forced_backend": next(iter(error.reasons)) if error.kind == "selected_invalid" else None,
    }
