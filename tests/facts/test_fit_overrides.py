"""What the serve command changes in vLLM's HF config and budget before the KV cache is sized (issue 24, round 2):
--hf-overrides / --rope-scaling in the context-length derivation per release, --cpu-offload-gb and
--kv-offloading-size in the budget, and a release outside the knowledge pack (undecided, said in words, never a
PASS). Sources: data/kv_memory.yaml context_length.overrides, budget.kv_offloading; docs/fit.md."""

from __future__ import annotations

import json

import pytest

from conftest import CONFIGS
from kvdoctor.check.run import derived_facts
from kvdoctor.facts.collect import CheckOptions, collect_facts

GIB = 2**30
YARN = '{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}'
QWEN3 = {  # Qwen3-32B's length keys and shapes (the public start-up log's model: tests/fixtures/startup_logs)
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 5120, "num_hidden_layers": 64,
    "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 25600,
    "vocab_size": 151936, "max_position_embeddings": 40960, "rope_theta": 1000000, "rope_scaling": None,
    "torch_dtype": "bfloat16",
}  # fmt: skip


def flat_for(tmp_path, config: dict, *, gpu="H100", vllm="0.33.0", serve=(), environ=None):
    model = tmp_path / config["architectures"][0]
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps(config))
    argv = ("vllm", "serve", str(model), *serve)
    return derived_facts(collect_facts(CheckOptions(serve_argv=argv, gpu=gpu, vllm_version=vllm, offline=True,
                                                    resolve_kernels=False, environ=environ or {})))  # fmt: skip


def test_rope_scaling_flag_on_0_10_2_lengthens_the_context_as_vllm_0_10_did(tmp_path):
    """0.10.x merges --rope-scaling into the HF overrides; its _get_and_verify_max_len restarts YaRN from
    original_max_position_embeddings and multiplies: 32,768 x 4 = 131,072 (the public Qwen3-32B log started)."""
    flat = flat_for(tmp_path, QWEN3, vllm="0.10.2", serve=("--max-model-len", "131072", "--rope-scaling", YARN,
                                                           "--kv-cache-memory-bytes", "40G"))  # fmt: skip
    assert flat["context.derived_max"] == 131072 and flat["context.error"] == "none"
    assert flat["context.max_model_len"] == 131072 and flat["memory.fit"] == "fits"
    without = flat_for(tmp_path, QWEN3, vllm="0.10.2", serve=("--max-model-len", "131072"))
    assert without["context.derived_max"] == 40960 and "(131072) is greater than" in without["context.error"]


@pytest.mark.parametrize(("vllm", "derived"), [("0.23.0", 131072), ("0.26.0", 131072), ("0.33.0", 40960),
                                               ("0.34.0", 40960)])  # fmt: skip
def test_hf_overrides_rope_scaling_follows_each_releases_yarn_rule(tmp_path, vllm, derived):
    """The same override on each side of vLLM's change: 0.23-0.26 multiply YaRN's original length, 0.33+ take
    max_position_embeddings as already scaled, so the override alone leaves 40,960 there (vLLM's own error)."""
    overrides = f'{{"rope_scaling": {YARN}}}'
    flat = flat_for(tmp_path, QWEN3, vllm=vllm, serve=("--max-model-len", "131072", "--hf-overrides", overrides))
    assert flat["context.derived_max"] == derived
    assert (flat["context.error"] == "none") == (derived == 131072), flat["context.error"]


def test_hf_overrides_max_position_embeddings_is_a_length_key(tmp_path):
    overrides = f'{{"rope_scaling": {YARN}, "max_position_embeddings": 131072}}'
    flat = flat_for(tmp_path, QWEN3, vllm="0.33.0", serve=("--max-model-len", "131072", "--hf-overrides", overrides,
                                                           "--kv-cache-memory-bytes", "40G"))  # fmt: skip
    assert flat["context.derived_max"] == 131072 and flat["memory.fit"] == "fits"
    assert "max_position_embeddings=131072.0" not in str(flat["context.error"])


def test_dotted_hf_overrides_are_nested_as_vllms_parser_does(tmp_path):
    """--hf-overrides.max_position_embeddings 128K (FlexibleArgumentParser: dotted keys into the dict, values as JSON
    or human-readable ints): the derived length follows it."""
    flat = flat_for(tmp_path, QWEN3, vllm="0.33.0", serve=("--max-model-len", "131072",
                                                           "--hf-overrides.max_position_embeddings", "128K"))
    assert flat["context.derived_max"] == 131072 and flat["context.error"] == "none"


