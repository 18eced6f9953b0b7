"""Which overrides claim a checkpoint only for some model types, and which architectures rename the checkpoint's
quant_method, per release: the one list kvdoctor/data/quant_claims.yaml."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from kvdoctor.base.versions import release_numbers
from kvdoctor.base.yaml_safe import load_yaml_cached
from kvdoctor.data import read_data


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    return load_yaml_cached(read_data("quant_claims.yaml"), "quant_claims.yaml")


def _since(version: str, since: str) -> bool:
    return release_numbers(version) >= release_numbers(since)


def override_model_types(version: str) -> dict[str, frozenset[str]]:
    """method -> the hf_config.model_type values its override claims for in this release (read releases only)."""
    out = {}
    for method, entry in _table()["override_model_types"].items():
        types = None
        for step in [entry, *entry.get("changed", ())]:
            if _since(version, step["since"]):
                types = frozenset(step["model_types"])
        if types is not None:
            out[method] = types
    return out


def unconditional_overrides(version: str) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """(method, checkpoint method it claims, --quantization values it accepts) for the overrides that claim every such
    checkpoint on CUDA in this release (read releases on)."""
    return tuple((method, entry["claims"], tuple(entry["asked"]))
                 for method, entry in _table()["unconditional_overrides"].items() if _since(version, entry["since"]))


def rewritten_method(version: str, architectures: tuple[str, ...], method: str | None,
                     quant_config: dict | None) -> str | None:  # fmt: skip
    """The quant_method after the architecture's verify_and_update_model_config, as this release runs it."""
    for rule in _table()["architecture_rewrites"]:
        if not _since(version, rule["since"]) or not set(architectures) & set(rule["architectures"]):
            continue
        if method == rule["quant_method"] and (quant_config or {}).get("format") == rule["format"]:
            return rule["becomes"]
    return method


def modelopt_algo_refusal(version: str, quant_config: dict | None) -> tuple[str, str] | None:
    """(vLLM's message, file:line) when this release's config convertor refuses a producer-modelopt config's nested
    quant_algo; None when it names it, the config is not of that form, or the release was not read."""
    quant = quant_config or {}
    section = quant.get("quantization")
    producer = quant.get("producer")
    modelopt = isinstance(producer, dict) and producer.get("name") == "modelopt" or \
        isinstance(section, dict) and "modelopt_quant_config" in section
    algo = section.get("quant_algo") if isinstance(section, dict) else None
    if not modelopt or algo is None:
        return None
    table = _table()["modelopt_producer_algos"]
    step = None
    for entry in table["releases"]:
        if _since(version, entry["since"]):
            step = entry
    if step is None or str(algo).upper() in step["algos"]:
        return None
    where = "vllm/transformers_utils/" + (step["where"].get(version) or next(iter(step["where"].values())))
    return table["message"].format(algo), where
