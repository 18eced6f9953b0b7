"""The pooling runner (embedding / classification models): no LM head in the weights and the dummy pooler instead of
the sampler in the profile run, decided as vLLM decides it (facts/runner_type.py; data/kv_memory.yaml
budget.pooling_runner). Anchor: Qwen3-Embedding-8B on an H100, vLLM 0.12.0 logged 14.11 GiB of weights and 55.74 GiB
available (tests/fixtures/startup_logs zzsf11__qwen3-embedding-8b_h100_rerun)."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES
from kvdoctor.check.run import derived_facts
from kvdoctor.facts.collect import CheckOptions, collect_facts

QWEN3_8B = json.loads((FIXTURES / "startup_logs" / "configs" / "Qwen__Qwen3-8B.json").read_text())
ST_MODULES = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
              {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]


def budget(tmp_path, config=QWEN3_8B, *, serve=(), modules=None, vllm="0.12.0"):
    model = tmp_path / "model"
    model.mkdir(parents=True, exist_ok=True)
    (model / "config.json").write_text(json.dumps(config))
    if modules is not None:
        (model / "modules.json").write_text(json.dumps(modules))
    argv = ("vllm", "serve", str(model), "--max-model-len", "8192", *serve)
    return derived_facts(collect_facts(CheckOptions(serve_argv=argv, gpu="H100", vllm_version=vllm, offline=True,
                                                    resolve_kernels=False, environ={})))  # fmt: skip


def test_a_sentence_transformers_directory_is_served_without_lm_head_or_sampler(tmp_path):
    generate = budget(tmp_path / "a")
    pooled = budget(tmp_path / "b", modules=ST_MODULES)
    lm_head = QWEN3_8B["vocab_size"] * QWEN3_8B["hidden_size"] * 2  # untied, bfloat16
    assert generate["memory.weights_bytes"] - pooled["memory.weights_bytes"] == lm_head
    assert "pooling runner (the model directory's modules.json" in pooled["memory.kv_budget_source"]
    assert "dummy sampler" in generate["memory.kv_budget_source"]
    # vLLM logged 14.11 GiB of weights and 55.74 GiB available (0.12.0): the pooled prediction's band holds it
    assert pooled["memory.weights_bytes"] / 2**30 == pytest.approx(14.11, abs=0.05)
    assert abs(pooled["memory.kv_budget_gib"] - 55.74) < 1.5 < abs(generate["memory.kv_budget_gib"] - 55.74)


@pytest.mark.parametrize(
    ("serve", "modules", "pooled"),
    [
        (("--convert", "embed"), None, True),
        (("--runner", "pooling"), None, True),
        (("--runner", "generate"), ST_MODULES, False),  # an explicit runner wins over the directory
        ((), [{"type": "sentence_transformers.models.Transformer"}], False),  # no Pooling module
    ],
    ids=["convert", "runner", "runner-generate", "no-pooling-module"],
)
def test_the_flags_decide_before_the_directory(tmp_path, serve, modules, pooled):
    source = budget(tmp_path, serve=serve, modules=modules)["memory.kv_budget_source"]
    assert ("pooling runner" in source) is pooled


def test_an_architecture_vllm_registers_only_as_pooling_is_pooled(tmp_path):
    as_embedding = budget(tmp_path / "a", {**QWEN3_8B, "architectures": ["Qwen2Model"]})  # only in _EMBEDDING_MODELS
    both = budget(tmp_path / "b", {**QWEN3_8B, "architectures": ["Qwen2ForCausalLM"]})  # also a generation model
    assert "Qwen2Model is registered as a pooling model" in as_embedding["memory.kv_budget_source"]
    assert "pooling runner" not in both["memory.kv_budget_source"]
