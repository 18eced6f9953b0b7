"""Will it fit: context length, KV pages and capacity, the checkpoint's size, and the check's verdicts."""

from __future__ import annotations

import json
import struct

from conftest import CONFIGS, EXAMPLE_MODEL
from kvdoctor.facts.collect import CheckOptions, collect_facts
from kvdoctor.facts.context_length import derive_context_length, variants_for
from kvdoctor.facts.derive import derive_kv_facts
from kvdoctor.facts.kv_capacity import judge_fit, layer_specs, not_enough_message, plan_groups, turboquant_slot_bytes
from kvdoctor.facts.probes.model_memory import checkpoint_bytes
from kvdoctor.data.turboquant import presets

LLAMA = CONFIGS / "llama-3.1-8b-instruct.json"
GIB = 2**30


def facts_for(model=LLAMA, gpu="L4", vllm="0.33.0", serve=(), kv="auto"):
    facts = collect_facts(CheckOptions(model=str(model), gpu=gpu, vllm_version=vllm, serve_argv=tuple(serve),
                                       kv_cache_dtype=kv, offline=True, resolve_kernels=False, environ={}))  # fmt: skip
    return facts.flat() | derive_kv_facts(facts)


def test_the_issue_case_llama_8b_on_l4_at_131072_says_vllms_words():
    flat = facts_for()
    assert flat["context.max_model_len"] == 131072
    assert flat["memory.fit"] == "does_not_fit"
    assert flat["memory.error"].startswith(
        "To serve at least one request with the model's max seq len (131072), (16.0 GiB KV cache is needed, "
        "which is larger than the available KV cache memory (")
    assert "the estimated maximum model length is" in flat["memory.error"]
    assert flat["memory.kv_bytes_per_token"] == 32 * 8 * 128 * 2 * 2


def test_beyond_the_models_positions_is_vllms_error_unless_the_env_allows_it():
    flat = facts_for(gpu="H100", serve=["--max-model-len", "200000"])
    assert flat["context.error"].startswith("User-specified max_model_len (200000) is greater than the derived "
                                            "max_model_len (max_position_embeddings=131072.0 or model_max_length=None")
    assert flat["context.max_model_len"] is None
    allowed = facts_for(gpu="H100", serve=["VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", "vllm", "serve", "--max-model-len", "200000"])
    assert allowed["context.error"] == "none" and allowed["context.allowed_by_env"] is True


def test_yarn_factor_differs_between_the_releases_read():
    keys = {"max_position_embeddings": 32768}
    rope = [{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}]
    legacy = derive_context_length(keys, rope, "qwen2", None, False, "legacy")
    new = derive_context_length(keys, rope, "qwen2", None, False, "yarn_already_scaled")
    assert (legacy.max_model_len, new.max_model_len) == (131072, 32768)
    assert variants_for("0.25.1") == ("legacy",) and variants_for("0.33.0") == ("yarn_already_scaled",)
    assert set(variants_for("0.29.0")) == {"legacy", "yarn_already_scaled"}  # not read: both, decided only if they agree


def test_h200_real_startup_capacity_is_reproduced():
    # vLLM 0.25.1 on an H200 (/work/shared/real-vllm/server-0.25.1-h200): 6 layers, 2 KV heads, head_dim 128, fp8 KV,
    # --kv-cache-memory-bytes 268435456 logged "GPU KV cache size: 87,376 tokens"
    specs = layer_specs(["full"] * 6, num_kv_heads=2, head_dim=128, kv_bytes=1, is_mla=False, tensor_parallel_size=1,
                        window=None, kv_cache_dtype="fp8", model_dtype_bytes=2)  # fmt: skip
    fit = judge_fit(plan_groups(specs, 16), 268435456, 512, 8192, False)
    assert fit.fits and fit.tokens == 87376


def test_tensor_parallel_splits_kv_heads_and_replicates_past_them():
    one = layer_specs(["full"] * 2, num_kv_heads=8, head_dim=128, kv_bytes=2, is_mla=False, tensor_parallel_size=1,
                      window=None, kv_cache_dtype="auto", model_dtype_bytes=2)  # fmt: skip
    four = layer_specs(["full"] * 2, num_kv_heads=8, head_dim=128, kv_bytes=2, is_mla=False, tensor_parallel_size=4,
                       window=None, kv_cache_dtype="auto", model_dtype_bytes=2)  # fmt: skip
    sixteen = layer_specs(["full"] * 2, num_kv_heads=8, head_dim=128, kv_bytes=2, is_mla=False, tensor_parallel_size=16,
                          window=None, kv_cache_dtype="auto", model_dtype_bytes=2)  # fmt: skip
    assert [s.page_bytes_per_token for s in (one[0], four[0], sixteen[0])] == [4096, 1024, 512]


