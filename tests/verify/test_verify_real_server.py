"""kvdoctor verify against real vLLM servers (the CPU build, tests/verify/conftest.py), through the CLI as a user
runs it: a match exits 0, each mismatched field exits 1 naming both values, no server or a refused key exits 2,
a completion that errors exits 1."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from .verify_support import kvdoctor


def test_the_server_that_was_checked_passes(plain_server, check_report, tmp_path):
    report = check_report(*plain_server.flags)
    done = kvdoctor("verify", plain_server.url, "--report", str(report), "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["verdict"] == "PASS"
    status = {c["field"]: c["status"] for c in result["comparisons"]}
    assert status | {"kv_cache_size_tokens": "-", "gpu_memory_utilization": "-"} == {
        "health": "match", "vllm_version": "match", "model": "match", "kv_cache_dtype": "match", "block_size": "match",
        "max_model_len": "match", "kv_cache_size_tokens": "-", "gpu_memory_utilization": "-", "completion": "match"}
    server = result["server"]
    assert server["version"] == "0.32.0"
    assert server["cache_config"]["cache_dtype"] == "auto" and server["cache_config"]["block_size"] == "128"
    done_completion = server["completion"]
    assert done_completion["ok"] and done_completion["completion_tokens"] == 4
    assert len(done_completion["token_ids"]) == 4 and done_completion["text"] == ""  # --skip-tokenizer-init: ids, no text
    assert 0 < done_completion["ttft_s"] <= done_completion["total_s"]


def test_the_same_flags_as_check_instead_of_a_report(plain_server, tmp_path):
    done = kvdoctor("verify", plain_server.url, "--model", str(plain_server.model), "--vllm-version", "0.32.0",
                    *plain_server.flags, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("PASS  kvdoctor verify: vLLM 0.32.0 at http://127.0.0.1:")
    assert "completion: 4 token(s) back" in done.stdout


def test_a_pasted_serve_command_as_check_takes_it(keyed_server, tmp_path):
    done = kvdoctor("verify", keyed_server.url, "--vllm-version", "0.32.0", "--", "vllm", "serve", str(keyed_server.model),
                    *keyed_server.flags, cwd=tmp_path, env={"KVDOCTOR_API_KEY": keyed_server.api_key})  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "kv_cache_dtype: checked 'bfloat16', server 'bfloat16' (matches)" in done.stdout
    assert "Sent  Authorization: Bearer <from $KVDOCTOR_API_KEY>" in done.stdout


def test_another_kv_dtype_block_size_and_max_model_len_than_checked_fail_naming_both_values(
        keyed_server, plain_server, check_report, tmp_path):  # fmt: skip
    report = check_report(*plain_server.flags)  # checked: auto (float16), 128, 512; keyed: bfloat16, 32, 256
    key = tmp_path / "key"
    key.write_text(keyed_server.api_key + "\n")
    done = kvdoctor("verify", keyed_server.url, "--report", str(report), "--api-key-file", str(key), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith("FAIL  kvdoctor verify")
    assert "3 mismatches (kv_cache_dtype, block_size, max_model_len)" in done.stdout
    assert "kv_cache_dtype: checked 'auto', server 'bfloat16' (MISMATCH)" in done.stdout
    assert "block_size: checked 128, server 32 (MISMATCH)" in done.stdout
    assert "max_model_len: checked 512, server 256 (MISMATCH)" in done.stdout
    assert "vllm:cache_config_info{cache_dtype}" in done.stdout  # each verdict cites where it read the value


@pytest.mark.parametrize("field, flags, line", [
    ("kv_cache_dtype", ("--kv-cache-dtype", "bfloat16"), "kv_cache_dtype: checked 'bfloat16', server 'auto'"),
    ("block_size", ("--block-size", "32"), "block_size: checked 32, server 128"),
    ("max_model_len", ("--max-model-len", "1024"), "max_model_len: checked 1024, server 512"),
])  # fmt: skip
def test_each_field_alone(plain_server, check_report, tmp_path, field, flags, line):
    report = check_report(*_with(plain_server.flags, *flags))
    done = kvdoctor("verify", plain_server.url, "--report", str(report), "--format", "junit", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    suite = ET.fromstring(done.stdout).find("testsuite")
    failed = {c.get("name"): c.find("failure").get("message") for c in suite if c.find("failure") is not None}
    assert list(failed) == [field] and failed[field].startswith(line)


def _with(flags: tuple[str, ...], name: str, value: str) -> tuple[str, ...]:
    """The flags with `name`'s value replaced, or `name value` added."""
    if name not in flags:
        return (*flags, name, value)
    at = flags.index(name)
    return (*flags[: at + 1], value, *flags[at + 2 :])


