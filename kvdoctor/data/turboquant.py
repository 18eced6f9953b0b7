"""vLLM's TurboQuant presets, from the one catalogue kvdoctor/data/turboquant.yaml."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from kvdoctor.data import read_data
from kvdoctor.base.yaml_safe import load_yaml_cached


@dataclass(frozen=True)
class Preset:
    key_bits: int
    """8: fp8 keys; 3-4: MSE-quantized keys."""
    value_bits: int
    norm_correction: bool


@lru_cache(maxsize=1)
def _catalogue() -> dict:
    return load_yaml_cached(read_data("turboquant.yaml"), "turboquant.yaml")


def presets() -> dict[str, Preset]:
    """--kv-cache-dtype value -> its preset, in vLLM's order."""
    return {name: Preset(**entry) for name, entry in _catalogue()["presets"].items()}


def native_layers() -> int:
    """Attention layers of a dense model that keep the model dtype (the first and last two)."""
    return int(_catalogue()["native_layers"])