def test_turboquant_pages_and_native_boundary_layers():
    assert turboquant_slot_bytes(presets()["turboquant_4bit_nc"], 128) == 134  # 64 + 2 + 64 + 4
    assert turboquant_slot_bytes(presets()["turboquant_k8v4"], 128) == 196  # 128 + 64 + 4
    specs = layer_specs(["full"] * 8, num_kv_heads=2, head_dim=128, kv_bytes=2, is_mla=False, tensor_parallel_size=1,
                        window=None, kv_cache_dtype="turboquant_4bit_nc", model_dtype_bytes=2)  # fmt: skip
    assert [s.page_bytes_per_token for s in specs] == [1024, 1024] + [268] * 4 + [1024, 1024]
    plan = plan_groups(specs, 16)
    assert plan.bytes_per_block == 16 * (4 * 1024 + 4 * 268)  # one group, pages summed (UniformTypeKVCacheSpecs)


def test_mla_caches_one_latent_head():
    flat = facts_for(model=CONFIGS / "deepseek-v2-lite.json", gpu="H100", serve=["--max-model-len", "4096"])
    assert flat["memory.kv_bytes_per_token"] == 27 * (512 + 64) * 2


def test_not_enough_message_without_an_estimate():
    specs = layer_specs(["full"] * 2, num_kv_heads=1, head_dim=64, kv_bytes=2, is_mla=False, tensor_parallel_size=1,
                        window=None, kv_cache_dtype="auto", model_dtype_bytes=2)  # fmt: skip
    plan = plan_groups(specs, 16)
    fit = judge_fit(plan, plan.bytes_per_block, 1024, 2048, True)  # all of it is the null block
    assert fit.no_memory and "No available memory for the cache blocks" in not_enough_message(fit, 1024)


def _safetensors(path, tensors):
    header, offset = {}, 0
    for name, (dtype, shape, nbytes) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)


def test_weights_bytes_from_local_headers_and_index(tmp_path):
    from kvdoctor.model.facts import ModelFacts

    _safetensors(tmp_path / "model-1.safetensors", {"a": ("BF16", [4, 4], 32), "b": ("BF16", [8], 16)})
    _safetensors(tmp_path / "model-2.safetensors", {"c": ("F32", [2], 8)})
    model = ModelFacts(source=str(tmp_path / "config.json"), model_id="x")
    assert checkpoint_bytes(model, tmp_path, offline=True, cache_dir=None)[0] == 56
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 123}}))
    assert checkpoint_bytes(model, tmp_path, offline=True, cache_dir=None) == (123, "model.safetensors.index.json total_size")


def test_without_a_checkpoint_the_weights_are_estimated_and_the_band_widens():
    flat = facts_for(gpu="H100", serve=["--max-model-len", "8192"])
    assert flat["checkpoint.weights_bytes"] is None and flat["memory.weights_estimated"] is True
    assert 14.9 * GIB < flat["memory.weights_bytes"] < 15.0 * GIB  # 8.03B parameters x 2 bytes
    from kvdoctor.facts.memory_budget import budget_table

    table = budget_table()  # the band grows by the estimate's share of the weights, on top of the modelled terms'
    assert flat["memory.band_gib"] >= table["band_min_gib"] + table["estimated_weights_band_share"] * 14.9 - 0.01


