"""Shipped rules in scenarios that need more than one case (each rule's own cases sit beside it in
kvdoctor/data/rules/*.yaml and run in test_rule_examples.py)."""

from __future__ import annotations

from rules_support import fired, rules, undecided


def test_founding_case_on_hopper_has_no_compile_error_but_keeps_auto_bug():
    found = fired(kv="turboquant_k8v4", gpu="H100", vllm="0.25.1")
    assert "KVD101" not in found and "KVD104" not in found and "KVD102" not in found  # dense model: V2 runner
    v1 = fired(kv="turboquant_k8v4", gpu="H100", vllm="0.25.1", serve=["VLLM_USE_V2_MODEL_RUNNER=0", "vllm", "serve"])
    assert "KVD101" not in v1 and "KVD102" in v1


def test_founding_case_on_fixed_release_only_warns():
    assert fired(kv="turboquant_k8v4", gpu="A100", vllm="0.27.0") == {"KVD104"}


def test_unknown_gpu_makes_founding_rule_undecided_not_guessed():
    assert "KVD101" in undecided(kv="turboquant_k8v4", gpu=None, vllm="0.25.1")
    assert "KVD101" not in fired(kv="turboquant_k8v4", gpu=None, vllm="0.25.1")


def test_fp8_on_ampere_is_served_by_flashinfer_a_hard_dependency():
    # FlashInfer is a hard dependency of vLLM's CUDA wheel (the pack reads the pins), so this is decided
    assert fired(kv="fp8", gpu="A10", vllm="0.27.0") == {"KVD113"}
    assert not undecided(kv="fp8", gpu="A10", vllm="0.27.0")


def test_kvd160_mixed_gpus():

    from kvdoctor.model.facts import GpuDevice, GpuFacts
    from kvdoctor.rules.engine import evaluate_rules
    from rules_support import scenario_facts

    facts = scenario_facts(gpu="H100")
    mixed = GpuFacts("nvml", (GpuDevice("H100", (9, 0), 80), GpuDevice("A100", (8, 0), 80)))
    facts = facts | {"gpu.mixed": mixed.mixed, "gpu.name": mixed.weakest.name, "gpu.capability": 8.0}
    assert "KVD160" in {f.rule_id for f in evaluate_rules(rules(), facts)}
    assert "KVD160" not in fired(gpu="H100")


def test_kvd900_fires_only_for_unexplained_real_compile_failures():
    failure = {"status": "failed", "kernels": [{"kernel": "_tq_decode_stage1", "role": "decode", "status": "failed",
               "failure": {"kind": "compile_error", "innermost_type": "ValueError", "innermost_message": "boom"}}]}
    assert "KVD900" in fired(kv="turboquant_4bit_nc", gpu="H100", dry_run=failure)
    explained = {**failure, "kernels": [{**failure["kernels"][0], "failure": {"kind": "bf16_to_fp8e4b15_assert"}}]}
    assert "KVD900" not in fired(kv="turboquant_k8v4", gpu="A100", dry_run=explained)
    probe = {**failure, "kernels": [{**failure["kernels"][0], "role": "probe"}]}
    assert "KVD900" not in fired(kv="turboquant_4bit_nc", gpu="H100", dry_run=probe)


def test_every_rule_cites_a_reference_and_versions():
    for rule in rules():
        assert rule.references, rule.id
        assert rule.checked_against, rule.id


def test_constructor_guard_rule_in_vllms_words():
    """KVD007 fires on any constructor refusal no specific rule explains (synthetic facts: no release has one yet)."""
    from kvdoctor.rules.engine import evaluate_rules

    facts = {"attention.error_kind": "constructor", "attention.backend": "X_ATTN", "attention.error": "ValueError: no"}
    found = {f.rule_id: f for f in evaluate_rules(rules(), facts)}
    assert found["KVD007"].status == "fired" and "ValueError: no" in found["KVD007"].cause
    assert "KVD007" not in {f.rule_id for f in evaluate_rules(rules(), facts | {"attention.error_kind": "none"})}


def test_generic_dtype_refusal_in_vllms_words():
    from kvdoctor.rules.engine import evaluate_rules

    facts = {"model.dtype_error": "ValueError: nope", "serve.dtype": "float32"}
    found = {f.rule_id: f for f in evaluate_rules(rules(), facts)}
    assert found["KVD008"].status == "fired" and "ValueError: nope" in found["KVD008"].cause
    assert "KVD008" not in {f.rule_id for f in evaluate_rules(rules(), facts | {"model.dtype_error": "none"})}


def test_an_unknown_backend_name_fails_without_a_gpu_or_a_version():
    # vLLM stops on the name (its AttentionBackendEnum) before it looks at the GPU or the model
    assert "KVD010" in fired(gpu=None, vllm=None, serve=["--attention-backend", "FLASH_ATTEN"])
    assert "KVD010" not in fired(gpu=None, vllm=None, serve=["--attention-backend", "flash_attn"])  # vLLM upper-cases


def test_a_backend_only_newer_releases_know_is_unknown_only_to_the_older_ones():
    assert "KVD010" not in fired(gpu=None, vllm=None, serve=["--attention-backend", "TRITON_FLASH_ATTN"])  # 0.30.0+
    assert "KVD010" in fired(gpu=None, vllm="0.25.1", serve=["--attention-backend", "TRITON_FLASH_ATTN"])
    assert "KVD010" not in fired(gpu=None, vllm="0.30.0", serve=["--attention-backend", "TRITON_FLASH_ATTN"])


def test_releases_that_disagree_on_whether_vllm_starts_are_not_a_pass():
    # fp8 on a T4: 0.20.0-0.23.0 start, from 0.24.0 the Triton backend's constructor refuses it (#43914)
    assert "KVD011" in fired(kv="fp8", gpu="T4", vllm=None)
    assert "KVD011" not in fired(kv="fp8", gpu="T4", vllm="0.25.1")
