"""The context length as vLLM derives it (`_get_and_verify_max_len`, vllm/config/model.py), per release variant:
the smallest of its length keys in config.json, model_max_length over it, rope scaling's factor where that release
applies it, and `--max-model-len` checked against the result with vLLM's own error unless
VLLM_ALLOW_LONG_MAX_MODEL_LEN is set. Sources and variants: data/kv_memory.yaml context_length.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kvdoctor.base.versions import release_numbers
from kvdoctor.base.yaml_safe import load_yaml_cached
from kvdoctor.data import read_data


@lru_cache(maxsize=1)
def context_table() -> dict[str, Any]:
    return load_yaml_cached(read_data("kv_memory.yaml"), "kv_memory.yaml")["context_length"]


@dataclass(frozen=True)
class ContextLength:
    derived: float
    """The derived maximum (may be a float: vLLM multiplies by the rope factor)."""
    key: str | None
    """The config key it came from (vLLM's max_len_key), None when none was found."""
    max_model_len: int | None
    """The length vLLM runs with: --max-model-len, or the default; None when vLLM refuses."""
    error: str | None
    """vLLM's ValueError when --max-model-len exceeds the derived maximum and the env var does not allow it."""
    allowed_by_env: bool = False


def variants_for(version: str | None) -> tuple[str, ...]:
    """The context-length variants a release may have: the one read in it or its read neighbours when they agree,
    both otherwise (a release kvdoctor did not read between two that differ)."""
    table = context_table()["variants"]
    if version is None:
        return tuple(table)
    number = release_numbers(version)
    owners = {name: [release_numbers(v) for v in entry["read_in"]] for name, entry in table.items()}
    below = max(((r, n) for n, rs in owners.items() for r in rs if r <= number), default=None)
    above = min(((r, n) for n, rs in owners.items() for r in rs if r >= number), default=None)
    if below and below[0] == number:
        return (below[1],)
    if below and above:
        return tuple(dict.fromkeys((below[1], above[1])))
    return tuple(table)


def overridden_config(keys: dict[str, float], rope: list[dict[str, Any]], overrides: dict[str, Any],
                      text_config_key: str | None) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """The length keys and rope parameter sets after vLLM applies --hf-overrides (with --rope-scaling merged in where
    the release has it) to the HF config, before _get_and_verify_max_len (data/kv_memory.yaml context_length
    overrides): the overrides land on the top-level config, so they reach the text config when it is the top level,
    or through the nested text config's own key ({"text_config": {...}})."""
    from kvdoctor.facts.probes.model_memory import rope_parameter_sets

    if text_config_key in (None, "none"):
        text = overrides
    else:
        nested = overrides.get(text_config_key)
        text = nested if isinstance(nested, dict) else {}
    if not text:
        return keys, rope
    table = context_table()
    keys = dict(keys)
    for name in table["possible_keys"]:
        value = text.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            keys[name] = value
    if isinstance(text.get("rope_parameters") or text.get("rope_scaling"), dict):
        rope = rope_parameter_sets(text)  # the override replaces the config's parameters (config.update / setattr)
    return keys, rope


def serve_overrides(hf_overrides: dict[str, Any] | None, rope_scaling: dict[str, Any] | None,
                    release_options) -> dict[str, Any]:  # fmt: skip
    """The HF-config overrides a release applies: --hf-overrides, and --rope-scaling as {"rope_scaling": ...} on top
    of it where the release still has the flag (ModelConfig.__post_init__ in 0.10.x; removed by 0.11.2)."""
    out = dict(hf_overrides or {})
    if rope_scaling and context_table()["overrides"]["rope_scaling_flag"] in release_options:
        out["rope_scaling"] = rope_scaling
    return out


def derive_context_length(keys: dict[str, float], rope: list[dict[str, Any]], model_type: str | None,
                          requested: int | None, allow_long: bool, variant: str) -> ContextLength:  # fmt: skip
    """_get_and_verify_max_len for a decoder text model (no tokenizer_config, no encoder, no speculative target)."""
    table = context_table()
    rules = table["variants"][variant]
    derived, key = float("inf"), None
    for name in table["possible_keys"]:
        if name in keys and keys[name] < derived:
            derived, key = keys[name], name
    if table["override_key"] in keys and keys[table["override_key"]]:
        derived, key = keys[table["override_key"]], table["override_key"]
    if derived != float("inf") and rules["derived_is_float"]:
        derived = float(derived)  # ModelArchitectureConfig's tuple[float, ...] field: pydantic makes the int a float
    if derived == float("inf"):
        if requested is not None:
            return ContextLength(derived, None, requested, None)
        derived = table["default_when_no_key"]
    if rope and table["scaling_skipped_for_model_type_containing"] not in (model_type or ""):
        factor = 1.0
        for entry in rope:
            if entry["rope_type"] not in rules["factor_not_applied_for"]:
                factor = entry.get("factor", factor)
                if entry["rope_type"] == "yarn" and rules["yarn_restarts_from_original"]:
                    derived = entry.get("original_max_position_embeddings", derived)
        derived *= 1.0 if factor is None else factor
    if requested is None or requested == -1:
        if any(e["rope_type"] == "longrope" for e in rope):
            original = rope[0].get("config_original_max_position_embeddings")
            return ContextLength(derived, key, int(original if original is not None else derived), None)
        return ContextLength(derived, key, int(derived), None)
    if requested > derived:
        model_max_length = keys.get("model_max_length")
        if model_max_length is None or requested > model_max_length:
            if allow_long:
                return ContextLength(derived, key, requested, None, allowed_by_env=True)
            error = " ".join(table["too_long_error"].split()).format(
                max_model_len=requested, max_len_key=key, derived=_python_number(derived),
                model_max_length=model_max_length,
            )
            return ContextLength(derived, key, None, error)
    return ContextLength(derived, key, requested, None)


def _python_number(value: float) -> str:
    """How vLLM's f-string prints the derived length: an int stays an int, a float (a scaled length, or any length
    from 0.23.0 on: derived_is_float) shows its '.0' ('131072.0')."""
    return str(value)


def env_allows_long(env: dict[str, str]) -> bool:
    """VLLM_ALLOW_LONG_MAX_MODEL_LEN as vllm/envs.py reads it: '1' or 'true' (case-insensitive)."""
    return env.get(context_table()["allow_long_env"], "0").strip().lower() in ("1", "true")
