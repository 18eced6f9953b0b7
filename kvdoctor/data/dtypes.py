"""Model dtype names, from the one catalogue kvdoctor/data/dtypes.yaml."""

from __future__ import annotations

from kvdoctor.data import read_data
from kvdoctor.base.yaml_safe import load_yaml_cached

_CATALOGUE = load_yaml_cached(read_data("dtypes.yaml"), "dtypes.yaml")

MODEL_DTYPES: tuple[str, ...] = tuple(_CATALOGUE["serve_flag"])
"""vLLM's --dtype values, in its order."""
FLAG_DTYPES: dict[str, str] = {flag: dtype for flag, dtype in _CATALOGUE["serve_flag"].items() if dtype}
"""--dtype value -> the torch dtype it means (auto left out: it depends on the model and GPU)."""
CONFIG_DTYPE_NAMES: dict[str, str] = dict(_CATALOGUE["config"])
"""config.json torch_dtype spelling -> the torch dtype."""
SAFETENSORS_DTYPES: dict[str, str] = dict(_CATALOGUE["safetensors"])
"""safetensors header dtype code -> the torch dtype."""
