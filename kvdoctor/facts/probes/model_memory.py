"""What the memory model needs from a checkpoint: config.json's length keys, rope scaling and layer kinds, and the
weights' size in bytes (safetensors index `total_size` or headers: local directory, HF cache, or the hub's metadata,
read once and cached; never the weights themselves).

Reports what it read and where from; never decides anything. Names of the facts: data/fact_names.yaml (memory_probe).
"""

from __future__ import annotations

import json
import struct
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from kvdoctor.base.yaml_safe import load_yaml_cached
from kvdoctor.data import read_data
from kvdoctor.data.model_types import model_types
from kvdoctor.model.facts import ModelFacts

MAX_INDEX_BYTES = 20 * 1024 * 1024
MAX_HEADER_BYTES = 100 * 1024 * 1024
RETRY_HUB_AFTER_S = 3600  # an unreachable hub is not asked again for an hour (each try may wait for a timeout)
_TEXT_CONFIGS = ("text_config", "language_config", "llm_config", "thinker_config")
_SAFETENSORS_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
                      "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "U16": 2, "U32": 4, "U64": 8,
                      "F4": 0.5, "FP4": 0.5}  # fmt: skip
UNKNOWN = {"model.max_len_keys": None, "model.rope_scaling": None, "model.layer_kinds": None,
           "model.state_layer": None, "model.attention_chunk_size": None, "model.full_attention_geometry": None,
           "model.sentence_transformers_pooling": None,
           "model.vocab_size": None, "model.intermediate_size": None, "model.tie_word_embeddings": None,
           "model.moe_layout": None, "model.mla_layout": None, "model.text_config_key": None, "model.cross_attention": None, "checkpoint.weights_bytes": None,
           "checkpoint.weights_source": None}  # fmt: skip


def probe_model_memory(model: ModelFacts | None, config_path: Path | None, model_dir: Path | None, *,
                       offline: bool, cache_dir: Path | None, revision: str | None = None) -> dict[str, Any]:
    """The memory facts of this checkpoint; all unknown without a config.json."""
    if model is None or config_path is None:
        return dict(UNKNOWN)
    raw = _read_json(config_path) or {}
    nested = next((k for k in _TEXT_CONFIGS if isinstance(raw.get(k), dict)), None)
    text = raw[nested] if nested else raw
    weights, source = checkpoint_bytes(model, model_dir, offline=offline, cache_dir=cache_dir, revision=revision)
    return {
        "model.max_len_keys": _length_keys(text, text.get("model_type") or raw.get("model_type")),
        "model.rope_scaling": rope_parameter_sets(text),
        "model.text_config_key": nested or "none",
        "model.layer_kinds": layer_kinds(text, model),
        "model.state_layer": state_layer(text, model),
        "model.attention_chunk_size": _chunk_size(text, model),
        "model.full_attention_geometry": full_attention_geometry(text, model),
        "model.sentence_transformers_pooling": sentence_transformers_pooling(model_dir or config_path.parent),
        "model.vocab_size": _int(text.get("vocab_size", raw.get("vocab_size"))),
        "model.intermediate_size": _int(text.get("moe_intermediate_size") or text.get("intermediate_size")),
        "model.tie_word_embeddings": bool(raw.get("tie_word_embeddings", text.get(
            "tie_word_embeddings", (raw.get("model_type") or text.get("model_type")) in model_types("tied_embeddings")))),
        "model.moe_layout": moe_layout(text),
        "model.mla_layout": mla_layout(text),
        "model.cross_attention": cross_attention(text, model),
        "checkpoint.weights_bytes": weights,
        "checkpoint.weights_source": source,
    }


_EXPERT_KEYS = ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts")


