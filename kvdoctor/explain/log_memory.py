"""The memory lines vLLM logs at start-up, as facts (`logged.*`), and what they say fits when the KV cache is too
small: the --max-model-len the cache holds and the --gpu-memory-utilization that would hold the requested length.

The lines (their wording per release, read from the wheels' logger calls):
  "Model loading took 14.99 GiB (memory) and 5.1 seconds"    vllm/v1/worker/gpu_model_runner.py (load_model)
  "Available KV cache memory: 51.37 GiB"                      vllm/v1/worker/gpu_worker.py (determine_available_memory)
  "GPU KV cache size: 420,880 tokens" (0.34: "<pool> KV cache size: N tokens, Maximum concurrency for ...")
  "Maximum concurrency for 32,768 tokens per request: 12.84x" vllm/v1/core/kv_cache_utils.py
  "# GPU blocks: 2427, # CPU blocks: 2048"                    V0 engines (vllm/engine/llm_engine.py)
  "Graph capturing finished in 12 secs, took 0.53 GiB"        gpu_model_runner.py (capture_model)
  "total_gpu_memory (79.15GiB) x gpu_memory_utilization (0.90) = 71.24GiB" and "model weights take 14.99GiB"
                                                              vllm/worker/worker.py's profiling summary (V0, early V1)
  "Free memory on device (31.44/47.38 GiB) on startup"       gpu_worker.py (request_memory and its debug summary)
"""

from __future__ import annotations

import re
from typing import Any, Iterator

# One search decides whether a line can hold a memory fact (most lines cannot).
HINT = re.compile(r"GiB|KV cache size|concurrency for|GPU blocks")
_NUMBER = r"(\d[\d,]*(?:\.\d+)?)"
_SIGNED = r"(-?\d[\d,]*(?:\.\d+)?)"  # what is left for the KV cache goes below zero when the rest took more than the share
_PATTERNS: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"Model loading took " + _NUMBER + r" ?GiB"), ("weights_gib",)),
    (re.compile(r"model weights take " + _NUMBER + r" ?GiB"), ("weights_gib",)),
    (re.compile(r"weights memory: " + _NUMBER + r" ?GiB"), ("weights_gib",)),
    (re.compile(r"Available KV cache memory: " + _SIGNED + r" ?GiB"), ("available_kv_gib",)),
    (re.compile(r"the rest of the memory reserved for KV Cache is " + _SIGNED + r" ?GiB"), ("available_kv_gib",)),
    (re.compile(r"KV cache size: " + _NUMBER + r" tokens"), ("kv_cache_tokens",)),
    (re.compile(r"Maximum concurrency for " + _NUMBER + r" tokens per request: " + _NUMBER + r"x"),
     ("concurrency_len", "max_concurrency")),
    (re.compile(r"# (?:GPU|cuda) blocks: (\d+)(?:, # CPU blocks: (\d+))?"),  # V0 prints plain integers
     ("gpu_blocks", "cpu_blocks")),
    (re.compile(r"Graph capturing finished in \d+ secs?, took " + _NUMBER + r" ?GiB"), ("cuda_graph_gib",)),
    (re.compile(r"CUDA graph pool memory: " + _NUMBER + r" ?GiB"), ("cuda_graph_gib",)),
    (re.compile(r"total_gpu_memory \(" + _NUMBER + r" ?GiB\) x gpu_memory_utilization \(" + _NUMBER + r"\) = "
                + _NUMBER + r" ?GiB"), ("total_gib", "gpu_memory_utilization", "requested_gib")),
    (re.compile(r"Free memory on device(?: \S+)? \(" + _NUMBER + r"/" + _NUMBER + r" GiB\) on startup"),
     ("free_gib", "total_gib")),
    (re.compile(r"Desired GPU memory utilization is \(" + _NUMBER + r", " + _NUMBER + r" GiB\)"),
     ("gpu_memory_utilization", "requested_gib")),
)
PREFIX = "logged."
# each pattern behind the literal text it opens with: a substring test is far cheaper than a regex search
_BY_LITERAL = tuple((re.match(r"[\w #]+", pattern.pattern).group(0).rstrip(), pattern, names)
                    for pattern, names in _PATTERNS)


def memory_facts(text: str) -> Iterator[tuple[str, float]]:
    """The memory facts one log line states, as (`logged.<name>`, number)."""
    if not HINT.search(text):
        return
    for literal, pattern, names in _BY_LITERAL:
        if literal not in text:
            continue
        match = pattern.search(text)
        if match:
            for name, value in zip(names, match.groups()):
                if value is not None:  # an optional group the line did not have
                    yield PREFIX + name, _number(value)


def _number(text: str) -> float:
    value = float(text.replace(",", ""))
    return int(value) if value.is_integer() and "." not in text else value


