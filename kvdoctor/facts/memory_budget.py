"""The memory budget vLLM's GPU worker leaves the KV cache (determine_available_memory in
vllm/v1/worker/gpu_worker.py): GPU memory x --gpu-memory-utilization - weights per rank - a modelled activation
peak, non-torch and CUDA-graph memory, with its error band; --kv-cache-memory-bytes exactly. The serve flags the
memory model reads. Numbers and their sources: data/kv_memory.yaml ("budget")."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kvdoctor.base.errors import UsageError
from kvdoctor.base.yaml_safe import load_yaml_cached
from kvdoctor.data import read_data
from kvdoctor.facts.kv_capacity import kv_table
from kvdoctor.facts.probes.serve_args import human_readable_int
from kvdoctor.facts.profile_peak import ProfilePeak, profile_peak, sampler_band_bytes
from kvdoctor.model.facts import Facts, ServeFacts

GIB = 2**30


@lru_cache(maxsize=1)
def budget_table() -> dict[str, Any]:
    return load_yaml_cached(read_data("kv_memory.yaml"), "kv_memory.yaml")["budget"]


@dataclass(frozen=True)
class ServeMemory:
    """The serve settings that size memory, read from the arguments vLLM parses."""

    kv_cache_memory_bytes: int | None = None
    gpu_memory_utilization: float | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    block_size: int | None = None
    disable_sliding_window: bool = False
    enforce_eager: bool = False
    cpu_offload_gb: float = 0.0
    prefix_caching: bool = True
    """--enable-prefix-caching is on by default; hybrid models then keep Mamba state in 'align' mode."""
    mamba_cache_mode: str | None = None
    mamba_cache_dtype: str = "auto"
    mamba_ssm_cache_dtype: str = "auto"
    kv_cache_dtype_skip_layers: tuple[str, ...] = ()
    """--kv-cache-dtype-skip-layers (nargs '+'): layer indices, or 'sliding_window', kept in the model dtype."""
    kv_offloading_gib: float | None = None
    """--kv-offloading-size: CPU memory for offloaded KV blocks (a KV connector); the GPU budget stays as it is."""
    kv_offloading_backend: str = "native"
    """--kv-offloading-backend (CacheConfig's default 'native': vLLM's OffloadingConnector)."""
    hf_overrides: str | None = None
    """--hf-overrides as canonical JSON (a JSON object; the HF-config overrides vLLM applies before sizing)."""
    rope_scaling: str | None = None
    """--rope-scaling as canonical JSON (0.10.x only; merged into the overrides as {"rope_scaling": ...})."""
    runner: str | None = None
    """--runner as given (auto, generate, pooling, draft); with --convert and --task it decides the pooling runner."""
    convert: str | None = None
    """--convert as given (auto, none, embed, classify, reward, ...)."""
    task: str | None = None
    """--task as given (releases before --runner: generate, embed, classify, score, reward, ...)."""
    unmodelled: tuple[str, ...] = ()
    """Flags that change the KV-cache layout or budget in ways kvdoctor does not size (the fit stays undecided)."""


def serve_memory(serve: ServeFacts) -> ServeMemory:
    """The memory settings of the serve command: the record's parsed values (ServeFacts: flags, short forms, --config
    files, bad values already refused), and from its argv the flags the record does not carry: the switches and
    options some releases lack (--disable-sliding-window and --no-enable-prefix-caching without a --no- form in every
    release, --mamba-cache-mode from 0.15.1, the offloading options from 0.11.2; serve_flags.yaml holds options of
    every release), --kv-cache-dtype-skip-layers' nargs '+', the JSON overrides and their dotted keys."""
    values: dict[str, str] = {}
    switches: set[str] = set()
    tokens = list(serve.argv)
    for i, token in enumerate(tokens):
        if not token.startswith("--"):
            continue
        name, has_value, value = token.partition("=")
        if not has_value and i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
            value = tokens[i + 1]
        values[name] = value
        switches.add(name)

    def number(flag: str) -> float | None:
        text = values.get(flag, "").strip()
        try:
            return float(text) if text else None
        except ValueError:
            return None

    overrides = {flag: _json_object(flag, values[flag]) for flag in _json_flags() if flag in values}
    dotted = _dotted_keys(values, "--hf-overrides")
    if dotted:  # --hf-overrides.key value: vLLM's parser nests dotted keys into the dict (they win over the JSON)
        merged = json.loads(overrides.get("--hf-overrides") or "{}")
        for path, value in dotted.items():
            node = merged
            for part in path[:-1]:
                node = node.setdefault(part, {}) if isinstance(node.get(part, {}), dict) else node
            node[path[-1]] = value
        overrides["--hf-overrides"] = json.dumps(merged, sort_keys=True)
    skip: list[str] = []
    for i, token in enumerate(tokens):  # nargs '+': every value up to the next option
        name, has_value, value = token.partition("=")
        if name == "--kv-cache-dtype-skip-layers":
            following = [value] if has_value else [t for t in _until_option(tokens[i + 1:])]
            skip += [part for v in following for part in v.split(",") if part]
    return ServeMemory(
        kv_cache_memory_bytes=serve.kv_cache_memory_bytes or None,  # 0: vLLM profiles as usual (serve_flags.yaml)
        gpu_memory_utilization=serve.gpu_memory_utilization,
        max_num_batched_tokens=serve.max_num_batched_tokens,
        max_num_seqs=serve.max_num_seqs,
        block_size=serve.block_size,
        disable_sliding_window="--disable-sliding-window" in switches,
        enforce_eager=serve.enforce_eager,
        cpu_offload_gb=serve.cpu_offload_gb,
        prefix_caching="--no-enable-prefix-caching" not in switches,
        mamba_cache_mode=values.get("--mamba-cache-mode") or None,
        mamba_cache_dtype=serve.mamba_cache_dtype,
        mamba_ssm_cache_dtype=serve.mamba_ssm_cache_dtype,
        kv_cache_dtype_skip_layers=tuple(skip),
        kv_offloading_gib=number("--kv-offloading-size"),
        kv_offloading_backend=values.get("--kv-offloading-backend") or "native",
        hf_overrides=overrides.get("--hf-overrides"),
        rope_scaling=overrides.get("--rope-scaling"),
        runner=values.get("--runner") or None,
        convert=values.get("--convert") or None,
        task=values.get("--task") or None,
        unmodelled=tuple(f for f in UNMODELLED_FLAGS if f in switches),
    )