def moe_layout(text: dict[str, Any]) -> dict[str, int] | None:
    """The MLP shapes of a mixture-of-experts config (None for a dense one): routed experts and their width, the
    shared experts' total width, the dense layers (DeepSeek's first_k_dense_replace, Qwen-MoE's mlp_only_layers)
    and their width. Spellings as the hub's configs write them (DeepSeek, Qwen2/3-MoE, Mixtral, gpt-oss)."""
    experts = next((_int(text.get(k)) for k in _EXPERT_KEYS if _int(text.get(k))), None)
    if not experts or experts < 2:
        return None
    expert_width = _int(text.get("moe_intermediate_size")) or _int(text.get("intermediate_size")) or 0
    shared = _int(text.get("shared_expert_intermediate_size")) or (
        (_int(text.get("n_shared_experts")) or 0) * expert_width)
    only = text.get("mlp_only_layers")
    dense_layers = _int(text.get("first_k_dense_replace")) or (len(only) if isinstance(only, list) else 0)
    # every `period`-th layer is MoE, the others dense: Jamba's expert_layer_period, Qwen-MoE's decoder_sparse_step,
    # DeepSeek's moe_layer_freq
    period = next((_int(text.get(k)) for k in ("expert_layer_period", "decoder_sparse_step", "moe_layer_freq")
                   if _int(text.get(k))), 1)
    top_k = next((_int(text.get(k)) for k in ("num_experts_per_tok", "moe_topk", "num_experts_per_token",
                                               "experts_per_token") if _int(text.get(k))), None)
    return {"experts": experts, "expert_width": expert_width, "shared_width": shared, "dense_layers": dense_layers,
            "dense_width": _int(text.get("intermediate_size")) or expert_width, "period": period, "top_k": top_k}


_MLA_KEYS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


def mla_layout(text: dict[str, Any]) -> dict[str, int] | None:
    """A multi-head latent attention config's projection widths (DeepSeek-V2/V3 spelling; None without kv_lora_rank):
    q_lora_rank 0 when the queries are projected directly (DeepSeek-V2-Lite's null)."""
    if not _int(text.get("kv_lora_rank")):
        return None
    return {key: _int(text.get(key)) or 0 for key in _MLA_KEYS}


def _context_keys() -> dict[str, Any]:
    return load_yaml_cached(read_data("kv_memory.yaml"), "kv_memory.yaml")["context_length"]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _length_keys(text: dict[str, Any], model_type: str | None = None) -> dict[str, int]:
    """vLLM's possible max-length keys (data/kv_memory.yaml context_length) as its getattr finds them on the loaded
    text config: config.json's key, or the one the config class's attribute_map reads it from (GPT-2's n_positions),
    or the class's default when config.json has neither (Falcon's 2048): data/config_class_lengths.yaml."""
    aliases, defaults = _config_class_lengths(model_type)
    out = {}
    for key in _context_keys()["possible_keys"]:
        spelt = aliases.get(key, key)
        value = text[spelt] if spelt in text else defaults.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = value
    return out


@lru_cache(maxsize=None)
def _config_class_lengths(model_type: str | None) -> tuple[dict[str, str], dict[str, float]]:
    """(attribute_map aliases, class defaults) of the length keys for this model type's config class."""
    table = load_yaml_cached(read_data("config_class_lengths.yaml"), "config_class_lengths.yaml")
    defaults = {key: value for key, by_value in table["defaults"].items() for value, types in by_value.items()
                if model_type in types}  # fmt: skip
    return dict(table["aliases"].get(model_type) or {}), defaults


def rope_parameter_sets(text: dict[str, Any]) -> list[dict[str, Any]]:
    """Each rope parameter set of a (text) config as vLLM reads it (transformers' `type` spelt `rope_type`; nested
    per layer type). Also reads a --hf-overrides / --rope-scaling value put in a config's place."""
    found = text.get("rope_parameters") or text.get("rope_scaling")
    if not isinstance(found, dict):
        # no scaling: nothing multiplies the length (that vLLM prints it as a float, 'max_position_embeddings=4096.0',
        # is the release's ModelArchitectureConfig, not RoPE: kv_memory.yaml context_length derived_is_float)
        return []
    sets = list(found.values()) if found and all(isinstance(v, dict) for v in found.values()) else [found]
    out = []
    for entry in sets:
        rope_type = entry.get("rope_type", entry.get("type", "default"))
        item = {"rope_type": rope_type, "factor": entry.get("factor")}
        if "original_max_position_embeddings" in entry:
            item["original_max_position_embeddings"] = entry["original_max_position_embeddings"]
        out.append(item)
    if "original_max_position_embeddings" in text and out:
        out[0].setdefault("config_original_max_position_embeddings", text["original_max_position_embeddings"])
    return out