@pytest.mark.parametrize("kv_bytes, status, code", [(1 << 30, "match", 0), (1 << 29, "mismatch", 1)])
def test_kv_capacity_check_predicted_against_the_servers_kv_cache_size_tokens(keyed_server, check_report, tmp_path,
                                                                              kv_bytes, status, code):  # fmt: skip
    """The server has 1 GiB of KV memory (VLLM_CPU_KVCACHE_SPACE=1); a check told the same budget
    (--kv-cache-memory-bytes) predicts vLLM's 'KV cache size' exactly (band 0 GiB), half of it predicts half."""
    report = check_report(*keyed_server.flags, "--kv-cache-memory-bytes", str(kv_bytes), "--gpu", "A100")
    done = kvdoctor("verify", keyed_server.url, "--report", str(report), "--format", "json", cwd=tmp_path,
                    env={"KVDOCTOR_API_KEY": keyed_server.api_key})  # fmt: skip
    assert done.returncode == code, done.stdout + done.stderr
    (capacity,) = [c for c in json.loads(done.stdout)["comparisons"] if c["field"] == "kv_cache_size_tokens"]
    assert (capacity["status"], capacity["served"]) == (status, 2_097_152)
    assert capacity["checked"] == 2_097_152 * kv_bytes // (1 << 30)


def test_the_key_decides_between_0_and_2(keyed_server, check_report, tmp_path):
    report = check_report(*keyed_server.flags)
    without = kvdoctor("verify", keyed_server.url, "--report", str(report), cwd=tmp_path)
    assert without.returncode == 2, without.stdout + without.stderr
    assert without.stderr.startswith("kvdoctor: error: ") and without.stderr.count("\n") == 1
    assert "401 Unauthorized (no API key was sent)" in without.stderr and "Traceback" not in without.stderr
    with_key = kvdoctor("verify", keyed_server.url, "--report", str(report), "--api-key-env", "SERVER_KEY",
                        "--format", "json", cwd=tmp_path, env={"SERVER_KEY": keyed_server.api_key})  # fmt: skip
    assert with_key.returncode == 0, with_key.stdout + with_key.stderr
    assert keyed_server.api_key not in with_key.stdout + with_key.stderr  # never printed, never in the report
    assert json.loads(with_key.stdout)["headers_sent"] == ["Authorization: Bearer <from $SERVER_KEY>"]


def test_a_completion_that_errors_fails(plain_server, check_report, tmp_path):
    report = check_report(*plain_server.flags)
    done = kvdoctor("verify", plain_server.url, "--report", str(report), "--max-tokens", "1000", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "completion: failed: HTTP 400: " in done.stdout
    assert "1 mismatch (completion)" in done.stdout


def test_a_text_prompt_on_a_server_without_tokenizer_fails_with_the_servers_words(plain_server, check_report, tmp_path):
    report = check_report(*plain_server.flags)
    done = kvdoctor("verify", plain_server.url, "--report", str(report), "--prompt", "hi", "--format", "github", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "::error title=kvdoctor verify%3A completion::completion: failed: HTTP 4" in done.stdout


def test_markdown_summary(plain_server, check_report, tmp_path):
    done = kvdoctor("verify", plain_server.url, "--report", str(check_report(*plain_server.flags)), "--format",
                    "markdown", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("### ✅ kvdoctor verify: **PASS**")
    assert "| kv_cache_dtype | ✅ match | `auto` | `auto` | `GET /metrics vllm:cache_config_info{cache_dtype}` |" in done.stdout
