"""The dtype vLLM runs a model in, for a target GPU and --dtype (facts section 5, `--dtype auto`)."""

from __future__ import annotations

from kvdoctor.data.dtypes import FLAG_DTYPES


def supported_dtypes(capability: tuple[int, int]) -> list[str]:
    """vLLM's CUDA list, in preference order."""
    if capability >= (8, 0):
        return ["bfloat16", "float16", "float32"]
    return ["float16", "float32"]


def resolve_model_dtype(
    config_dtype: str | None, flag: str, capability: tuple[int, int] | None
) -> tuple[str | None, str]:
    """(effective dtype or None when the GPU decides and is unknown, how it was reached)."""
    if flag != "auto":
        dtype = FLAG_DTYPES[flag]
        return dtype, f"--dtype {flag}"
    declared = config_dtype or "float32"
    origin = f"config.json declares {config_dtype}" if config_dtype else "config.json declares no dtype (float32)"
    if capability is None:
        if declared == "float16":
            return "float16", origin
        return None, f"{origin}; the effective dtype depends on the GPU (bfloat16 on SM80+, float16 below)"
    supported = supported_dtypes(capability)
    if declared == "float32":
        target = supported[0]
        return target, f"{origin}; vLLM downcasts float32 to {target} on this GPU"
    if declared not in supported:
        return "float16", f"{origin}; this GPU has no bfloat16, vLLM falls back to float16 with a warning"
    return declared, origin