def _dotted_keys(values: dict[str, str], flag: str) -> dict[tuple[str, ...], Any]:
    """`--hf-overrides.a.b VALUE` entries (FlexibleArgumentParser.parse_args, vllm/utils/argparse_utils.py:462-490 in
    0.34.0): key path -> the value as JSON where it parses, else a human-readable int (1k, 80g), else the text."""
    out: dict[tuple[str, ...], Any] = {}
    for name, text in values.items():
        if name.startswith(flag + "."):
            try:
                value = json.loads(text)
            except ValueError:
                try:
                    value = human_readable_int(text)
                except ValueError:
                    value = text
            out[tuple(name[len(flag) + 1:].split("."))] = value
    return out


def _until_option(tokens: list[str]) -> list[str]:
    out = []
    for token in tokens:
        if token.startswith("-"):
            break
        out.append(token)
    return out


def _json_flags() -> tuple[str, ...]:
    return tuple(load_yaml_cached(read_data("kv_memory.yaml"), "kv_memory.yaml")["context_length"]["overrides"]
                 ["json_flags"])  # fmt: skip


def _json_object(flag: str, text: str) -> str:
    """A JSON-object flag value as canonical JSON; malformed JSON is bad input (vLLM's parser refuses it too:
    json.loads in its argparse type), so UsageError with one line."""
    example = '{"rope_type": "yarn", "factor": 4.0}' if flag == "--rope-scaling" else '{"max_position_embeddings": 131072}'
    hint = f"quote one JSON object in single quotes: {flag} '{example}'"
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"serve flag {flag} {text!r}: is not valid JSON ({exc})", hint) from None
    if not isinstance(value, dict):
        raise UsageError(f"serve flag {flag} {text!r}: must be a JSON object", hint)
    return json.dumps(value, sort_keys=True)


