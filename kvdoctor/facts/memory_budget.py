"""The memory budget vLLM's GPU worker leaves the KV cache (determine_available_memory in
vllm/v1/worker/gpu_worker.py): GPU memory x --gpu-memory-utilization - weights per rank - a modelled activation
peak, non-torch and CUDA-graph memory, with its error band; --kv-cache-memory-bytes exactly. The serve flags the
memory model reads. Numbers and their sources: data/kv_memory.yaml ("budget")."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kvdoctor.base.yaml_safe import load_yaml_cached
from kvdoctor.data import read_data
from kvdoctor.facts.kv_capacity import kv_table
from kvdoctor.facts.probes.serve_args import human_readable_int
from kvdoctor.model.facts import Facts

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


def serve_memory(argv: tuple[str, ...]) -> ServeMemory:
    """The memory flags in a (canonically spelt) serve argv; an unreadable value stays unknown (the release's parser
    judges it: serve.args_*)."""
    values: dict[str, str] = {}
    switches: set[str] = set()
    tokens = list(argv)
    for i, token in enumerate(tokens):
        if not token.startswith("--"):
            continue
        name, has_value, value = token.partition("=")
        if not has_value and i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
            value = tokens[i + 1]
        values[name] = value
        switches.add(name)

    def number(flag: str, kind=int):
        text = values.get(flag, "").strip()
        try:  # ints in vLLM's human form (4G, 32k), as the serve-command reader reads them
            return (human_readable_int if kind is int else kind)(text) if text else None
        except ValueError:
            return None

    return ServeMemory(
        kv_cache_memory_bytes=number("--kv-cache-memory-bytes"),
        gpu_memory_utilization=number("--gpu-memory-utilization", float),
        max_num_batched_tokens=number("--max-num-batched-tokens"),
        max_num_seqs=number("--max-num-seqs"),
        block_size=number("--block-size"),
        disable_sliding_window="--disable-sliding-window" in switches,
        enforce_eager="--enforce-eager" in switches,
        cpu_offload_gb=number("--cpu-offload-gb", float) or 0.0,
    )


def release_utilization(release) -> float | None:
    value = release.defaults.get("gpu_memory_utilization")
    return float(value) if isinstance(value, (int, float)) else None


def kv_budget(flat, facts: Facts, serve: ServeMemory, release) -> tuple[int, int, str, int | None, bool]:
    """(available KV bytes, band bytes, where it came from, weights bytes per rank, weights estimated)."""
    weights, estimated = _weights_per_rank(flat, facts, serve)
    if serve.kv_cache_memory_bytes is not None:
        return serve.kv_cache_memory_bytes, 0, "--kv-cache-memory-bytes (vLLM skips memory profiling)", weights, estimated
    table = budget_table()
    util = serve.gpu_memory_utilization or release_utilization(release)
    total = int(flat["gpu.memory_gib"] * GIB)
    activation = _activation_bytes(flat, facts, serve)
    tp = facts.serve.tensor_parallel_size
    non_torch = int((table["non_torch_gib"] + table["non_torch_per_extra_rank_gib"] * (tp - 1)) * GIB)
    graphs = 0 if serve.enforce_eager else int(table["cudagraph_gib"] * GIB)
    modelled = activation + non_torch + graphs
    available = int(total * util) - (weights or 0) - modelled
    band = max(int(table["band_min_gib"] * GIB), int(table["band_share"] * modelled))
    if estimated and weights:
        band += int(table["estimated_weights_band_share"] * weights)
    source = (f"{flat['gpu.memory_gib']:g} GiB x gpu_memory_utilization {util:g} - weights "
              f"{(weights or 0) / GIB:.2f} GiB{' (estimated)' if estimated else ''} - modelled activation peak "
              f"{activation / GIB:.2f} GiB, non-torch {non_torch / GIB:.2f} GiB, CUDA graphs {graphs / GIB:.2f} GiB")
    return available, band, source, weights, estimated


def _weights_per_rank(flat, facts: Facts, serve: ServeMemory) -> tuple[int | None, bool]:
    ranks = max(1, facts.serve.tensor_parallel_size) * max(1, facts.serve.pipeline_parallel_size)
    offload = int(serve.cpu_offload_gb * GIB)
    exact = flat.get("checkpoint.weights_bytes")
    if exact:
        return max(0, exact // ranks - offload), False
    estimate = _estimated_weights(flat, facts)
    return (max(0, estimate // ranks - offload), True) if estimate else (None, True)


def _estimated_weights(flat, facts: Facts) -> int | None:
    """Parameters from config.json's shapes x the model dtype's bytes (quantized checkpoints: unknown)."""
    m = facts.model
    vocab, inter = flat.get("model.vocab_size"), flat.get("model.intermediate_size")
    if not (m.hidden_size and m.num_hidden_layers and vocab and inter and m.num_attention_heads and m.head_dim):
        return None
    if m.quant_method not in (None, "none"):
        return None
    attention = m.hidden_size * m.head_dim * (2 * m.num_attention_heads + 2 * (m.num_kv_heads or 1))
    mlp = 3 * m.hidden_size * inter
    embeddings = vocab * m.hidden_size * (1 if flat.get("model.tie_word_embeddings") else 2)
    params = m.num_hidden_layers * (attention + mlp) + embeddings
    return params * int(kv_table()["dtype_bytes"].get(m.dtype or "bfloat16", 2))


def _activation_bytes(flat, facts: Facts, serve: ServeMemory) -> int:
    table = budget_table()
    m = facts.model
    tokens = serve.max_num_batched_tokens or default_batched_tokens(flat)
    tp = max(1, facts.serve.tensor_parallel_size)
    hidden = m.hidden_size or 0
    inter = (flat.get("model.intermediate_size") or 0) // tp
    seqs = serve.max_num_seqs or 256
    logits = seqs * (flat.get("model.vocab_size") or 0) * 4
    return int(tokens * (table["activation_bytes_per_token_hidden"] * hidden
                         + table["activation_bytes_per_token_intermediate"] * inter) + logits)


def default_batched_tokens(flat) -> int:
    """`vllm serve`'s default max_num_batched_tokens on CUDA (EngineArgs.get_batch_defaults, arg_utils.py:2940 in
    0.33.0): 16384 from 160 GiB, 8192 from 70 GiB (not A100), else 2048."""
    gib = flat.get("gpu.memory_gib") or 0
    if gib >= 160:
        return 16384
    if gib >= 70 and "a100" not in str(flat.get("gpu.name") or "").lower():
        return 8192
    return 2048