def test_top_level_overrides_do_not_reach_a_nested_text_config(tmp_path):
    """vLLM applies --hf-overrides to the top-level config: a VLM's text config changes only through its own key."""
    vl = json.loads((CONFIGS / "qwen2-vl-7b-instruct.json").read_text())
    top = flat_for(tmp_path, vl, serve=("--max-model-len", "65536", "--hf-overrides",
                                        '{"max_position_embeddings": 65536}'))  # fmt: skip
    assert top["model.text_config_key"] == "text_config" and top["context.derived_max"] == 32768
    nested = flat_for(tmp_path, vl, serve=("--max-model-len", "65536", "--hf-overrides",
                                           '{"text_config": {"max_position_embeddings": 65536}}'))  # fmt: skip
    assert nested["context.derived_max"] == 65536 and nested["context.error"] == "none"


@pytest.mark.parametrize(
    ("flag", "value", "reason"),
    [("--hf-overrides", '{"rope_scaling": {"rope_type": yarn}}', "is not valid JSON"),
     ("--hf-overrides", "[1, 2]", "must be a JSON object"),
     ("--rope-scaling", "{'rope_type': 'yarn'}", "is not valid JSON")],
)
def test_malformed_json_in_an_override_flag_is_one_line_and_exit_2(run_cli, tmp_path, flag, value, reason):
    model = tmp_path / "qwen3"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(QWEN3))
    result = run_cli("check", "--gpu", "H100", "--vllm-version", "0.10.2", "--no-compile", "--", "vllm", "serve",
                     str(model), flag, value)  # fmt: skip
    assert result.code == 2 and result.stdout == "", result
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"serve flag {flag} {value!r}: {reason}" in lines[0], lines
    assert "Traceback" not in result.stderr


def test_cpu_offload_gb_moves_weights_off_each_rank(tmp_path):
    llama = json.loads((CONFIGS / "llama-3.1-8b-instruct.json").read_text())
    base = flat_for(tmp_path, llama, serve=("--max-model-len", "8192"))
    off = flat_for(tmp_path, llama, serve=("--max-model-len", "8192", "--cpu-offload-gb", "4"))
    assert base["memory.weights_bytes"] - off["memory.weights_bytes"] == 4 * GIB  # UVAOffloadConfig: per GPU
    assert off["memory.kv_budget_bytes"] - base["memory.kv_budget_bytes"] == 4 * GIB
    assert "--cpu-offload-gb 4 moved to CPU" in off["memory.kv_budget_source"]
    tp2 = flat_for(tmp_path, llama, serve=("--max-model-len", "8192", "--cpu-offload-gb", "4", "-tp", "2"))
    base2 = flat_for(tmp_path, llama, serve=("--max-model-len", "8192", "-tp", "2"))
    assert base2["memory.weights_bytes"] - tp2["memory.weights_bytes"] == 4 * GIB  # per rank, not split


def test_kv_offloading_adds_cpu_blocks_and_leaves_the_gpu_budget(tmp_path):
    llama = json.loads((CONFIGS / "llama-3.1-8b-instruct.json").read_text())
    base = flat_for(tmp_path, llama, serve=("--max-model-len", "8192"))
    off = flat_for(tmp_path, llama, serve=("--max-model-len", "8192", "--kv-offloading-size", "16"))
    assert off["memory.fit"] == base["memory.fit"] == "fits"
    assert off["memory.kv_budget_bytes"] == base["memory.kv_budget_bytes"] and off["memory.kv_tokens"] == base["memory.kv_tokens"]
    assert "--kv-offloading-size 16 GiB adds CPU blocks" in off["memory.kv_budget_source"]
    # sliding-window layers: the native OffloadingConnector keeps the hybrid KV cache manager (SupportsHMA) in the
    # releases read, so Gemma-2 is sized as without it; with the simple connector it was not read: undecided
    gemma = json.loads((CONFIGS / "gemma-2-9b-it.json").read_text())
    native = flat_for(tmp_path, gemma, serve=("--max-model-len", "4096", "--kv-offloading-size", "16"))
    plain = flat_for(tmp_path, gemma, serve=("--max-model-len", "4096"))
    assert native["memory.kv_tokens"] == plain["memory.kv_tokens"] and native["memory.fit"] == plain["memory.fit"]
    simple = flat_for(tmp_path, gemma, serve=("--max-model-len", "4096", "--kv-offloading-size", "16"),
                      environ={"VLLM_USE_SIMPLE_KV_OFFLOAD": "1"})  # fmt: skip
    assert simple["memory.fit"] == "not_modelled" and "VLLM_USE_SIMPLE_KV_OFFLOAD" in simple["memory.why_not"]
    older = flat_for(tmp_path, gemma, vllm="0.20.0", serve=("--max-model-len", "4096", "--kv-offloading-size", "16"))
    assert older["memory.fit"] == "not_modelled" and "vLLM 0.20.0" in older["memory.why_not"]


