"""The memory lines vLLM logs become facts (kvdoctor/explain/log_memory.py), and the KV-cache-too-small family says
with them what fits. The log lines are synthetic, written from the logger calls' templates in the vLLM wheels
(gpu_model_runner.py load_model, gpu_worker.py determine_available_memory, kv_cache_utils.py)."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.log_facts import read_facts
from kvdoctor.explain.log_lines import normalise
from kvdoctor.explain.log_memory import kv_fit_values, memory_facts

STARTUP_0_25 = (
    "INFO 05-02 10:00:00 [api_server.py:1] vLLM API server version 0.25.1\n"
    "INFO 05-02 10:00:01 [utils.py:1] non-default args: {'model': 'Qwen/Qwen2.5-7B-Instruct', 'max_model_len': 131072}\n"
    "INFO 05-02 10:00:30 [gpu_model_runner.py:1] Model loading took 14.25 GiB memory and 30.123456 seconds\n"
    "INFO 05-02 10:00:40 [gpu_worker.py:1] Available KV cache memory: 4.2 GiB\n"
)


def _facts(text: str) -> dict:
    return read_facts(normalise(text))[0]


def test_each_memory_line_is_a_fact_with_its_number():
    assert dict(memory_facts("Model loading took 14.2500 GiB and 30.1 seconds")) == {"logged.weights_gib": 14.25}
    assert dict(memory_facts("GPU KV cache size: 420,880 tokens")) == {"logged.kv_cache_tokens": 420880}
    assert dict(memory_facts("Maximum concurrency for 32,768 tokens per request: 12.84x")) == {
        "logged.concurrency_len": 32768, "logged.max_concurrency": 12.84}
    # 0.34 logs the pool's name and both numbers on one line
    assert dict(memory_facts("CUDA KV cache size: 1,024 tokens, Maximum concurrency for 512 tokens per request: 2.00x")
                ) == {"logged.kv_cache_tokens": 1024, "logged.concurrency_len": 512, "logged.max_concurrency": 2.0}
    assert dict(memory_facts("# GPU blocks: 2427, # CPU blocks: 2048")) == {"logged.gpu_blocks": 2427,
                                                                        "logged.cpu_blocks": 2048}
    assert dict(memory_facts("# GPU blocks: 9180")) == {"logged.gpu_blocks": 9180}  # a line without CPU blocks
    assert dict(memory_facts("Graph capturing finished in 12 secs, took 0.53 GiB")) == {"logged.cuda_graph_gib": 0.53}
    assert dict(memory_facts("the current vLLM instance can use total_gpu_memory (79.15GiB) x gpu_memory_utilization "
                             "(0.90) = 71.24GiB")) == {"logged.total_gib": 79.15, "logged.gpu_memory_utilization": 0.9,
                                                       "logged.requested_gib": 71.24}
    assert dict(memory_facts("INFO Avg prompt throughput: 5.1 tokens/s")) == {}


def test_the_log_reader_keeps_the_memory_facts_and_the_utilization_passed():
    facts = _facts(STARTUP_0_25.replace("'max_model_len': 131072", "'gpu_memory_utilization': 0.85"))
    assert facts["logged.weights_gib"] == 14.25
    assert facts["logged.available_kv_gib"] == 4.2
    assert facts["serve.gpu_memory_utilization"] == 0.85


def test_kv_cache_too_small_names_the_length_that_fits_and_the_share_that_would_hold_the_request():
    log = STARTUP_0_25 + (
        "INFO 05-02 10:00:20 [gpu_worker.py:1] Free memory on device (79.2/79.25 GiB) on startup. Desired GPU memory "
        "utilization is (0.9, 71.32 GiB).\n"
        "ValueError: To serve at least one request with the models's max seq len (131072), (7.00 GiB KV cache is "
        "needed, which is larger than the available KV cache memory (4.20 GiB).\n")
    report = explain_text(log)
    primary = report.findings[0]
    assert report.extra["family"] == "kv_cache_too_small"
    # 4.20 of 7.00 GiB holds 78643 of the 131072 tokens; 2.80 GiB more on a 79.25 GiB GPU is 0.9 + 0.035 (+0.01)
    assert "about --max-model-len 78643 fits" in primary.cause
    assert "--gpu-memory-utilization 0.95 instead of 0.9 (as logged)" in primary.cause
    assert "the weights took 14.25 GiB" in primary.cause
    flags = {fix.flag for fix in primary.fixes}
    assert "--max-model-len 78643" in flags and "--gpu-memory-utilization 0.95" in flags


def test_a_share_that_cannot_hold_the_request_is_said_so():
    values = {"max_len": "131072", "needed": "40.0", "available": "2.0"}
    facts = {"logged.total_gib": 24.0, "logged.gpu_memory_utilization": 0.9}
    out = kv_fit_values(values, facts)
    assert out["fit_util"] == "0.98"
    assert "would not hold it" in out["fit_text"]
    assert "36.08 GiB short" in out["fit_util_text"]


def test_without_memory_lines_the_fit_values_are_absent_not_invented():
    assert kv_fit_values({"max_len": "4096"}, {}) == {}
    report = explain_text("ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB"
                          " KV cache is needed, which is larger than the available KV cache memory (0.71 GiB).")
    cause = report.findings[0].cause
    assert "GiB vLLM may use" not in cause and "instead of" not in cause
    assert "did not carry estimated" in cause
    # the length that fits is still the proportion the message itself gives: 0.71 / 16.00 of 131072
    assert "--max-model-len 5816" in {fix.flag for fix in report.findings[0].fixes}


def test_no_memory_left_names_the_weights_the_log_shows():
    report = explain_text("INFO 05-02 10:20:01 [gpu_model_runner.py:1] Model loading took 22.5 GiB memory and 3.1 "
                          "seconds\nValueError: No available memory for the cache blocks. Try increasing "
                          "`gpu_memory_utilization` when initializing the engine.")
    assert report.extra["family"] == "kv_cache_too_small"
    assert report.findings[0].title == "No memory is left for the KV cache after 22.5 GiB of weights"


def test_the_utilization_default_comes_from_the_release_when_the_args_do_not_set_it():
    log = STARTUP_0_25 + (
        "INFO 05-02 10:00:20 [gpu_worker.py:1] Free memory on device (23.4/23.57 GiB) on startup.\n"
        "ValueError: The model's max seq len (131072) is larger than the maximum number of tokens that can be stored in"
        " KV cache (78000).\n")
    cause = explain_text(log).findings[0].cause
    assert "vLLM 0.25.1's default" in cause
