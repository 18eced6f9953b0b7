"""How many bytes the model's weights take: safetensors index, else safetensors headers, else config.json.

A probe: it reads files (headers only, never tensors) and decides nothing.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_HEADER = 100 * 1024 * 1024
BYTES_PER_PARAM = {"bfloat16": 2, "float16": 2, "float32": 4}


@dataclass(frozen=True)
class WeightsSize:
    bytes: int
    source: str
    """'safetensors index', 'safetensors headers (N files)' or 'estimated from config.json ...'."""


def weights_size(config_path: Path, model_dir: Path | None, dtype: str | None) -> WeightsSize | None:
    """The checkpoint's size in bytes, or None when neither files nor config.json tell."""
    if model_dir is not None and model_dir.is_dir():
        found = _from_index(model_dir) or _from_headers(model_dir)
        if found:
            return found
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return _from_config(config, dtype) if isinstance(config, dict) else None


def _from_index(model_dir: Path) -> WeightsSize | None:
    index = model_dir / "model.safetensors.index.json"
    try:
        total = json.loads(index.read_text(encoding="utf-8"))["metadata"]["total_size"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return WeightsSize(int(total), "safetensors index") if isinstance(total, (int, float)) and total > 0 else None


def _from_headers(model_dir: Path) -> WeightsSize | None:
    files = sorted(model_dir.glob("*.safetensors"))
    total = 0
    for file in files:
        try:
            with file.open("rb") as handle:
                (size,) = struct.unpack("<Q", handle.read(8))
                if size > MAX_HEADER:
                    return None
                header = json.loads(handle.read(size))
        except (OSError, struct.error, ValueError):
            return None
        for name, entry in header.items():
            if name != "__metadata__" and isinstance(entry, dict):
                start, end = entry.get("data_offsets", (0, 0))
                total += int(end) - int(start)
    return WeightsSize(total, f"safetensors headers ({len(files)} files)") if total else None


def _from_config(raw: dict[str, Any], dtype: str | None) -> WeightsSize | None:
    """Dense decoder estimate: embeddings, attention, gated MLP (or MoE experts) and norms per layer."""
    config = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw

    def number(*names: str) -> int:
        for name in names:
            value = config.get(name, raw.get(name))
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        return 0

    hidden, layers, vocab = number("hidden_size", "n_embd", "d_model"), number("num_hidden_layers", "n_layer"), number("vocab_size")
    heads = number("num_attention_heads", "n_head")
    if not (hidden and layers and vocab and heads):
        return None
    head_dim = number("head_dim") or hidden // heads
    kv_heads = number("num_key_value_heads") or heads
    inter = number("intermediate_size", "ffn_hidden_size") or 4 * hidden
    experts = number("num_experts", "n_routed_experts", "num_local_experts")
    expert_inter = number("moe_intermediate_size") or inter
    shared = number("n_shared_experts", "num_shared_experts")
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    if experts:  # every expert's gated MLP, shared experts, and the router
        mlp = 3 * hidden * expert_inter * (experts + shared) + hidden * experts
    else:
        mlp = 3 * hidden * inter
    tied = raw.get("tie_word_embeddings", config.get("tie_word_embeddings", False))
    params = vocab * hidden * (1 if tied else 2) + layers * (attention + mlp + 2 * hidden) + hidden
    per = BYTES_PER_PARAM.get(dtype or "", 2)
    quant = raw.get("quantization_config")
    note = f", {quant.get('quant_method')} checkpoint: sized as {dtype or 'bf16'}, likely too large" if isinstance(quant, dict) else ""
    return WeightsSize(params * per, f"estimated from config.json ({params / 1e9:.2f}B parameters{note})")