def parsed_json(text: str | None) -> dict[str, Any] | None:
    """A ServeMemory JSON field back as a dict."""
    return json.loads(text) if text else None


UNMODELLED_FLAGS = ("--kv-transfer-config", "--num-gpu-blocks-override", "--decode-context-parallel-size",
                    "--prefill-context-parallel-size", "--disable-hybrid-kv-cache-manager", "--speculative-config")
"""Serve flags whose effect on the KV-cache layout or budget kvdoctor does not size yet: with any of them the fit is
undecided, said in words (docs/fit.md). --speculative-config: the draft's own KV layers (MTP, EAGLE) and a state
layer's num_speculative_blocks (MambaSpec.max_memory_usage_bytes, kv_cache_interface.py:298 in 0.17.1)."""


def extensible(release, serve: ServeMemory) -> bool:
    """Does this release size the KV cache from measured memory after warmup (the extensible KV cache, 0.34.0's
    default on CUDA unless --kv-cache-memory-bytes is given)?"""
    from kvdoctor.base.versions import release_numbers

    start = budget_table()["extensible_kv_cache_from"]
    return serve.kv_cache_memory_bytes is None and release_numbers(release.version) >= release_numbers(start)


def release_utilization(release, serve: ServeMemory | None = None) -> float | None:
    """The release's default --gpu-memory-utilization: 1.0 with the extensible KV cache, else the pack's default."""
    if serve is not None and extensible(release, serve):
        return float(budget_table()["extensible_utilization"])
    value = release.defaults.get("gpu_memory_utilization")
    return float(value) if isinstance(value, (int, float)) else None


def batch_defaults(flat, release) -> tuple[int, int]:
    """`vllm serve`'s default (max_num_batched_tokens, max_num_seqs) on this GPU in this release
    (EngineArgs.get_batch_defaults; data/kv_memory.yaml budget.batch_defaults). A release kvdoctor did not read takes
    its read neighbours' answer, the larger where they differ (more activation memory, more in-flight tokens)."""
    from kvdoctor.base.versions import release_numbers

    variants = budget_table()["batch_defaults"]
    number = release_numbers(release.version)
    owners = sorted((release_numbers(v), name) for name, entry in variants.items() for v in entry["read_in"])
    below = [name for r, name in owners if r <= number][-1:] or [owners[0][1]]
    above = [name for r, name in owners if r >= number][:1] or [owners[-1][1]]
    answers = {_batch_class(flat, variants[name]["classes"]) for name in below + above}
    return max(answers)


def _batch_class(flat, classes: list[dict[str, Any]]) -> tuple[int, int]:
    gib = flat.get("gpu.memory_gib") or 0
    name = str(flat.get("gpu.name") or "").lower()
    for entry in classes:
        if gib >= entry["from_gib"] and entry.get("not_named", "\0") not in name and (
                flat.get("gpu.capability") != entry.get("not_capability")):  # fmt: skip
            return entry["max_num_batched_tokens"], entry["max_num_seqs"]
    return classes[-1]["max_num_batched_tokens"], classes[-1]["max_num_seqs"]


