"""What vLLM's `/metrics` says about the KV cache, read with prometheus_client's own text parser.

`vllm:cache_config_info` is an info gauge whose labels are vLLM's CacheConfig fields as that release has them
(0.25.1 on a GPU: block_size, cache_dtype, gpu_memory_utilization, num_gpu_blocks, kv_cache_size_tokens,
kv_cache_memory_bytes, ...; the 0.32.0 CPU build another set). They are kept as the server gave them: a label the
release lacks is absent, never assumed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

CACHE_CONFIG_INFO = "vllm:cache_config_info"
KV_USAGE_GAUGES = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "vllm:cpu_cache_usage_perc")
"""KV usage gauges across releases (the gpu_/cpu_ names are older vLLM's); whichever the server has is kept."""


@dataclass(frozen=True)
class ServerMetrics:
    """The KV-cache part of one `/metrics` page."""

    cache_config: dict[str, str] = field(default_factory=dict)
    """The labels of vllm:cache_config_info, as strings ('None' where vLLM has no value); {} when absent."""
    engines: int = 0
    """How many vllm:cache_config_info samples (one per engine); the first is kept."""
    kv_usage: dict[str, float] = field(default_factory=dict)
    """Each KV usage gauge the server has, its first sample's value (a fraction 0-1)."""
    vllm_metric_count: int = 0
    """Metric families named vllm:*; 0 means the page is not a vLLM server's."""


class MetricsParseError(ValueError):
    """The page is not Prometheus text."""


def parse_metrics(text: str) -> ServerMetrics:
    """The KV-cache metrics of a Prometheus text page (OpenMetrics-compatible text is read the same way)."""
    from prometheus_client.parser import text_string_to_metric_families

    cache_config: dict[str, str] = {}
    engines = 0
    usage: dict[str, float] = {}
    vllm_families = 0
    try:
        for family in text_string_to_metric_families(text):
            if family.name.startswith("vllm:"):
                vllm_families += 1
            for sample in family.samples:
                if sample.name == CACHE_CONFIG_INFO:
                    engines += 1
                    if engines == 1:
                        cache_config = dict(sample.labels)
                elif sample.name in KV_USAGE_GAUGES and sample.name not in usage:
                    usage[sample.name] = float(sample.value)
    except ValueError as exc:
        raise MetricsParseError(str(exc)) from None
    return ServerMetrics(cache_config, engines, usage, vllm_families)


def label_int(labels: dict[str, str], name: str) -> int | None:
    """A numeric label as an int; None when absent or 'None' (vLLM prints unset fields so)."""
    value = labels.get(name)
    if value in (None, "", "None"):
        return None
    try:
        return int(float(value))
    except ValueError:
        return None


def label_float(labels: dict[str, str], name: str) -> float | None:
    value = labels.get(name)
    if value in (None, "", "None"):
        return None
    try:
        return float(value)
    except ValueError:
        return None
