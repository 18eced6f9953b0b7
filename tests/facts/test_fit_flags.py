"""Malformed memory flags are bad input: `kvdoctor check` stops with one line and exit 2, as vLLM's own parser or
config would refuse them (data/serve_flags.yaml `valued`), never a PASS; well-formed values reach the serve facts."""

from __future__ import annotations

import pytest

from conftest import EXAMPLE_MODEL

QUICK = ["--gpu", "H100", "--vllm-version", "0.33.0", "--no-compile", "--format", "json"]


@pytest.mark.parametrize(
    ("flag", "value", "reason"),
    [
        ("--kv-cache-memory-bytes", "1Q", "is not a valid value"),  # vLLM: invalid human_readable_int value
        ("--gpu-memory-utilization", "1.5", "must be in (0, 1]"),  # CacheConfig: gt=0, le=1
        ("--cpu-offload-gb", "x", "is not a valid value"),  # argparse: invalid float value
        ("--cpu-offload-gb", "-1", "must be at least 0"),  # UVAOffloadConfig: ge=0
        ("--max-num-batched-tokens", "-3", "must be at least 1"),  # SchedulerConfig: ge=1
        ("--max-num-seqs", "0", "must be at least 1"),  # SchedulerConfig: ge=1
    ],
)
def test_a_malformed_memory_flag_is_one_line_and_exit_2(run_cli, flag, value, reason):
    result = run_cli("check", *QUICK, "--", "vllm", "serve", str(EXAMPLE_MODEL), flag, value)
    assert result.code == 2 and result.stdout == "", result
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) <= 2 and f"serve flag {flag} '{value}': {reason}" in lines[0], lines
    assert "PASS" not in result.stderr and "Traceback" not in result.stderr


def test_well_formed_memory_flags_reach_the_serve_facts(run_cli):
    result = run_cli("check", *QUICK, "--", "vllm", "serve", str(EXAMPLE_MODEL), "--kv-cache-memory-bytes", "4G",
                     "--max-num-batched-tokens", "8k", "--max-num-seqs", "64", "--cpu-offload-gb", "0.5",
                     "--max-model-len", "4096")  # fmt: skip
    facts = result.json()["facts"]
    assert facts["serve.kv_cache_memory_bytes"] == 4 * 2**30 and facts["serve.max_num_batched_tokens"] == 8000
    assert facts["serve.max_num_seqs"] == 64 and facts["serve.cpu_offload_gb"] == 0.5
    assert facts["memory.kv_budget_bytes"] == 4 * 2**30  # vLLM skips profiling and takes the bytes as given


def test_zero_kv_cache_memory_bytes_is_vllms_profiling_not_an_error(run_cli):
    result = run_cli("check", *QUICK, "--", "vllm", "serve", str(EXAMPLE_MODEL), "--kv-cache-memory-bytes", "0",
                     "--max-model-len", "4096")  # fmt: skip
    assert result.code in (0, 1), result  # gpu_worker.py:688 (0.34.0): a falsy value profiles as without the flag
    assert "--kv-cache-memory-bytes" not in result.json()["facts"]["memory.kv_budget_source"]


def test_memory_flags_from_a_config_file_size_the_budget(run_cli, tmp_path):
    # vLLM's --config YAML sets the same options; the fit reads the parsed serve record, not the argv again
    config = tmp_path / "serve.yaml"
    config.write_text("kv-cache-memory-bytes: 3G\nmax-num-seqs: 32\ngpu-memory-utilization: 0.5\n")
    result = run_cli("check", *QUICK, "--", "vllm", "serve", str(EXAMPLE_MODEL), "--config", str(config),
                     "--max-model-len", "4096")  # fmt: skip
    facts = result.json()["facts"]
    assert facts["serve.kv_cache_memory_bytes"] == 3 * 2**30
    assert facts["memory.kv_budget_bytes"] == 3 * 2**30 and "--kv-cache-memory-bytes" in facts["memory.kv_budget_source"]


def test_without_the_flag_the_releases_own_utilization_applies(run_cli):
    result = run_cli("check", *QUICK, "--", "vllm", "serve", str(EXAMPLE_MODEL), "--max-model-len", "4096")
    facts = result.json()["facts"]
    assert facts["serve.gpu_memory_utilization"] is None  # not given: 0.33.0's default (0.92), not a guessed 0.9
    assert "0.92" in facts["memory.kv_budget_source"]
