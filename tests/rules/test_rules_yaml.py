"""Every shipped rule fires for the configuration it describes and stays quiet for its nearest neighbour."""

from __future__ import annotations

import pytest

from rules_support import fired, rules, undecided

# rule id -> (a scenario that must fire it, a near miss that must not)
CASES = {
    "KVD101": (dict(kv="turboquant_k8v4", gpu="A100", vllm="0.25.1"), dict(kv="turboquant_k8v4", gpu="A100", vllm="0.26.0")),
    # the 'auto' bug lives in the V1 runner: a dense model runs V2 by default (vLLM's use_v2_model_runner)
    "KVD102": (dict(kv="turboquant_4bit_nc", gpu="H100", vllm="0.26.0", serve=["VLLM_USE_V2_MODEL_RUNNER=0", "vllm", "serve"]), dict(kv="turboquant_4bit_nc", gpu="H100", vllm="0.26.0")),
    "KVD103": (dict(kv="turboquant_4bit_nc", gpu="T4"), dict(kv="turboquant_4bit_nc", gpu="A10")),
    "KVD104": (dict(kv="turboquant_k8v4", gpu="A10"), dict(kv="turboquant_k8v4", gpu="L4")),
    "KVD105": (dict(kv="turboquant_k8v4", vllm="0.19.1"), dict(kv="turboquant_k8v4", vllm="0.20.0")),
    "KVD106": (dict(model="deepseek", kv="turboquant_4bit_nc", gpu="H100"), dict(model="llama", kv="turboquant_4bit_nc", gpu="H100")),
    "KVD107": (dict(model="jamba", kv="turboquant_4bit_nc", gpu="H100", vllm="0.20.1"), dict(model="jamba", kv="turboquant_4bit_nc", gpu="H100", vllm="0.21.0")),
    "KVD108": (dict(model="gpt2", kv="turboquant_4bit_nc", gpu="H100", serve=["--dtype", "float32"]), dict(model="gpt2", kv="turboquant_4bit_nc", gpu="H100")),
    "KVD001": (dict(kv="fp8_e4m3fn", gpu="H100"), dict(kv="fp8_e4m3", gpu="H100")),
    "KVD004": (dict(gpu="H100", serve=["--max-modle-len", "4096"]), dict(gpu="H100", serve=["--max-model-len", "4096"])),
    "KVD005": (dict(kv="fp8_ds_mla", gpu="H100"), dict(kv="fp8", gpu="H100")),
    "KVD006": (dict(gpu="T4", serve=["--attention-backend", "FLASH_ATTN"]), dict(gpu="A10", serve=["--attention-backend", "FLASH_ATTN"])),
    "KVD010": (dict(serve=["--attention-backend", "FLASH_ATTEN"]), dict(gpu="H100", serve=["--attention-backend", "FLASH_ATTN"])),
    "KVD011": (dict(gpu="H100", vllm="0.34.0", serve=["--block-size", "7"]), dict(gpu="H100", vllm="0.34.0", serve=["--block-size", "16"])),
    "KVD117": (dict(kv="fp8", gpu="T4", vllm="0.23.0"), dict(kv="fp8", gpu="A10", vllm="0.23.0")),
    "KVD118": (dict(kv="fp8_e5m2", gpu="H100", vllm="0.27.0", serve=["--attention-backend", "TRITON_ATTN"]), dict(kv="fp8_e4m3", gpu="H100", vllm="0.27.0", serve=["--attention-backend", "TRITON_ATTN"])),
    "KVD119": (dict(kv="fp8", gpu="A10", vllm="0.25.1", triton="3.6.0"), dict(kv="fp8", gpu="A10", vllm="0.25.1")),
    "KVD114": (dict(kv="fp8_e5m2", gpu="H100", vllm="0.25.1"), dict(kv="fp8_e4m3", gpu="H100", vllm="0.25.1")),
    "KVD115": (dict(kv="fp8", gpu="H100", vllm="0.25.1", serve=["--dtype", "float16"]), dict(kv="fp8", gpu="H100", vllm="0.25.1")),
    "KVD116": (dict(kv="turboquant_4bit_nc", gpu="H100", serve=["--attention-backend", "TURBOQUANT"]), dict(kv="turboquant_4bit_nc", gpu="H100")),
    "KVD009": (dict(gpu="H100", vllm="0.34.0", serve=["VLLM_USE_V2_MODEL_RUNNER=0", "vllm", "serve"]), dict(gpu="H100", vllm="0.34.0", serve=["VLLM_USE_V2_MODEL_RUNNER=1", "vllm", "serve"])),
    "KVD002": (dict(kv="octave_k3v4", gpu="H100", vllm="0.33.0"), dict(kv="turboquant_k3v4_nc", gpu="H100", vllm="0.33.0")),
    "KVD003": (dict(kv="ultraquant_4bit", gpu="H100", vllm="0.32.0"), dict(kv="turboquant_4bit_nc", gpu="H100", vllm="0.32.0")),
    "KVD110": (dict(kv="fp8", gpu="A100", vllm="0.23.0", serve=["--attention-backend", "TRITON_ATTN"]), dict(kv="fp8", gpu="A100", vllm="0.24.0", serve=["--attention-backend", "TRITON_ATTN"])),
    "KVD111": (dict(kv="fp8", gpu="A10", vllm="0.24.0", flashinfer=None, serve=["--attention-backend", "TRITON_ATTN"]), dict(kv="fp8", gpu="L4", vllm="0.24.0", serve=["--attention-backend", "TRITON_ATTN"])),
    "KVD112": (dict(model="deepseek", kv="fp8", gpu="A100"), dict(model="deepseek", kv="fp8", gpu="H100")),
    "KVD113": (dict(kv="fp8", gpu="A10", flashinfer="0.5.2"), dict(kv="fp8", gpu="L4", flashinfer="0.5.2")),
    "KVD120": (dict(kv="bfloat16", gpu="V100"), dict(kv="float16", gpu="V100")),
    "KVD121": (dict(gpu="T4", serve=["--dtype", "bfloat16"]), dict(gpu="A10", serve=["--dtype", "bfloat16"])),
    "KVD122": (dict(gpu="T4"), dict(gpu="T4", serve=["--dtype", "float16"])),
    # vLLM 0.25.1+ falls back to float32 for gemma2 on a GPU without bf16, so only an explicit float16 is refused
    "KVD123": (dict(model="gemma2", gpu="A100", serve=["--dtype", "float16"]), dict(model="gemma2", gpu="T4")),
    "KVD140": (dict(model="modelopt", gpu="A10"), dict(model="modelopt", gpu="L40S")),
    "KVD150": (dict(gpu="B200", triton="3.2.0"), dict(gpu="B200", triton="3.3.0")),
    "KVD170": (dict(model="deepseek", gpu="H100"), dict(model="deepseek", gpu="H100", serve=["--trust-remote-code"])),
}


def test_every_shipped_rule_has_cases():
    shipped = {r.id for r in rules() if r.when is not None and r.origin.endswith("rules.yaml") and not r.id.startswith("KVD3")}
    missing = shipped - set(CASES) - {"KVD160", "KVD900", "KVD007", "KVD008"}  # tested separately below
    assert not missing, f"rules without a firing/non-firing test: {sorted(missing)}"


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_fires(rule_id):
    assert rule_id in fired(**CASES[rule_id][0])


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_stays_quiet_for_near_miss(rule_id):
    assert rule_id not in fired(**CASES[rule_id][1])


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
