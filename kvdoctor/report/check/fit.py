"""What vLLM will log when it sizes the KV cache, and what that figure rests on, read from check's memory.* facts
(facts/memory.py): one record the json and prometheus formats show alike (not itself a format)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from kvdoctor.model.report import Report

GIB = 2**30
FIT_STATES = ("fits", "within_band", "does_not_fit", "no_memory", "not_modelled")


@dataclass(frozen=True)
class FitSummary:
    """The KV-cache fit as check judged it; None = not decided (the fit was not judged, or releases disagree)."""

    state: str | None
    """memory.fit: fits, within_band, does_not_fit, no_memory or not_modelled."""
    why_not: str | None
    """Why the fit was not judged (memory.why_not), None when it was."""
    available_kv_bytes: int | None
    """The KV-cache memory vLLM will have per rank ('Available KV cache memory')."""
    available_kv_gib: float | None
    band_gib: float | None
    """+- error band of that figure (0 with --kv-cache-memory-bytes)."""
    kv_cache_tokens: int | None
    """vLLM's 'GPU KV cache size: N tokens'."""
    max_model_len: int | None
    """M in 'Maximum concurrency for M tokens per request'."""
    max_concurrency: float | None
    """X in that line."""
    vllm_log: tuple[str, ...]
    """The two lines as vLLM will log them, () when not judged."""
    vllm_error: str | None
    """vLLM's own start-up error when one request does not fit, None otherwise."""
    weights_bytes: int | None
    """Weights one rank holds, as the budget subtracted them."""
    weights_source: str | None
    """Where they came from: the checkpoint's safetensors index / headers, or an estimate from config.json."""
    weights_estimated: bool | None
    kv_budget_source: str | None
    """The budget term by term."""
    kv_bytes_per_token: int | None
    block_size: int | None

    @property
    def judged(self) -> bool:
        return self.state is not None and self.state != "not_modelled"


def fit_summary(report: Report) -> FitSummary | None:
    """The fit record of a check report; None when the report carries no memory facts (explain's)."""
    facts: Mapping[str, Any] = report.facts
    if "memory.fit" not in facts:
        return None
    log = facts.get("memory.vllm_log")
    error = facts.get("memory.error")
    why_not = facts.get("memory.why_not")
    return FitSummary(
        state=facts.get("memory.fit"),
        why_not=None if why_not in (None, "none") else why_not,
        available_kv_bytes=facts.get("memory.kv_budget_bytes"),
        available_kv_gib=facts.get("memory.kv_budget_gib"),
        band_gib=facts.get("memory.band_gib"),
        kv_cache_tokens=facts.get("memory.kv_tokens"),
        max_model_len=facts.get("context.max_model_len"),
        max_concurrency=facts.get("memory.max_concurrency"),
        vllm_log=tuple(log.split("; ")) if log else (),
        vllm_error=None if error in (None, "none") else error,
        weights_bytes=facts.get("memory.weights_bytes"),
        weights_source=_weights_source(facts),
        weights_estimated=facts.get("memory.weights_estimated"),
        kv_budget_source=facts.get("memory.kv_budget_source"),
        kv_bytes_per_token=facts.get("memory.kv_bytes_per_token"),
        block_size=facts.get("memory.block_size"),
    )


def _weights_source(facts: Mapping[str, Any]) -> str | None:
    if facts.get("memory.weights_bytes") is None:
        return None
    if facts.get("memory.weights_estimated") is False and facts.get("checkpoint.weights_source"):
        return str(facts["checkpoint.weights_source"])
    return "estimated from config.json's shapes x the model dtype (no checkpoint size found)"
