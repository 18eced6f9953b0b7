"""Rules over facts the pack reads from vLLM itself hold beyond the backend they were first seen with."""

import pytest


def _errors(run_cli, *args) -> tuple[dict, set[str]]:
    result = run_cli("check", "--model", "examples/qwen2.5-3b-instruct", "--no-compile", "-f", "json", *args)
    document = result.json()
    return document["facts"], {f["rule_id"] for f in document["findings"]
                               if f["severity"] == "error" and f["status"] == "fired"}  # fmt: skip


def test_e5m2_fails_with_any_backend_that_quantizes_queries_and_not_with_one_that_does_not(run_cli):
    # FlashInferImpl takes fp8 queries on SM100 only (its own supports_quant_query_input in 0.25.1)
    facts, errors = _errors(run_cli, "--kv-cache-dtype", "fp8_e5m2", "--gpu", "B200", "--vllm-version", "0.25.1")
    assert facts["attention.backend"] == "FLASHINFER" and facts["attention.quantizes_query"] is True
    assert "KVD118" in errors
    facts, errors = _errors(run_cli, "--kv-cache-dtype", "fp8_e4m3", "--gpu", "B200", "--vllm-version", "0.25.1")
    assert "KVD118" not in errors  # e4m3 is what the attention layer quantizes queries to
    facts, errors = _errors(run_cli, "--kv-cache-dtype", "fp8_e5m2", "--gpu", "H100", "--vllm-version", "0.25.1",
                            "--attention-backend", "FLASHINFER")  # fmt: skip
    assert facts["attention.quantizes_query"] is False and "KVD118" not in errors and "KVD114" in errors


@pytest.mark.parametrize("version", ["0.10.2", "0.12.0", "0.19.1"])
def test_turboquant_before_0_20_is_refused_on_every_old_release(run_cli, version):
    _, errors = _errors(run_cli, "--kv-cache-dtype", "turboquant_k8v4", "--gpu", "A100", "--vllm-version", version)
    assert "KVD105" in errors
