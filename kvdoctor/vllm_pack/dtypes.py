"""Model dtype resolution (`--dtype`) as one vLLM release does it on one GPU, from the pack.

The builder ran the release's own `_get_and_verify_dtype` and the platform's `check_if_supports_dtype` for
every capability, config dtype, `--dtype` value and model type that may not use float16; this module looks the
answer up and says in words what happened (fp32 downcast, bf16 -> fp16 fallback, the bf16 < SM80 error).
"""

from __future__ import annotations

from kvdoctor.vllm_pack.release import ReleaseFacts
from kvdoctor.vllm_pack.store import load_runtime

_ALIASES = {"half": "float16", "float": "float32", "fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}
_GENERIC_MODEL_TYPE = "llama"


def _norm(dtype: str | None) -> str | None:
    if dtype is None:
        return None
    text = str(dtype).replace("torch.", "").lower()
    return _ALIASES.get(text, text)


def resolve_dtype(release: ReleaseFacts, config_dtype: str | None, requested: str | None,
                  capability: tuple[int, int] | None, model_type: str | None = None
                  ) -> tuple[str | None, str | None, str | None]:
    """(dtype, note, error): the dtype vLLM runs the model in, what happened on the way, and vLLM's own error
    when it refuses (then dtype is what it resolved before refusing, or None). (None, why, None) when the pack
    cannot say (unknown capability or config dtype)."""
    runtime = load_runtime(release.version)
    if not runtime or "dtype" not in runtime:
        return None, f"the pack holds no dtype facts for vLLM {release.version}", None
    facts = runtime["dtype"]
    requested = (requested or "auto").lower()
    if requested not in ("auto", "half", "float16", "bfloat16", "float", "float32"):
        return None, None, f"ValueError: Unknown dtype: {requested!r}"
    if capability is None:
        return None, "the GPU's compute capability decides (pass --gpu)", None
    config = _norm(config_dtype)
    if config is None:
        if requested == "auto":
            return None, "config.json declares no dtype: vLLM then reads the safetensors weights' dtype", None
        config = "float32"  # the config dtype only shapes the log message when --dtype is explicit
    if config not in ("float16", "bfloat16", "float32"):
        return None, f"config dtype {config_dtype!r}: not one the pack asked vLLM about", None
    special = facts.get("float16_not_supported", {})
    kind = model_type if model_type in special else _GENERIC_MODEL_TYPE
    cap = f"{capability[0]}.{capability[1]}"
    if cap not in facts["table"]:
        return None, f"capability {cap}: not among those the pack asked vLLM about", None
    cell = facts["tables"][facts["table"][cap]].get(f"{config}|{requested}|{kind}|0")
    if cell is None:
        return None, f"--dtype {requested} with a {config} config: not asked of vLLM {release.version}", None
    dtype, error = facts["answers"][cell]
    return dtype, _note(config, requested, dtype, error), error


def _note(config: str, requested: str, dtype: str | None, error: str | None) -> str | None:
    if dtype is None or dtype == config:
        return None
    if requested != "auto":
        return f"--dtype {requested}: {config} config cast to {dtype}"
    if config == "float32":
        return f"float32 config downcast to {dtype} (vLLM's --dtype auto)"
    return f"{config} is not supported on this GPU: vLLM falls back to {dtype}"
