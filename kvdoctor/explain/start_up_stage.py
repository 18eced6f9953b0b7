"""The start-up stage an exception was raised in, told by the vLLM functions on its traceback (innermost first):
weight loading, the profiling run that measures peak memory, the allocation of the KV cache, CUDA graph capture,
compilation, or a batch of requests. A cause names it so that "out of memory" says when (read from vLLM 0.4-0.34's
worker and model runner function names: gpu_model_runner.py, gpu_worker.py, worker.py, model_runner.py)."""

from __future__ import annotations

import re
from typing import Iterable

from kvdoctor.explain.tracebacks import Frame

STAGES: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(pattern), words) for pattern, words in (
    (r"^(?:capture_model|_capture_cudagraphs|capture)$", "CUDA graph capture"),
    (r"^(?:profile_run|_dummy_run|_dummy_sampler_run|_dummy_pooler_run|determine_available_memory"
     r"|determine_num_available_blocks)$", "the profiling run that measures peak memory"),
    (r"^(?:initialize_kv_cache(?:_tensors)?|_allocate_kv_cache(?:_tensors)?|allocate_kv_cache|_init_cache_engine"
     r"|initialize_cache|_initialize_kv_caches)$", "the allocation of the KV cache"),
    (r"^(?:load_model|load_weights)$", "weight loading"),
    (r"^(?:compile_or_warm_up_model)$", "the model's compilation and warm-up"),
    (r"^(?:execute_model|step|_process_engine_step)$", "a batch of requests"),
))  # fmt: skip


def start_up_stage(frames: Iterable[Frame]) -> tuple[str, str] | None:
    """(the stage in words, the vLLM function that tells it) for the innermost vLLM frame naming a stage, or None."""
    for frame in reversed(tuple(frames)):
        if frame.function is None or "vllm" not in frame.file:
            continue
        name = frame.function.rpartition(".")[2]
        for pattern, words in STAGES:
            if pattern.match(name):
                return words, name
    return None
