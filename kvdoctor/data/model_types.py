"""Model types vLLM's model code treats specially, from the one list kvdoctor/data/model_types.yaml."""

from __future__ import annotations

from functools import lru_cache

from kvdoctor.base.yaml_safe import load_yaml_cached
from kvdoctor.data import read_data


@lru_cache(maxsize=None)
def model_types(kind: str) -> frozenset[str]:
    """The config.json model_type values of one kind ('hybrid', 'attention_sinks') in model_types.yaml."""
    table = load_yaml_cached(read_data("model_types.yaml"), "model_types.yaml")
    return frozenset(table[kind]["model_types"])