def _kv_cache_table() -> dict[str, Any]:
    return load_yaml_cached(read_data("kv_memory.yaml"), "kv_memory.yaml")["kv_cache"]


def _state_model(model: ModelFacts) -> dict[str, Any] | None:
    models = _kv_cache_table()["state_layers"]["models"]
    return next((models[a] for a in model.architectures if a in models), None)


def _chunked_model(model: ModelFacts) -> dict[str, Any] | None:
    models = _kv_cache_table()["chunked_attention"]["models"]
    return next((models[a] for a in model.architectures if a in models), None)


def state_layer(text: dict[str, Any], model: ModelFacts) -> dict[str, Any] | None:
    """The Mamba / linear-attention state's calculator and its inputs read from config.json as the architecture's
    vLLM class reads them (data/kv_memory.yaml state_layers); None when kvdoctor does not know the architecture or a
    key is missing."""
    entry = _state_model(model)
    if entry is None:
        return None
    params: dict[str, Any] = {"calculator": entry["calculator"]}
    if "ssm_dtype" in entry:  # the architecture's own default for mamba_ssm_cache_dtype 'auto'
        declared = text.get(entry["ssm_dtype"]["key"])
        params["ssm_dtype"] = declared if isinstance(declared, str) else entry["ssm_dtype"]["default"]
    for name, keys in entry["params"].items():
        value = 1
        for key in keys if isinstance(keys, list) else [keys]:
            factor = _int(text.get(key))
            if factor is None:
                return None
            value *= factor
        params[name] = value
    return params


def full_attention_geometry(text: dict[str, Any], model: ModelFacts) -> dict[str, int] | None:
    """The KV heads and head size of the full-attention layers where the architecture's vLLM class gives them their
    own (data/kv_memory.yaml full_attention_geometry: Gemma-4's global heads); None for the others."""
    models = _kv_cache_table()["full_attention_geometry"]["models"]
    entry = next((models[a] for a in model.architectures if a in models), None)
    if entry is None:
        return None
    head_dim = _int(text.get(entry["head_dim_key"])) or model.head_dim
    heads = _int(text.get(entry["heads_key"])) if text.get(entry["heads_when"]) else None
    heads = heads or model.num_kv_heads
    if (head_dim, heads) == (model.head_dim, model.num_kv_heads) or not (head_dim and heads):
        return None
    return {"heads": heads, "head_dim": head_dim}


def sentence_transformers_pooling(folder: Path) -> bool:
    """Does the model directory hold a Sentence Transformers modules.json with a Pooling module (vLLM's
    get_pooling_config, which makes `--runner auto` the pooling runner; data/kv_memory.yaml budget.pooling_runner)?"""
    entry = load_yaml_cached(read_data("kv_memory.yaml"), "kv_memory.yaml")["budget"]["pooling_runner"]
    modules = _read_json(folder / entry["sentence_transformers_file"])
    return isinstance(modules, list) and any(
        isinstance(m, dict) and m.get("type") == entry["sentence_transformers_pooling_type"] for m in modules)


