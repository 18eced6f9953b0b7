"""The /metrics reader and the comparison on what a real vLLM 0.25.1 server on an H200 answered (recorded in
fixtures/server-0.25.1-h200, 2026-12-04): labels of another release than the CPU build's, read as they are."""

from __future__ import annotations

import pytest

from kvdoctor.verify.checked import from_facts
from kvdoctor.verify.compare import compare
from kvdoctor.verify.metrics import MetricsParseError, parse_metrics
from .verify_support import H200, h200_server as _h200_server


def test_the_h200_servers_cache_config_labels_are_read_as_the_release_has_them():
    metrics = parse_metrics((H200 / "metrics.txt").read_text())
    labels = metrics.cache_config
    assert (labels["cache_dtype"], labels["block_size"], labels["num_gpu_blocks"]) == ("fp8", "16", "5461")
    assert labels["kv_cache_size_tokens"] == "87376" and labels["kv_cache_memory_bytes"] == "268435456"
    assert labels["_block_size_resolved"] == "True"  # a 0.25.1 label the CPU build's 0.32.0 may name otherwise
    assert metrics.engines == 1 and metrics.kv_usage == {"vllm:kv_cache_usage_perc": 0.0}


def test_the_h200_server_matches_its_own_flags():
    argv = (H200 / "server-argv.txt").read_text().split()[1:]
    facts = {"vllm.version": "0.25.1", "serve.kv_cache_dtype": "fp8", "serve.max_model_len": 512,
             "serve.gpu_memory_utilization": 0.3, "serve.block_size": None, "serve.argv": argv}  # fmt: skip
    found = {c.field: c for c in compare(from_facts(facts, "check report r.json", "PASS"), _h200_server())}
    assert {f: c.status for f, c in found.items()} == {
        "health": "match", "vllm_version": "match", "model": "not_checked", "kv_cache_dtype": "match", "block_size": "not_checked",
        "max_model_len": "match", "gpu_memory_utilization": "match", "kv_cache_size_tokens": "not_checked",
        "completion": "match"}  # fmt: skip
    assert found["block_size"].note == "--block-size was not given at check: vLLM chose 16"


def test_a_default_kvdoctor_filled_in_is_not_compared_as_if_given():
    facts = {"vllm.version": "0.25.1", "serve.kv_cache_dtype": "fp8", "serve.gpu_memory_utilization": 0.9, "serve.argv": []}
    found = {c.field: c for c in compare(from_facts(facts, "check report r.json", "PASS"), _h200_server())}
    assert found["gpu_memory_utilization"].status == "not_checked"  # the server's 0.3 is shown, never a mismatch
    assert found["gpu_memory_utilization"].served == 0.3


@pytest.mark.parametrize("predicted, band_gib, status", [(87376, 0.0, "match"), (87000, 0.0, "mismatch"),
                                                         (87000, 0.01, "match"), (80000, 0.01, "mismatch")])  # fmt: skip
def test_kv_capacity_within_the_stated_band(predicted, band_gib, status):
    facts = {"vllm.version": "0.25.1", "serve.kv_cache_dtype": "fp8", "memory.kv_tokens": predicted,
             "memory.kv_budget_gib": 0.25, "memory.band_gib": band_gib, "serve.argv": []}  # fmt: skip
    (capacity,) = [c for c in compare(from_facts(facts, "r", "PASS"), _h200_server()) if c.field == "kv_cache_size_tokens"]
    assert (capacity.status, capacity.served) == (status, 87376)


def test_capacity_from_blocks_when_a_release_has_no_kv_cache_size_tokens_label():
    text = (H200 / "metrics.txt").read_text().replace('kv_cache_size_tokens="87376",', "")
    facts = {"vllm.version": "0.25.1", "memory.kv_tokens": 87376, "serve.argv": []}
    (capacity,) = [c for c in compare(from_facts(facts, "r", "PASS"), _h200_server(text)) if c.field == "kv_cache_size_tokens"]
    assert capacity.status == "match" and "num_gpu_blocks" in capacity.served_from


def test_a_label_the_release_lacks_is_not_exposed_never_assumed():
    text = (H200 / "metrics.txt").read_text().replace('cache_dtype="fp8",', "")
    facts = {"vllm.version": "0.25.1", "serve.kv_cache_dtype": "fp8", "serve.argv": []}
    found = {c.field: c for c in compare(from_facts(facts, "r", "PASS"), _h200_server(text))}
    assert found["kv_cache_dtype"].status == "not_exposed" and found["kv_cache_dtype"].severity == "warning"


def test_not_prometheus_text():
    with pytest.raises(MetricsParseError):
        parse_metrics("<html>not metrics</html>\n{")


@pytest.mark.parametrize("checked, model_dtype, status", [("auto", "fp8", "match"), ("auto", "bfloat16", "mismatch"),
                                                          ("float16", "fp8", "mismatch")])  # fmt: skip
def test_auto_is_the_model_dtype(checked, model_dtype, status):
    """vLLM's 'auto' KV dtype is the model's dtype: a bf16 model checked with auto and served with --kv-cache-dtype
    bfloat16 runs the same cache (here the H200 server's cache_dtype is fp8, standing in for the model dtype)."""
    facts = {"vllm.version": "0.25.1", "serve.kv_cache_dtype": checked, "model.dtype": model_dtype, "serve.argv": []}
    found = {c.field: c for c in compare(from_facts(facts, "r", "PASS"), _h200_server())}
    assert found["kv_cache_dtype"].status == status


@pytest.mark.parametrize("checked_model, status", [("Qwen/Qwen2.5-3B-Instruct", "not_checked"), ("STAGE/models/DENSE", "match"),
                                                   ("dense", "match")])  # fmt: skip
def test_models_by_name_only(checked_model, status):
    facts = {"vllm.version": "0.25.1", "model.model_id": checked_model, "serve.argv": []}
    (model,) = [c for c in compare(from_facts(facts, "r", "PASS"), _h200_server()) if c.field == "model"]
    assert (model.status, model.served, model.severity) == (status, "STAGE/models/dense", "info")