def kv_fit_values(values: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    """For a KV-cache-too-small match: `fits_len` (the longest --max-model-len the cache holds), `fit_util` (the
    --gpu-memory-utilization that would hold the requested length) and `fit_text`, a sentence saying both with the
    numbers they come from; each only when the log gave what it needs."""
    out: dict[str, Any] = {}
    max_len = _float(values.get("max_len"))
    needed, available = _float(values.get("needed")), _float(values.get("available"))
    available = available if available is not None else _float(facts.get("logged.available_kv_gib"))
    tokens = _float(values.get("estimated")) or _float(values.get("capacity")) or _float(facts.get("logged.kv_cache_tokens"))
    parts = []
    if tokens:
        out["fits_len"] = str(int(tokens))
        if not values.get("estimated"):  # vLLM's own estimate is in the cause already
            source = "the capacity vLLM's message gives" if values.get("capacity") else "GPU KV cache size, as logged"
            parts.append(f"the KV cache holds {int(tokens)} tokens ({source}), so --max-model-len {int(tokens)} fits")
    elif needed and available is not None and max_len:
        fits = int(max_len * available / needed)
        out["fits_len"] = str(fits)
        parts.append(f"{available} GiB of {needed} GiB is {fits} of the {int(max_len)} tokens, so about "
                     f"--max-model-len {fits} fits")
    if needed is None and available is not None and max_len and tokens:
        needed = round(available * max_len / tokens, 2)  # the cache's GiB per token times the requested length
    total = _float(facts.get("logged.total_gib"))
    util, util_source = _utilization(facts)
    if needed and available is not None and total and util:
        short = needed - available
        wanted = util + short / total
        if wanted <= 0.98:
            out["fit_util"] = f"{min(0.98, wanted + 0.01):.2f}"  # one point above the bare need, for rounding
            out["fit_util_text"] = f" ({util:g} {util_source} -> {out['fit_util']})"
            parts.append(f"the KV cache is {short:.2f} GiB short of {int(max_len or 0) or 'the'} tokens; on this "
                         f"{total:g} GiB GPU that is --gpu-memory-utilization {out['fit_util']} instead of "
                         f"{util:g} ({util_source})")
        else:
            out["fit_util"] = "0.98"
            out["fit_util_text"] = f" (not enough alone here: 0.98 leaves {short - (0.98 - util) * total:.2f} GiB short)"
            parts.append(f"the KV cache is {short:.2f} GiB short; on this {total:g} GiB GPU even "
                         f"--gpu-memory-utilization 0.98 (from {util:g}, {util_source}) would not hold it: shorten the "
                         "context or spread the model over more GPUs")
    weights = _float(facts.get("logged.weights_gib"))
    if weights is not None:
        out["weights_text"] = f" after {weights:g} GiB of weights"
        share = (f" of the {util * total:.2f} GiB vLLM may use (gpu_memory_utilization {util:g} x {total:g} GiB)"
                 if util and total else "")
        parts.append(f"the weights took {weights:g} GiB{share}")
    graphs = _float(facts.get("logged.cuda_graph_gib"))
    if graphs is not None:
        parts.append(f"CUDA graphs took {graphs:g} GiB")
    blocks = _float(facts.get("logged.gpu_blocks"))
    if blocks is not None and blocks <= 0 and available is None:  # V0 engines log the block count, not the GiB
        parts.append(f"vLLM logged # GPU blocks: {int(blocks)}, not one KV-cache block in what the share left")
    if available is not None and available <= 0:  # vLLM logs what was left below zero: how far over the share it went
        parts.append(f"what was left for the KV cache was {available:g} GiB (Available KV cache memory), so the rest "
                     f"took {-available:g} GiB more than the share")
    if parts:
        out["fit_text"] = " From the log's memory lines: " + "; ".join(parts) + "."
    return out


def _utilization(facts: dict[str, Any]) -> tuple[float | None, str]:
    """The --gpu-memory-utilization the run used: as logged, as passed, or the release's default when the log shows
    the arguments (the default is vLLM's, read by the knowledge pack)."""
    logged = _float(facts.get("logged.gpu_memory_utilization"))
    if logged:
        return logged, "as logged"
    passed = _float(facts.get("serve.gpu_memory_utilization"))
    if passed:
        return passed, "as passed"
    version = facts.get("vllm.version")
    if facts.get("serve.dtype") is not None and version:  # the arguments line was read and did not set it
        from kvdoctor.vllm_pack.release import load_release

        release = load_release(str(version).split("+")[0])
        default = release.defaults.get("gpu_memory_utilization") if release is not None else None
        if isinstance(default, (int, float)):
            return float(default), f"vLLM {version}'s default"
    return None, ""


def _float(value: Any) -> float | None:
    if value is None:
        return None
    try:
        return float(str(value).replace(",", ""))
    except ValueError:
        return None