def kv_budget(flat, facts: Facts, serve: ServeMemory, release,
              max_model_len: int | None = None) -> tuple[int, int, str, int | None, bool]:  # fmt: skip
    """(available KV bytes, band bytes, where it came from, weights bytes per rank, weights estimated)."""
    weights, estimated = _weights_per_rank(flat, facts, serve, release)
    pooled = pooling(flat, facts, serve, release.version)
    if serve.kv_cache_memory_bytes is not None:
        return serve.kv_cache_memory_bytes, 0, "--kv-cache-memory-bytes (vLLM skips memory profiling)", weights, estimated
    table = budget_table()
    util = serve.gpu_memory_utilization or release_utilization(release, serve)
    total = cuda_total_bytes(flat)
    peak, install_decides = profile_run_peak(flat, facts, serve, release, max_model_len)
    activation = peak.total
    tp = facts.serve.tensor_parallel_size
    non_torch = int((table["non_torch_gib"] + table["non_torch_per_extra_rank_gib"] * (tp - 1)) * GIB)
    graphs = 0 if serve.enforce_eager or not cudagraphs_counted(release) else int(table["cudagraph_gib"] * GIB)
    modelled = activation + non_torch + graphs
    available = int(total * util) - (weights or 0) - modelled
    margin = 0
    if extensible(release, serve):  # measure_kv_cache_bytes: the device's headroom less a margin caps the request
        margin = max(int(table["extensible_margin_floor_gib"] * GIB),
                     int(table["extensible_margin_fraction"] * activation))
        available = min(int(total * util), total - margin) - (weights or 0) - modelled
    band = max(int(table["band_min_gib"] * GIB), int(table["band_share"] * modelled)) + install_decides
    if estimated and weights:
        quantized = facts.model.quant_method not in (None, "none") or facts.serve.quantization not in (None, "none")
        share = table["estimated_weights_band_share"] + (table["quantized_weights"]["band_share"] if quantized else 0)
        band += int(share * weights)
    moe = flat.get("model.moe_layout")
    if moe and weights:  # MoE kernels whose workspaces were not read
        band += int(table["moe_activation_band_share"] * weights)
    sizing = "extensible KV cache (measured after warmup), " if extensible(release, serve) else ""
    offload = f" (--cpu-offload-gb {serve.cpu_offload_gb:g} moved to CPU)" if serve.cpu_offload_gb else ""
    cpu_kv = (f"; --kv-offloading-size {serve.kv_offloading_gib:g} GiB adds CPU blocks, the GPU budget is unchanged"
              if serve.kv_offloading_gib else "")
    source = (f"{sizing}{total / GIB:.2f} GiB (as CUDA reports it) x gpu_memory_utilization {util:g} - weights "
              f"{(weights or 0) / GIB:.2f} GiB{' (estimated)' if estimated else ''}{offload} - modelled activation peak "
              f"{activation / GIB:.2f} GiB, non-torch {non_torch / GIB:.2f} GiB, CUDA graphs {graphs / GIB:.2f} GiB"
              + (f" (headroom margin {margin / GIB:.2f} GiB)" if margin else "") + cpu_kv
              + f"; {peak.describe(flat.get('model.vocab_size') or 0)}"
              + (f"; pooling runner ({pooled}): no LM head, the dummy pooler instead of the sampler" if pooled else ""))
    return available, band, source, weights, estimated