def cross_attention(text: dict[str, Any], model: ModelFacts) -> dict[str, int] | None:
    """An encoder-decoder's decoder geometry as vLLM's model class reads it (data/kv_memory.yaml
    kv_cache.cross_attention): decoder layers, attention heads (= KV heads) and head size; None for other models or
    when config.json lacks a key."""
    if not text.get("is_encoder_decoder"):
        return None
    models = _kv_cache_table()["cross_attention"]["models"]
    entry = next((models[a] for a in model.architectures if a in models), None)
    if entry is None:
        return None
    layers, heads, hidden = (_int(text.get(entry[k])) for k in ("layers_key", "heads_key", "hidden_key"))
    if not (layers and heads and hidden):
        return None
    return {"layers": layers, "heads": heads, "head_size": hidden // heads}


def _chunk_size(text: dict[str, Any], model: ModelFacts) -> int | None:
    entry = _chunked_model(model)
    return _int(text.get(entry["chunk_key"])) if entry else None


def layer_kinds(text: dict[str, Any], model: ModelFacts) -> list[str] | None:
    """Per decoder layer: 'full', 'sliding', 'chunked' (chunked local attention), 'state' (a Mamba / linear-attention
    state of an architecture kvdoctor sizes), 'none' (no cache: an MLP-only layer) or 'other' (one it does not), as
    the model's vLLM code builds them: Llama-4 chunks the layers with rope; Jamba's attention period, NemotronH's
    pattern, config.json's layer_types when given; Gemma-2 alternates from a sliding layer 0; Qwen2-style
    use_sliding_window slides from max_window_layers; any other declared window slides every layer."""
    declared = text.get("layer_types") or text.get("layers_block_type")
    pattern = (_state_model(model) or {}).get("pattern")
    # transformers 5 leaves num_hidden_layers out of some hybrid configs (NemotronH): the per-layer list says it
    layers = model.num_hidden_layers or (len(declared) if isinstance(declared, list) and _state_model(model) else None)
    cross = cross_attention(text, model)
    if cross:  # an encoder-decoder's KV cache is its decoder's (Whisper's num_hidden_layers is the encoder's or absent)
        layers = cross["layers"]
    if not layers and pattern and isinstance(text.get(pattern["key"]), str):
        layers = len(text[pattern["key"]])
    if not layers:
        return None
    if text.get("is_encoder_decoder"):
        return ["cross"] * layers  # decoder layers with self- and cross-attention (CrossAttentionSpec)
    chunked = _chunked_model(model)
    if chunked and _int(text.get(chunked["chunk_key"])):
        rope = text.get(chunked["rope_layers_key"])
        if not (isinstance(rope, list) and len(rope) == layers):  # transformers' Llama4TextConfig fills it in:
            interval = _int(text.get("no_rope_layer_interval")) or 4  # every interval-th layer has no rope
            rope = [int((i + 1) % interval != 0) for i in range(layers)]
        return ["chunked" if r else "full" for r in rope]
    period = (_state_model(model) or {}).get("period")
    if period and _int(text.get(period["period_key"])) and isinstance(text.get(period["offset_key"]), int):
        every, offset = text[period["period_key"]], text[period["offset_key"]]
        return [period["match"] if i % every == offset else period["other"] for i in range(layers)]
    if pattern and not isinstance(declared, list) and isinstance(text.get(pattern["key"]), str):
        declared = [pattern["kinds"].get(c, "other") for c in text[pattern["key"]]]
        return declared if len(declared) == layers else None
    if isinstance(declared, list) and len(declared) == layers:
        state_kinds = (_state_model(model) or {}).get("layer_types", {})
        return [state_kinds[k] if k in state_kinds
                else "full" if k in ("full_attention", "attention") else "sliding" if "sliding" in str(k) else "other"
                for k in declared]  # fmt: skip
    if model.is_hybrid:
        return None  # hybrid layouts without a per-layer list: not modelled
    window = model.sliding_window
    if not window:
        return ["full"] * layers
    if model.model_type == "gemma2":
        return ["sliding" if i % 2 == 0 else "full" for i in range(layers)]
    pattern = text.get("sliding_window_pattern")
    if isinstance(pattern, int) and pattern > 1:
        return ["full" if (i + 1) % pattern == 0 else "sliding" for i in range(layers)]
    if text.get("use_sliding_window") and isinstance(text.get("max_window_layers"), int):
        return ["sliding" if i >= text["max_window_layers"] else "full" for i in range(layers)]
    return ["sliding"] * layers


def checkpoint_bytes(model: ModelFacts, model_dir: Path | None, *, offline: bool, cache_dir: Path | None,
                     revision: str | None = None) -> tuple[int | None, str | None]:
    """(bytes of the weights, where the number came from), or (None, None) when no source answers."""
    if model_dir is not None and model_dir.is_dir():
        found = _local_bytes(model_dir)
        if found is not None:
            return found
    repo = model.model_id if model.source.startswith(("hf-cache:", "hub:")) else None
    if repo is None:
        return None, None
    cached = _cache_file(cache_dir, repo, revision)
    if cached is not None and cached.is_file():
        data = _read_json(cached)
        fresh_failure = isinstance(data, dict) and time.time() - data.get("failed_at", 0) < RETRY_HUB_AFTER_S
        if isinstance(data, dict) and "bytes" in data and ("failed_at" not in data or fresh_failure):
            # an answer or the hub's "no safetensors here", read once; an unreachable hub is asked again later
            return (data["bytes"], f"{data.get('source')} (cached in {cached})") if data["bytes"] else (None, None)
    if offline:
        return None, None
    found, settled = _hub_bytes(repo, revision)
    if cached is not None:
        entry = {"bytes": found[0], "source": found[1]} | ({} if settled else {"failed_at": time.time()})
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            cached.write_text(json.dumps(entry))
        except OSError:
            pass
    return found


def _local_bytes(model_dir: Path) -> tuple[int, str] | None:
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        total = ((_read_json(index) or {}).get("metadata") or {}).get("total_size")
        if isinstance(total, int) and total > 0:
            return total, f"{index.name} total_size"
    files = sorted(model_dir.glob("*.safetensors"))
    sizes = [_header_bytes(f) for f in files]
    if files and all(s is not None for s in sizes):
        return sum(sizes), f"safetensors headers of {len(files)} file(s) in {model_dir}"
    return None


def _header_bytes(file: Path) -> int | None:
    """Bytes of tensor data a safetensors file holds, from its header (the largest end offset)."""
    try:
        with file.open("rb") as handle:
            (size,) = struct.unpack("<Q", handle.read(8))
            if size > MAX_HEADER_BYTES:
                return None
            header = json.loads(handle.read(size))
    except (OSError, struct.error, ValueError):
        return None
    ends = [e["data_offsets"][1] for k, e in header.items() if k != "__metadata__" and isinstance(e, dict)
            and isinstance(e.get("data_offsets"), list) and len(e["data_offsets"]) == 2]  # fmt: skip
    return max(ends) if ends else 0


def _hub_bytes(repo: str, revision: str | None) -> tuple[tuple[int | None, str | None], bool]:
    """The hub's safetensors metadata (HEAD requests and HTTP range reads of each file's header; no weights), and
    whether the answer is settled (worth caching: found, or the repo has no safetensors)."""
    try:
        import huggingface_hub

        meta = huggingface_hub.get_safetensors_metadata(repo, revision=revision)
    except Exception as exc:  # no network, gated, no safetensors: the weights are estimated instead
        settled = type(exc).__name__ in ("NotASafetensorsRepoError", "SafetensorsParsingError")
        return (None, None), settled
    total = 0
    for file_meta in meta.files_metadata.values():
        for tensor in file_meta.tensors.values():
            count = 1
            for dim in tensor.shape:
                count *= dim
            total += int(count * _SAFETENSORS_BYTES.get(tensor.dtype, 2))
    return ((total, f"safetensors headers of hub:{repo}") if total else (None, None)), True


def _cache_file(cache_dir: Path | None, repo: str, revision: str | None) -> Path | None:
    if cache_dir is None:
        return None
    return cache_dir / "checkpoint-sizes" / (repo.replace("/", "--") + f"@{revision or 'main'}.json")


def _read_json(path: Path) -> Any:
    try:
        if path.stat().st_size > MAX_INDEX_BYTES:
            return None
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
