"""A cell's KV-cache capacity, read from the facts its own `kvdoctor check` computed (facts/memory.py,
facts/kv_capacity.py: vLLM's planner and memory budget). The matrix has no sizing formula of its own, so a cell's
numbers are check's numbers for the same model, GPU, KV-cache dtype and release."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

FIT_STATES = ("fits", "within_band", "does_not_fit", "no_memory", "not_modelled")


@dataclass(frozen=True)
class Capacity:
    """What check's memory facts say of one (GPU, KV-cache dtype) cell; None fields were not decided."""

    fit: str | None
    """memory.fit: fits, within_band, does_not_fit, no_memory, not_modelled; None when the judged releases disagree."""
    why_not: str | None
    """memory.why_not: why the fit was not judged (None when it was)."""
    max_model_len: int | None
    """context.max_model_len: the length one request may take (--max-model-len, or the model's)."""
    kv_budget_gib: float | None
    """memory.kv_budget_gib: the KV-cache memory vLLM will have per rank."""
    band_gib: float | None
    """memory.band_gib: +- error band of that budget."""
    kv_bytes_per_token: int | None
    """memory.kv_bytes_per_token: every layer of one rank, as vLLM's groups pad it."""
    tokens: int | None
    """memory.kv_tokens: vLLM's 'GPU KV cache size: N tokens'."""
    max_concurrency: float | None
    """memory.max_concurrency: vLLM's 'Maximum concurrency for M tokens per request: X'."""
    fitting_max_model_len: int | None
    """memory.fitting_max_model_len: the longest --max-model-len that fits, when this one does not."""
    weights_bytes: int | None
    """memory.weights_bytes: weights held by one rank."""
    weights_estimated: bool | None
    """memory.weights_estimated: from config.json's shapes rather than the checkpoint's files."""
    vllm_log: str | None
    """memory.vllm_log: the capacity lines vLLM will log."""

    @property
    def holds_one_request(self) -> bool | None:
        """Whether one request at max_model_len fits (None: not judged or inside the band)."""
        return {"fits": True, "does_not_fit": False, "no_memory": False}.get(self.fit or "")


def capacity_from_facts(facts: Mapping[str, Any]) -> Capacity | None:
    """The cell's capacity from check's facts; None when check decided no memory fact at all."""
    fit = facts.get("memory.fit")
    if fit is None and facts.get("memory.kv_tokens") is None:
        return None
    why_not = facts.get("memory.why_not")
    return Capacity(
        fit=fit,
        why_not=None if why_not in (None, "none") else why_not,
        max_model_len=facts.get("context.max_model_len"),
        kv_budget_gib=facts.get("memory.kv_budget_gib"),
        band_gib=facts.get("memory.band_gib"),
        kv_bytes_per_token=facts.get("memory.kv_bytes_per_token"),
        tokens=facts.get("memory.kv_tokens"),
        max_concurrency=facts.get("memory.max_concurrency"),
        fitting_max_model_len=facts.get("memory.fitting_max_model_len"),
        weights_bytes=facts.get("memory.weights_bytes"),
        weights_estimated=facts.get("memory.weights_estimated"),
        vllm_log=facts.get("memory.vllm_log"),
    )