def test_exact_budget_has_no_band_and_the_fit_is_exact():
    flat = facts_for(model=EXAMPLE_MODEL, gpu="H100", serve=["--kv-cache-memory-bytes", "1G", "--max-model-len", "4096"])
    assert flat["memory.band_gib"] == 0 and flat["memory.fit"] == "fits"
    # Qwen2.5-3B: 36 layers x 2 KV heads x 128 x 2 x 2 bytes; block 16: 1 GiB // (36 x 16 x 1024) blocks x 16
    assert flat["memory.kv_tokens"] == (GIB // (36 * 16 * 1024)) * 16


def test_jamba_is_sized_with_its_mamba_state_and_other_hybrids_are_said_not_modelled(tmp_path):
    flat = facts_for(model=CONFIGS / "jamba-v0.1.json", gpu="H200", serve=["--max-model-len", "65536"])  # 52B
    kinds = flat["model.layer_kinds"]
    assert kinds.count("full") == 4 and kinds[4] == "full" and kinds.count("state") == 28  # 1 in 8 from layer 4
    assert flat["memory.fit"] in ("fits", "within_band", "does_not_fit")
    config = json.loads((CONFIGS / "jamba-v0.1.json").read_text()) | {"architectures": ["BambaForCausalLM"],
                                                                     "model_type": "bamba"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    other = facts_for(model=tmp_path, gpu="H100")
    assert other["memory.fit"] == "not_modelled" and "Mamba" in other["memory.why_not"]


def test_gemma2_slides_every_other_layer_from_layer_0():
    flat = facts_for(model=CONFIGS / "gemma-2-9b-it.json", gpu="H100", serve=["--max-model-len", "8192"])
    kinds = flat["model.layer_kinds"]
    assert kinds[:4] == ["sliding", "full", "sliding", "full"] and len(kinds) == 42
    assert flat["memory.fit"] == "fits"


def test_model_max_length_overrides_and_gemma3_skips_the_factor():
    keys = {"max_position_embeddings": 8192, "model_max_length": 131072}
    assert derive_context_length(keys, [], "cohere", None, False, "legacy").max_model_len == 131072
    rope = [{"rope_type": "linear", "factor": 8.0}]
    assert derive_context_length({"max_position_embeddings": 131072}, rope, "gemma3_text", None, False,
                                 "legacy").max_model_len == 131072
    assert derive_context_length({"max_position_embeddings": 4096}, rope, "llama", None, False,
                                 "legacy").max_model_len == 32768
    assert derive_context_length({}, [], "x", None, False, "legacy").max_model_len == 2048  # no key: vLLM's default


def test_fixes_are_recomputed():
    flat = facts_for(model=EXAMPLE_MODEL, gpu="H100", serve=["--kv-cache-memory-bytes", "256M", "--max-model-len", "32768"])
    assert flat["memory.fit"] == "does_not_fit"
    assert flat["memory.fitting_max_model_len"] == (256 * 2**20 // (36 * 16 * 1024) - 1) * 16  # less the null block
    assert flat["memory.fp8_fits"] is False  # 36 x 512 B x 32768 = 0.56 GiB > 256 MiB
    assert flat["memory.kv_dtype_capacities"].startswith("fp8: does not fit, ")
    assert "turboquant_4bit_nc" in flat["memory.kv_dtype_capacities"]
    assert not flat["memory.kv_dtypes_fitting"].startswith("fp8")  # only those that hold one request


def test_the_fit_findings_offer_only_fixes_that_work():
    """Each fix of KVD181 / KVD182 / KVD183 is recomputed; one whose recomputation fails (or is unknown) is left out
    of the menu instead of being offered with 'does not fit' in its title."""
    from kvdoctor.check.run import derived_facts
    from kvdoctor.rules import load_all_rules
    from kvdoctor.rules.engine import evaluate_rules

    serve = ("vllm", "serve", str(EXAMPLE_MODEL), "--max-model-len", "32768", "--gpu-memory-utilization", "0.3")
    facts = collect_facts(CheckOptions(serve_argv=serve, gpu="L4", vllm_version="0.33.0", offline=True,
                                       resolve_kernels=False, environ={}))  # fmt: skip
    flat = derived_facts(facts)
    finding = next(f for f in evaluate_rules(load_all_rules(), flat) if f.rule_id in ("KVD181", "KVD182"))
    flags = [fix.flag for fix in finding.fixes]
    assert flat["memory.fp8_fits"] is False and "--kv-cache-dtype fp8" not in flags
    assert flat["memory.fitting_max_model_len"] is None and not any(f and "--max-model-len" in f for f in flags)
    assert f"--gpu-memory-utilization {flat['memory.fitting_gpu_memory_utilization']}" in flags
    assert not any("does not fit" in fix.title or "unknown" in fix.title for fix in finding.fixes)
    # the utilization it offers does fit when applied
    fixed = derived_facts(collect_facts(CheckOptions(
        serve_argv=serve[:-1] + (str(flat["memory.fitting_gpu_memory_utilization"]),), gpu="L4",
        vllm_version="0.33.0", offline=True, resolve_kernels=False, environ={})))
    assert fixed["memory.fit"] == "fits"


def test_a_fix_with_a_when_before_a_dry_run_fix_is_refused(tmp_path):
    import pytest
    from kvdoctor.base.errors import RulesFileError
    from kvdoctor.rules.rule import parse_rule

    raw = {"id": "ORG001", "title": "t", "severity": "error", "cause": "c", "when": {"fact": "gpu.capability", "lt": 8},
           "fixes": [{"title": "a", "when": {"fact": "memory.fp8_fits", "eq": True}},
                     {"title": "b", "dry_run": {"kv_cache_dtype": "fp8"}}]}  # fmt: skip
    with pytest.raises(RulesFileError, match="dry_run must come before"):
        parse_rule(tmp_path / "r.yaml", 0, raw, lambda name: True)
    l4 = facts_for(gpu="L4", serve=["--max-model-len", "8192"], vllm="0.25.1")
    assert l4["memory.fitting_tensor_parallel_size"] in (None, 2, 4, 8)