@pytest.mark.parametrize("version", ["0.10.1", "0.11.1"])
def test_a_release_outside_the_pack_is_undecided_in_words_and_no_fit_rule_passes(run_cli, tmp_path, version):
    model = tmp_path / "qwen3"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps(QWEN3))
    result = run_cli("check", "--gpu", "H100", "--vllm-version", version, "--no-compile", "--format", "json", "--",
                     "vllm", "serve", str(model), "--max-model-len", "4096")  # fmt: skip
    report = result.json()
    facts = report["facts"]
    assert facts["memory.fit"] is None and f"vLLM {version} is not among the releases" in facts["memory.why_not"]
    assert report["fit"]["judged"] is False and report["fit"]["why_not"] == facts["memory.why_not"]
    assert any(facts["memory.why_not"] in note for note in report["notes"])
    from kvdoctor.rules import load_all_rules
    from kvdoctor.rules.conditions import UNKNOWN

    fit_rules = [r for r in load_all_rules() if r.origin.endswith("check-fit.yaml")]
    assert len(fit_rules) >= 5
    for rule in fit_rules:  # False would be a pass: every fit rule's condition stays unknown ...
        if rule.when.evaluate({"vllm.version": version}) is False:
            continue  # ... but those about candidate releases disagreeing (KVD184): a named release is one answer
        assert rule.when.evaluate(facts) is UNKNOWN, rule.id


def test_skip_layers_keep_the_model_dtype_page_per_release(tmp_path):
    """Skipped layers take kv_cache_dtype 'auto' (attention.py:333 in 0.34.0): with an 'auto' cache nothing changes;
    with fp8 the skipped layer's page is bf16's (Llama-3.1-8B: 31 x 2,048 + 4,096 B per token), and from 0.25.1 the
    block rises until an fp8 page covers a bf16 one at FlashAttention's kernel block (16 -> 32); 0.23.0 keeps 16.
    The block and pool bytes equal vLLM's own code: tests/facts/test_fit_vllm_cpu.py."""
    llama = json.loads((CONFIGS / "llama-3.1-8b-instruct.json").read_text())
    plain = flat_for(tmp_path, llama, serve=("--max-model-len", "8192"))
    skip = flat_for(tmp_path, llama, serve=("--max-model-len", "8192", "--kv-cache-dtype-skip-layers", "0"))
    assert skip["memory.fit"] == plain["memory.fit"] == "fits" and skip["memory.kv_tokens"] == plain["memory.kv_tokens"]
    fp8 = ("--max-model-len", "8192", "--kv-cache-dtype", "fp8", "--kv-cache-memory-bytes", "4G")
    one = flat_for(tmp_path, llama, serve=(*fp8, "--kv-cache-dtype-skip-layers", "0"))
    assert one["memory.fit"] == "fits" and one["memory.kv_bytes_per_token"] == 31 * 2048 + 4096
    assert one["memory.block_size"] == 32
    three = flat_for(tmp_path, llama, serve=(*fp8, "--kv-cache-dtype-skip-layers", "0", "5", "31"))
    assert three["memory.kv_bytes_per_token"] == 29 * 2048 + 3 * 4096
    old = flat_for(tmp_path, llama, vllm="0.23.0", serve=(*fp8, "--kv-cache-dtype-skip-layers", "0"))
    assert old["memory.block_size"] == 16 and old["memory.kv_bytes_per_token"] == 31 * 2048 + 4096
    for vllm, serve, words in [
        ("0.24.0", (*fp8, "--kv-cache-dtype-skip-layers", "0"), "not read"),
        ("0.33.0", (*fp8, "--kv-cache-dtype-skip-layers", "sliding_window"), "by attention type"),
    ]:
        flat = flat_for(tmp_path, llama, vllm=vllm, serve=serve)
        assert flat["memory.fit"] == "not_modelled" and words in flat["memory.why_not"], flat["memory.why_not"]
    gemma = json.loads((CONFIGS / "gemma-2-9b-it.json").read_text())
    sliding = flat_for(tmp_path, gemma, serve=("--max-model-len", "4096", "--kv-cache-dtype", "fp8",
                                               "--kv-cache-dtype-skip-layers", "0"))  # fmt: skip
    assert sliding["memory.fit"] == "not_modelled" and "sliding-window" in sliding["memory.why_not"]
