"""Soft cap and ALiBi as model facts, read from real config.json files as vLLM's model code reads them, and fed to
the pack's layer guards (a forced backend whose constructor refuses the feature is a FAIL with the pack's file:line).
"""

from __future__ import annotations

import pytest

from conftest import CONFIGS
from kvdoctor.facts.probes.model_config import read_model_facts
from kvdoctor.facts.probes.model_source import locate_config

LAYER = CONFIGS / "layer_features"


def facts_for(name: str):
    path = LAYER / name if (LAYER / name).exists() else CONFIGS / name
    return read_model_facts(locate_config(str(path), revision=None, offline=True, download_dir=None))


@pytest.mark.parametrize("name, soft_cap, alibi", [
    ("gemma-2-9b-it.json", 50.0, False),       # gemma2.py: attn_logits_soft_cap=config.attn_logit_softcapping
    ("gemma-2-2b-it.json", 50.0, False),
    ("gemma-3-1b-it.json", None, False),       # gemma3.py passes attn_logits_soft_cap=None
    ("grok-1.json", 30.0, False),              # grok1.py: getattr(config, "attn_logit_softcapping", 30.0)
    ("mpt-7b-instruct.json", None, True),      # mpt.py: attn_config.alibi
    ("bloomz-560m.json", None, True),          # bloom.py: always ALiBi
    ("falcon-rw-1b.json", None, True),         # falcon.py: config.alibi
    ("falcon-7b.json", None, False),           # rotary
    ("baichuan-13b-chat.json", None, True),    # baichuan.py: BaichuanForCausalLM, hidden_size 5120 -> ALIBI
    ("baichuan2-7b-chat.json", None, False),   # hidden_size 4096 -> ROPE
    ("jais-13b-chat.json", None, True),        # jais.py: position_embedding_type == "alibi"
    ("llama-3.1-8b-instruct.json", None, False),
    ("gpt2.json", None, False),
])
def test_soft_cap_and_alibi_from_real_configs(name, soft_cap, alibi):
    facts = facts_for(name)
    assert (facts.logits_soft_cap, facts.use_alibi) == (soft_cap, alibi)


def test_legacy_names_give_head_dim():
    # BLOOMZ spells the width n_embed, MPT its heads n_heads and layers n_layers (transformers' attribute maps)
    bloomz, mpt = facts_for("bloomz-560m.json"), facts_for("mpt-7b-instruct.json")
    assert (bloomz.hidden_size, bloomz.num_attention_heads, bloomz.head_dim) == (1024, 16, 64)
    assert (mpt.hidden_size, mpt.num_attention_heads, mpt.head_dim, mpt.num_hidden_layers) == (4096, 32, 128, 32)


def test_flat_facts_say_none_when_config_declares_none():
    from kvdoctor.model.facts import Facts, GpuFacts, ServeFacts, VersionFacts

    flat = Facts(GpuFacts("none"), facts_for("falcon-7b.json"), VersionFacts(), ServeFacts()).flat()
    assert (flat["model.logits_soft_cap"], flat["model.use_alibi"]) == (0, False)


def _check(run_cli, model, *args):
    result = run_cli("check", "--model", str(model), "--no-compile", "--format", "json", *args)
    return result, result.json()


def test_flex_attention_refuses_gemma2_soft_cap(run_cli):
    result, document = _check(run_cli, CONFIGS / "gemma-2-9b-it.json", "--gpu", "H100", "--vllm-version", "0.34.0",
                              "--attention-backend", "FLEX_ATTENTION")
    assert result.code == 1 and document["verdict"] == "FAIL"
    assert document["facts"]["attention.error"] == "NotImplementedError: FlexAttention does not support logits soft cap yet."
    assert "vllm/v1/attention/backends/flex_attention.py:" in document["facts"]["attention.evidence"]


def test_flex_attention_refuses_alibi(run_cli):
    result, document = _check(run_cli, LAYER / "falcon-rw-1b.json", "--gpu", "A100", "--vllm-version", "0.25.1",
                              "--attention-backend", "FLEX_ATTENTION")
    assert result.code == 1
    assert "FlexAttention does not support alibi slopes yet" in document["facts"]["attention.error"]
    # the same backend on the same model without ALiBi (Falcon-7B, rotary) constructs
    result, document = _check(run_cli, LAYER / "falcon-7b.json", "--gpu", "A100", "--vllm-version", "0.25.1",
                              "--attention-backend", "FLEX_ATTENTION")
    assert document["facts"]["attention.error_kind"] == "none"


def test_soft_cap_on_an_unprobed_release_is_undecided(run_cli):
    # 0.9.2's metadata builders could not be probed (a soft cap is read there): a soft-capped model is undecided
    # (KVD011), never a PASS (0.11-0.19 are probed since stop 69)
    result, document = _check(run_cli, CONFIGS / "gemma-2-9b-it.json", "--gpu", "H100", "--vllm-version", "0.9.2")
    assert document["verdict"] != "PASS"
    assert "a logits soft cap" in document["facts"]["attention.undecided"]


@pytest.mark.parametrize("scenario", [
    dict(model="gemma2", gpu="H100", vllm="0.9.2"),                                # layer features, builders not probed
    dict(model="mistral-fp16", gpu="A100", kv="turboquant_k8v4", vllm="0.25.1"),  # TurboQuant spec + sliding window
    dict(model="qwen", gpu="T4", kv="fp8", vllm=None),                           # the releases disagree
    dict(model="qwen", gpu="H100", vllm="0.14.1", serve=["--block-size", "7"]),    # a size vLLM was not asked about
])
def test_undecided_selection_names_what_decides_it(scenario):
    from rules_support import scenario_facts

    why = scenario_facts(**scenario)["attention.undecided"]
    assert why not in (None, "none") and "(decided by " in why
