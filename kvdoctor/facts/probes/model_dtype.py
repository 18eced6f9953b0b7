"""The dtype vLLM runs a model in, for a target GPU and --dtype: kvdoctor's own reading, the fallback for when the
knowledge pack cannot say (kvdoctor/facts/collect.py asks the pack first). Its rules, and the vLLM releases they
were read from, are in kvdoctor/data/dtype_fallback.yaml; docs/facts/vllm-kv-cache.md section 5 has the source."""

from __future__ import annotations

from functools import lru_cache

from kvdoctor.base.yaml_safe import load_yaml_cached
from kvdoctor.data import read_data
from kvdoctor.data.dtypes import FLAG_DTYPES


@lru_cache(maxsize=1)
def _rules() -> dict:
    return load_yaml_cached(read_data("dtype_fallback.yaml"), "dtype_fallback.yaml")


def _capability(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


def supported_dtypes(capability: tuple[int, int]) -> list[str]:
    """vLLM's CUDA list, in preference order."""
    return next(list(row["dtypes"]) for row in _rules()["supported"] if capability >= _capability(row["from"]))


def _per_gpu() -> str:
    """'bfloat16 on SM80+, float16 below': how the GPU decides, in words."""
    newest, older = _rules()["supported"][:2]
    major, minor = _capability(newest["from"])
    return f"{newest['dtypes'][0]} on SM{major}{minor}+, {older['dtypes'][0]} below"


def resolve_model_dtype(
    config_dtype: str | None, flag: str, capability: tuple[int, int] | None
) -> tuple[str | None, str]:
    """(effective dtype or None when the GPU decides and is unknown, how it was reached)."""
    if flag != "auto":
        dtype = FLAG_DTYPES[flag]
        return dtype, f"--dtype {flag}"
    rules = _rules()
    declared = config_dtype or rules["undeclared"]
    origin = (f"config.json declares {config_dtype}" if config_dtype
              else f"config.json declares no dtype ({rules['undeclared']})")  # fmt: skip
    if capability is None:
        if declared in rules["same_on_every_gpu"]:
            return declared, origin
        return None, f"{origin}; the effective dtype depends on the GPU ({_per_gpu()})"
    supported = supported_dtypes(capability)
    if declared == rules["downcast"]:
        target = supported[0]
        return target, f"{origin}; vLLM downcasts {declared} to {target} on this GPU"
    if declared not in supported:
        fallback = rules["unsupported_becomes"]
        return fallback, f"{origin}; this GPU has no {declared}, vLLM falls back to {fallback} with a warning"
    return declared, origin
