"""What vLLM logs once the KV cache is sized differs between releases (data/kv_memory.yaml kv_cache.capacity_log):
0.10.2-0.20.0 count num_blocks // groups x block size, 0.20.1+ int(concurrency x max_model_len); two lines up to
0.27.1, one from 0.28.0, the device named from 0.30.0. The table is checked against every pack release's wheel at
hand or
fetched by range requests (its own kv_cache_utils.py), and each release's prediction renders its own lines."""

from __future__ import annotations

import pytest

from dryrun_support import release_sources
from kvdoctor.facts.kv_capacity import kv_table
from kvdoctor.vllm_pack.store import pack_releases
from test_memory import facts_for
from vllm_capacity_log_source import UTILS, capacity_log_from_source

TABLE = kv_table()["capacity_log"]


def test_every_pack_release_has_its_capacity_log():
    assert set(pack_releases()) <= set(TABLE["releases"])


@pytest.mark.parametrize("version", sorted(TABLE["releases"]))
def test_the_table_equals_the_releases_own_source(version):
    rule = TABLE["releases"][version]
    v0_file, _, v0_line = rule.get("v0_line", "").rpartition(":")
    sources = release_sources(version, (UTILS,) + ((v0_file,) if v0_file else ()))
    if rule.get("engine") == "v0":  # V1 opt-in there, if at all: no "KV cache size" line; V0's are not rendered
        if v0_file:  # V0's own line, where the table says
            logged = sources[v0_file].splitlines()[int(v0_line) - 1]
            assert '"# GPU blocks: %d, # CPU blocks: %d"' in logged, logged
        if "line" in rule:
            read = capacity_log_from_source(sources[UTILS])
            assert read["tokens"] is None and read["where"].endswith(f":{rule['line']}")
        return
    read = capacity_log_from_source(sources[UTILS])
    lines = [[template, list(args)] for template, args in TABLE["formats"][rule["format"]]]
    assert (read["lines"], read["tokens"], read["concurrency"]) == (lines, rule["tokens"], rule["concurrency"])
    assert read["where"] == ", ".join(f"{UTILS}:{n.strip()}" for n in rule["line"].split(","))


# Llama-3.1-8B: 131,072 bytes per token, 2 MiB blocks of 16; 1 GiB holds 512 blocks; 1,000 tokens take 63 blocks
SERVE = ["--kv-cache-memory-bytes", str(2**30), "--max-model-len", "1000"]


def test_each_release_renders_its_own_count_and_lines():
    old = facts_for(gpu="H100", vllm="0.20.0", serve=SERVE)
    assert old["memory.kv_tokens"] == 512 * 16
    assert old["memory.vllm_log"] == ("GPU KV cache size: 8,192 tokens; "
                                      "Maximum concurrency for 1,000 tokens per request: 8.13x")
    two_lines = facts_for(gpu="H100", vllm="0.25.1", serve=SERVE)
    assert two_lines["memory.kv_tokens"] == int(512 / 63 * 1000) == 8126
    assert two_lines["memory.vllm_log"] == ("GPU KV cache size: 8,126 tokens; "
                                            "Maximum concurrency for 1,000 tokens per request: 8.13x")
    one_line = facts_for(gpu="H100", vllm="0.29.0", serve=SERVE)
    assert one_line["memory.vllm_log"] == ("GPU KV cache size: 8,126 tokens, "
                                           "Maximum concurrency for 1,000 tokens per request: 8.13x")
    device = facts_for(gpu="H100", vllm="0.33.0", serve=SERVE)
    assert device["memory.vllm_log"] == one_line["memory.vllm_log"]


def test_the_oldest_releases_render_their_own_lines_or_none():
    if not {"0.7.3", "0.8.5.post1"} <= set(pack_releases()):
        pytest.skip("0.7.3 / 0.8.5.post1 are not in this knowledge pack")
    # 0.8.5: concurrency = num_blocks x block / max_model_len, not whole blocks per request
    unrounded = facts_for(gpu="H100", vllm="0.8.5.post1", serve=SERVE)
    assert unrounded["memory.max_concurrency"] == 8.19 and unrounded["memory.vllm_log"].endswith("request: 8.19x")
    # 0.7.3 runs V0 by default, whose lines are not rendered: none rather than another release's
    assert facts_for(gpu="H100", vllm="0.7.3", serve=SERVE)["memory.vllm_log"] is None


def test_sliding_window_counts_differ_most_between_the_two_formulas(tmp_path):
    # Gemma-2-style alternation: two groups; 0.20.0 logs num_blocks // 2 x 16, 0.20.1 the window-capped capacity
    serve = ["--kv-cache-memory-bytes", str(2**30), "--max-num-batched-tokens", "512"]
    old = facts_for(model=_gemma2(tmp_path), gpu="H100", vllm="0.20.0", serve=serve)
    new = facts_for(model=_gemma2(tmp_path), gpu="H100", vllm="0.20.1", serve=serve)
    blocks = 2**30 // (2 * 16 * 4 * 2 * 128 * 2)  # 2 layers per group x 16 tokens x 4 KV heads x K+V x 128 x bf16
    assert old["memory.kv_tokens"] == blocks // 2 * 16 == 131072
    per_request = 8192 // 16 + (-(-(512 - 1 + 512) // 16) + 1)  # full group 512 blocks, sliding group 65
    assert new["memory.kv_tokens"] == int(blocks / per_request * 8192) == 232613
    assert old["memory.max_concurrency"] == new["memory.max_concurrency"] == round(blocks / per_request, 2)


def _gemma2(tmp_path):
    import json

    model = tmp_path / "gemma2"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps({
        "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "hidden_size": 1024, "num_hidden_layers": 4,
        "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 4096,
        "vocab_size": 32000, "max_position_embeddings": 8192, "sliding_window": 512, "torch_dtype": "bfloat16"}))
    return model


def test_with_the_version_unknown_the_lines_are_not_guessed(run_cli):
    # 0.20.0 counts and prints differently from 0.28+: no single line to promise, and the note says how to get one
    from conftest import EXAMPLE_MODEL

    result = run_cli("check", "--model", str(EXAMPLE_MODEL), "--gpu", "A100", "--no-compile", "--format", "json", "--",
                     "--kv-cache-memory-bytes", "4G", "--max-model-len", "4000")  # fmt: skip
    report = result.json()
    assert report["facts"]["memory.fit"] == "fits" and report["facts"]["memory.vllm_log"] is None
    assert any("log it differently (pass --vllm-version" in note for note in report["notes"]), report["notes"]
