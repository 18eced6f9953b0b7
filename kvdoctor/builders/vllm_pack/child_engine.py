"""Child task `module:engine`: which engine a release with both (0.10.x and older: V0 and V1) starts, per
configuration, as its own `EngineArgs._is_v1_supported_oracle` decides (vllm/engine/arg_utils.py, 0.8-0.10).

The oracle is run on default serve flags with `VLLM_USE_V1` unset (the default: fall back to V0 where V1 lacks a
feature) over capability x `VLLM_ATTENTION_BACKEND` x MLA x KV-cache dtype x model dtype; `_raise_or_fallback`
and `_warn_or_fallback` are watched to record the feature that sends it to V0, in vLLM's words. The model config
is a stand-in for a V1-compatible decoder (the oracle reads `is_v1_compatible`, `use_mla`, the sliding window,
0.8's `dtype` and `task`, 0.9's `has_inner_state`). A release with V0 but no oracle (0.7: V1 is opt-in) answers
what `VLLM_USE_V1`'s default picks, everywhere. Releases without V0 (0.11.0 on) answer None.
"""
from __future__ import annotations

import itertools
import os

from kvdoctor.builders.vllm_pack.child_shared import clear_caches, kv_cache_values, set_env

KEY = ("capability", "forced", "use_mla", "kv_cache_dtype", "dtype")
"""The inputs an engine answer's cell names, '|'-joined ('8.9|-|0|fp8|bfloat16'); '*' stands for every cell."""
DTYPES = ("bfloat16", "float16", "float32")

# every backend a user may force with VLLM_ATTENTION_BACKEND, as the grid asks them (child_backend_grid.FORCED)
FORCED = ("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "TRITON_ATTN_VLLM_V1", "FLEX_ATTENTION", "XFORMERS",
          "XFORMERS_VLLM_V1", "TREE_ATTN", "TRITON_MLA", "TRITON_MLA_VLLM_V1", "FLASHMLA", "FLASHMLA_VLLM_V1",
          "CUTLASS_MLA", "FLASHINFER_MLA", "FLASH_ATTN_MLA", "FLASHMLA_SPARSE", "FLASHINFER_MLA_SPARSE",
          "FLASH_ATTN_VLLM_V1", "FLASHINFER_VLLM_V1", "TORCH_SDPA")


class _ModelConfig:
    """What the oracle reads of ModelConfig, for a V1-compatible decoder."""

    is_v1_compatible, is_multimodal_model, runner_type, architectures = True, False, "generate", ["LlamaForCausalLM"]
    task, has_inner_state, quantization = "generate", False, None

    def __init__(self, use_mla: bool, dtype):
        self.use_mla, self.dtype = use_mla, dtype

    def get_sliding_window(self):
        return None

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return None


def run(ctx) -> dict | None:
    import torch

    import vllm.engine.arg_utils as arg_utils
    import vllm.platforms

    if not hasattr(arg_utils.EngineArgs, "_is_v1_supported_oracle"):
        return _env_default(ctx)
    kv_values = kv_cache_values()
    platform_cls = type(vllm.platforms._current_platform)
    why: list[str] = []
    originals = {n: getattr(arg_utils, n) for n in ("_raise_or_fallback", "_warn_or_fallback") if hasattr(arg_utils, n)}

    def raise_or_fallback(feature_name, recommend_to_remove=False):
        why.append(f"{feature_name} is not supported by the V1 Engine. Falling back to V0.")

    def warn_or_fallback(feature_name):
        why.append(f"{feature_name} is experimental on VLLM_USE_V1=1. Falling back to V0 Engine.")
        return True

    arg_utils._raise_or_fallback, arg_utils._warn_or_fallback = raise_or_fallback, warn_or_fallback
    os.environ.pop("VLLM_USE_V1", None)
    cells: dict[str, list[str]] = {}
    try:
        for cap in [tuple(c) for c in ctx.REQ["capabilities"]]:
            platform_cls.capability_now = cap
            for forced in (None, *FORCED):
                set_env("VLLM_ATTENTION_BACKEND", forced)
                clear_caches()
                for use_mla, kv, dtype in itertools.product((False, True), kv_values, DTYPES):
                    why.clear()
                    try:
                        args = arg_utils.EngineArgs(model="stand-in", kv_cache_dtype=kv)
                        v1 = args._is_v1_supported_oracle(_ModelConfig(use_mla, getattr(torch, dtype)))
                        answer = "V1" if v1 else "V0: " + (why[0] if why else "the oracle said no")
                    except Exception as exc:
                        answer = f"error: {type(exc).__name__}: {exc}"[:300]
                    cells.setdefault(answer, []).append(f"{cap[0]}.{cap[1]}|{forced or '-'}|{int(use_mla)}|{kv}|{dtype}")
    finally:
        for name, fn in originals.items():
            setattr(arg_utils, name, fn)
        set_env("VLLM_ATTENTION_BACKEND", None)
    return {"answers": cells, "where": ctx.where(arg_utils.EngineArgs._is_v1_supported_oracle), "key": KEY,
            "assumes": "default serve flags, VLLM_USE_V1 unset, a V1-compatible decoder without a sliding window"}


def _env_default(ctx) -> dict | None:
    """A release with V0 and no oracle: the engine `VLLM_USE_V1`'s default picks, for every configuration (None
    when the release has no V0 engine, or no such variable)."""
    import vllm.envs as envs

    if not os.path.exists(os.path.join(ctx.SRC, "vllm", "worker", "worker.py")):
        return None  # no V0 worker: one engine only
    set_env("VLLM_USE_V1", None)
    try:
        v1 = bool(envs.VLLM_USE_V1)
    except AttributeError:
        return None
    file = envs.__file__
    line = next((i for i, text in enumerate(open(file), 1) if text.strip().startswith('"VLLM_USE_V1"')), None)
    where = f"{ctx.rel_path(file)}:{line}"
    answer = "V1" if v1 else "V0: VLLM_USE_V1 is unset and defaults to 0 (V1 is opt-in)"
    return {"answers": {answer: ["*"]}, "where": where, "key": KEY,
            "assumes": "VLLM_USE_V1 unset (its default)"}


