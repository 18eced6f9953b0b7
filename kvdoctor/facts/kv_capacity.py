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
    """'full' or 'sliding'."""
    page_bytes_per_token: int
    """heads x (head_size + head_size_v) x dtype bytes (or the packed cell bytes)."""
    window: int | None = None


@dataclass(frozen=True)
class KvPlan:
    """The KV-cache groups of one rank: (kind, window, layers in the group, page bytes per token of one layer)."""

    groups: tuple[tuple[str, int | None, int, int], ...]
    block_size: int
    bytes_per_block: int
    """Bytes one block takes across every group (vLLM's pool divisor)."""

    def blocks_per_request(self, max_model_len: int, in_flight_tokens: int) -> int:
        total = 0
        for kind, window, _, _ in self.groups:
            if kind == "sliding" and window:
                total += cdiv(min(window - 1 + in_flight_tokens, max_model_len), self.block_size) + 1
            else:
                total += cdiv(max_model_len, self.block_size)
        return total

    def needed_bytes(self, max_model_len: int, in_flight_tokens: int) -> int:
        return self.bytes_per_block * self.blocks_per_request(max_model_len, in_flight_tokens)


def layer_specs(layer_kinds: list[str], *, num_kv_heads: int, head_dim: int, kv_bytes: float, is_mla: bool,
                tensor_parallel_size: int, window: int | None, kv_cache_dtype: str, model_dtype_bytes: int,
                disable_sliding_window: bool = False) -> list[LayerSpec]:  # fmt: skip
    """Per attention layer, the spec on one rank. KV heads are split over TP ranks and replicated when TP exceeds them
    (max(1, heads // tp)); MLA keeps one latent head and no separate V; TurboQuant packs each head's K and V in one
    slot and keeps the first and last layers of a dense model in the model dtype."""
    heads = 1 if is_mla else max(1, num_kv_heads // max(1, tensor_parallel_size))
    per_head = head_dim if is_mla else 2 * head_dim
    full_bytes = int(heads * per_head * kv_bytes)
    tq = presets().get(kv_cache_dtype)
    attention = [i for i, k in enumerate(layer_kinds) if k in ("full", "sliding")]
    skip = set()
    if tq is not None:
        n = min(native_layers() // 2, len(attention) // 2)
        skip = set(attention[:n] + attention[len(attention) - n:])
    specs = []
    for index in attention:
        kind = "full" if disable_sliding_window else layer_kinds[index]
        if tq is not None and index not in skip:
            page = heads * turboquant_slot_bytes(tq, head_dim)
        elif tq is not None:
            page = heads * per_head * model_dtype_bytes
        else:
            page = full_bytes
        specs.append(LayerSpec(kind, page, window if kind == "sliding" else None))
    return specs


def turboquant_slot_bytes(preset, head_dim: int) -> int:
    """TurboQuantConfig.slot_size_aligned: packed key + value bytes of one head and token, rounded up to even."""
    key = head_dim if preset.key_bits == 8 else math.ceil(head_dim * preset.key_bits / 8) + 2
    slot = key + math.ceil(head_dim * preset.value_bits / 8) + 4
    return slot + slot % 2


def plan_groups(specs: list[LayerSpec], block_size: int) -> KvPlan:
    """vLLM's get_kv_cache_groups for the cases modelled: every layer alike (one group); full-attention layers with
    different page sizes (UniformTypeKVCacheSpecs: one group, pages summed); full and sliding layers with one page
    size (groups of equal size, the smaller type's count unless the larger is under 1.5x it, padded)."""
    if not specs:
        return KvPlan((), block_size, 0)
    kinds = Counter((s.kind, s.window) for s in specs)
    if len(kinds) == 1:
        (kind, window), = kinds
        total = sum(s.page_bytes_per_token for s in specs) * block_size
        return KvPlan(((kind, window, len(specs), total // len(specs) // block_size),), block_size, total)
    pages = {s.page_bytes_per_token for s in specs}
    if len(pages) != 1:
        raise NotImplementedError("mixed attention types with different page sizes")
    page = pages.pop() * block_size
    smallest, largest = min(kinds.values()), max(kinds.values())
    group_size = largest if largest < smallest * 1.5 else smallest
    groups = []
    for (kind, window), count in kinds.items():
        groups += [(kind, window, group_size, page // block_size)] * cdiv(count, group_size)
    return KvPlan(tuple(groups), block_size, page * group_size)


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