def _weights_per_rank(flat, facts: Facts, serve: ServeMemory, release=None) -> tuple[int | None, bool]:
    ranks = max(1, facts.serve.tensor_parallel_size) * max(1, facts.serve.pipeline_parallel_size)
    offload = int(serve.cpu_offload_gb * GIB)
    exact = flat.get("checkpoint.weights_bytes")
    replicated = replicated_kv_weight_bytes(flat, facts)
    if exact:
        return max(0, exact // ranks + replicated - offload), False
    version = release.version if release is not None else None
    estimate = _estimated_weights(flat, facts, version, bool(pooling(flat, facts, serve, version)))
    return (max(0, estimate // ranks + replicated - offload), True) if estimate else (None, True)


def replicated_kv_weight_bytes(flat, facts: Facts) -> int:
    """Bytes one rank holds beyond its 1/TP share when TP exceeds the KV heads: QKVParallelLinear then keeps one
    whole K and one V head per rank (num_kv_head_replicas = tp // kv heads, vllm/model_executor/layers/linear.py
    :1064-1071 in 0.33.0), where an even split would give it kv_heads / tp of one. Per layer of the rank's pipeline
    stage: 2 x head_dim x hidden x bytes per parameter x (1 - kv_heads / tp). 0 for MLA (no K/V projections per head)
    or when a shape is unknown."""
    m = facts.model
    tp = max(1, facts.serve.tensor_parallel_size)
    if m is None or m.is_mla or not (m.num_kv_heads and m.head_dim and m.hidden_size and m.num_hidden_layers):
        return 0
    if tp <= m.num_kv_heads:
        return 0
    dtype_bytes = int(kv_table()["dtype_bytes"].get(m.dtype or "bfloat16", 2))
    per_param: float | None = dtype_bytes
    method = m.quant_method if m.quant_method not in (None, "none") else facts.serve.quantization
    if method not in (None, "none"):
        config = checkpoint_quant_config(m.quant_config) if m.quant_method not in (None, "none") else {}
        per_param = quantized_bytes_per_param(config, method, dtype_bytes, m.hidden_size)
        if per_param is None:
            return 0
    layers = -(-m.num_hidden_layers // max(1, facts.serve.pipeline_parallel_size))
    return int(layers * 2 * m.head_dim * m.hidden_size * per_param * (1 - m.num_kv_heads / tp))


def pooling(flat, facts: Facts, serve: ServeMemory, version: str | None) -> str | None:
    """Why vLLM builds the pooling runner for this model and these flags (facts/runner_type.py), or None."""
    from kvdoctor.facts.runner_type import pooling_reason

    return pooling_reason(flat, facts, budget_table(), serve.runner, serve.convert, serve.task, version)


def _estimated_weights(flat, facts: Facts, version: str | None = None, pooling: bool = False) -> int | None:
    """Parameters from config.json's shapes: the layers' linear weights x their bytes per parameter (the model dtype's,
    or the quantization method's: quantized_bytes_per_param) + embeddings and LM head in the model dtype (a pooling
    model loads no separate LM head)."""
    m = facts.model
    vocab, inter = flat.get("model.vocab_size"), flat.get("model.intermediate_size")
    if not (m.hidden_size and m.num_hidden_layers and vocab and inter and m.num_attention_heads and m.head_dim):
        return None
    dtype_bytes = int(kv_table()["dtype_bytes"].get(m.dtype or "bfloat16", 2))
    linear_bytes: float = dtype_bytes
    # the checkpoint's method, else --quantization on an unquantized checkpoint (online quantization, e.g. fp8)
    method = m.quant_method if m.quant_method not in (None, "none") else facts.serve.quantization
    if method not in (None, "none"):
        config = checkpoint_quant_config(m.quant_config) if m.quant_method not in (None, "none") else {}
        linear_bytes = quantized_bytes_per_param(config, method, dtype_bytes, m.hidden_size)
        from kvdoctor.facts.quantization import gptq_served_unquantized

        if gptq_served_unquantized(facts, method, config, version):  # vLLM builds every layer unquantized
            linear_bytes = dtype_bytes
        if linear_bytes is None:
            return None
    attention = attention_parameters(flat, m.hidden_size, m.head_dim, m.num_attention_heads, m.num_kv_heads or 1)
    embeddings = vocab * m.hidden_size * (1 if flat.get("model.tie_word_embeddings") or pooling else 2)
    mixers = sequence_mixer_parameters(flat, m.hidden_size, m.num_hidden_layers, attention)
    mlp = mlp_parameters(flat, m.hidden_size, m.num_hidden_layers, inter)
    if method not in (None, "none") and _quantizes_experts_only(method, config, m.num_hidden_layers, m.is_moe):
        # e.g. mxfp4, or a checkpoint excluding every layer's attention: attention and dense MLPs stay unquantized
        experts = routed_expert_parameters(flat, m.hidden_size, m.num_hidden_layers)
        return int(experts * linear_bytes) + (mixers + mlp - experts + embeddings) * dtype_bytes
    return int((mixers + mlp) * linear_bytes) + embeddings * dtype_bytes


def attention_parameters(flat, hidden: int, head_dim: int, heads: int, kv_heads: int) -> int:
    """One attention layer's projections: q/k/v/o, or MLA's as DeepseekV2MLAAttention builds them
    (models/deepseek_v2.py:1004-1044 in 0.25.1): q_a + q_b (or q_proj without q_lora_rank), kv_a_proj_with_mqa,
    kv_b_proj and o_proj (model.mla_layout)."""
    mla = flat.get("model.mla_layout")
    if not mla:
        return hidden * head_dim * (2 * heads + 2 * kv_heads)
    q_width = heads * (mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"])
    q = hidden * mla["q_lora_rank"] + mla["q_lora_rank"] * q_width if mla["q_lora_rank"] else hidden * q_width
    kv_a = hidden * (mla["kv_lora_rank"] + mla["qk_rope_head_dim"])
    kv_b = mla["kv_lora_rank"] * heads * (mla["qk_nope_head_dim"] + mla["v_head_dim"])
    return q + kv_a + kv_b + heads * mla["v_head_dim"] * hidden


def _quantizes_experts_only(method: str, config: dict[str, Any], layers: int, is_moe: bool | None) -> bool:
    table = budget_table()["quantized_weights"]
    if (table["methods"].get(method) or {}).get("applies_to") == "experts":
        return True
    patterns = [p for k in table["exclusion_keys"] if isinstance(config.get(k), list) for p in config[k]
                if isinstance(p, str)]  # fmt: skip
    return bool(is_moe and patterns) and all(_excluded(f"layers.{i}.self_attn.q_proj", patterns) for i in range(layers))


def _excluded(module: str, patterns: list[str]) -> bool:
    """Does a wildcard name the module (its own prefix, e.g. model.language_model., left out on both sides)?"""
    from fnmatch import fnmatchcase

    return any(fnmatchcase(module, p[p.find("layers."):] if "layers." in p else p) or fnmatchcase("model." + module, p)
               for p in patterns)


def sequence_mixer_parameters(flat, hidden: int, layers: int, attention: int) -> int:
    """Every layer's sequence mixer: attention's q/k/v/o projections, or on a hybrid model's state layers
    (model.layer_kinds 'state') the Mamba / linear-attention mixer vLLM builds instead; MLP-only layers ('none')
    have neither."""
    kinds = flat.get("model.layer_kinds")
    state = flat.get("model.state_layer")
    if not kinds or not state or len(kinds) != layers:
        return layers * attention
    mixer = state_mixer_parameters(state, hidden)
    if mixer is None:
        return layers * attention
    return sum(mixer if k == "state" else 0 if k == "none" else attention for k in kinds)


def state_mixer_parameters(state: dict[str, Any], hidden: int) -> int | None:
    """Parameters of one Mamba / linear-attention mixer as vLLM's layer creates them (0.25.1): MambaMixer
    (layers/mamba/mamba_mixer.py: in_proj, conv1d, x_proj, dt_proj, A, D, out_proj; dt_rank = ceil(hidden / 16),
    transformers' 'auto' and Jamba's released value), MambaMixer2 (mamba_mixer2.py: in_proj to 2 x inner +
    2 x groups x state + heads, conv1d, A/D/dt_bias, norm, out_proj) and GatedDeltaNet (qwen3_next.py: in_proj_qkvz,
    in_proj_ba, conv1d, out_proj). None for a calculator not listed."""
    kind, conv = state["calculator"], state.get("conv_kernel", 4)
    if kind == "mamba1":
        inner, d_state, dt_rank = state["intermediate_size"], state["state_size"], -(-hidden // 16)
        return (hidden * 2 * inner + inner * (conv + 1) + inner * (dt_rank + 2 * d_state) + dt_rank * inner + inner
                + inner * d_state + inner + inner * hidden)
    if kind == "mamba2":
        inner, groups, heads = state["intermediate_size"], state["n_groups"], state["num_heads"]
        conv_dim = inner + 2 * groups * state["state_size"]
        return hidden * (conv_dim + inner + heads) + conv_dim * (conv + 1) + 3 * heads + inner + inner * hidden
    if kind == "gated_delta_net":
        keys, values = state["num_k_heads"] * state["head_k_dim"], state["num_v_heads"] * state["head_v_dim"]
        conv_dim = 2 * keys + values
        return (hidden * (2 * keys + 2 * values) + hidden * 2 * state["num_v_heads"] + conv_dim * conv
                + 2 * state["num_v_heads"] + state["head_v_dim"] + values * hidden)
    return None


def routed_expert_parameters(flat, hidden: int, layers: int) -> int:
    """The routed experts' gate, up and down projections over the MoE layers (0 for a dense model)."""
    moe = flat.get("model.moe_layout")
    if not moe:
        return 0
    moe_layers = -(-(layers - min(moe["dense_layers"], layers)) // max(1, moe.get("period", 1)))
    return moe_layers * 3 * hidden * moe["experts"] * moe["expert_width"]


def checkpoint_quant_config(text: str | None) -> dict[str, Any]:
    """The checkpoint's quantization config from the model record (ModelFacts.quant_config, compact JSON; {} when it
    has none or it is not an object)."""
    if not text or text == "none":
        return {}
    value = json.loads(text)
    return value if isinstance(value, dict) else {}


def mlp_parameters(flat, hidden: int, layers: int, inter: int) -> int:
    """Every layer's MLP parameters: gate, up and down projections; a MoE layer's routed experts, shared experts
    and router (model.moe_layout), its dense layers at their own width."""
    moe = flat.get("model.moe_layout")
    if not moe:
        return layers * 3 * hidden * inter
    dense = min(moe["dense_layers"], layers)
    moe_layers = -(-(layers - dense) // max(1, moe.get("period", 1)))
    per_moe_layer = 3 * hidden * (moe["experts"] * moe["expert_width"] + moe["shared_width"]) + hidden * moe["experts"]
    return moe_layers * per_moe_layer + (layers - moe_layers) * 3 * hidden * moe["dense_width"]


def quantized_bytes_per_param(config: dict[str, Any], method: str, model_dtype_bytes: int,
                              input_size: int) -> float | None:  # fmt: skip
    """Bytes one parameter of a quantized linear layer takes, as the method's create_weights lays it out
    (data/kv_memory.yaml budget.quantized_weights); None for a method or config kvdoctor cannot size."""
    entry = budget_table()["quantized_weights"]["methods"].get(method)
    if entry is None:
        return None
    bits = entry.get("bits") or next((config[k] for k in entry.get("bits_keys", ()) if k in config), None)
    if not isinstance(bits, int) or bits <= 0:
        return None
    scale = model_dtype_bytes if entry["scale_bytes"] == "model" else entry["scale_bytes"]
    if "block_key" in entry:
        block = config.get(entry["block_key"])
        per_scale = block[0] * block[1] if isinstance(block, list) and len(block) == 2 else None
    else:
        group = entry.get("group_size") or next((config[k] for k in entry["group_keys"] if k in config), None)
        per_scale = input_size if group == -1 else group  # -1: one group per output channel (the whole input)
    if not isinstance(per_scale, int) or per_scale <= 0:
        return bits / 8  # per-tensor scales: a few bytes per layer
    zeros = bits / 8 / per_scale if entry.get("zero_points") else 0.0
    return bits / 8 + zeros + scale / per_scale


def profile_run_peak(flat, facts: Facts, serve: ServeMemory, release,
                     max_model_len: int | None = None) -> tuple[ProfilePeak, int]:  # fmt: skip
    """The profile run's torch peak (facts/profile_peak.py) at the serve settings or the release's batch defaults, and
    the part of it the install decides (added to the band)."""
    default_tokens, default_seqs = batch_defaults(flat, release)
    tokens, seqs = serve.max_num_batched_tokens or default_tokens, serve.max_num_seqs or default_seqs
    table = budget_table()
    pooled = bool(pooling(flat, facts, serve, release.version))
    return (profile_peak(flat, facts, table, release, tokens, seqs, serve.enforce_eager, max_model_len,
                         serve.block_size, pooled),
            0 if pooled else sampler_band_bytes(flat, facts, table, release, min(tokens, seqs)))


def cuda_total_bytes(flat) -> int:
    """The GPU memory vLLM budgets from: torch's mem_get_info total (measured per GPU where known), else the card's
    nominal memory less what the driver keeps (data/kv_memory.yaml budget.cuda_total_gib / cuda_reserved_gib)."""
    table = budget_table()
    measured = table["cuda_total_gib"].get(flat.get("gpu.name"))
    gib = measured if measured is not None else flat["gpu.memory_gib"] - table["cuda_reserved_gib"]
    return int(gib * GIB)


def cudagraphs_counted(release) -> bool:
    """Whether the release subtracts CUDA-graph memory before sizing the KV cache (read per release; a release
    between two read ones that disagree, or outside them, counts it: the smaller budget)."""
    from kvdoctor.base.versions import release_numbers

    read = {release_numbers(v): counted for v, counted in budget_table()["cudagraph_counted_read_in"].items()}
    number = release_numbers(release.version)
    if number in read:
        return read[number]
    below = [read[r] for r in sorted(read) if r < number][-1:]
    above = [read[r] for r in sorted(read) if r > number][:1]
    return not (below and above and below == above == [False])
