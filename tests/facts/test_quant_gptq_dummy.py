"""GPTQ checkpoints vLLM builds unquantized: from 0.11.2 its GPTQ config lists the quantized layers from the
checkpoint's safetensors metadata when config.json does not name them (maybe_update_config), so a local directory
with no safetensors file served with --load-format dummy gets UnquantizedLinearMethod for every linear layer and
weighs the bf16 size. Measured on the H200 with 0.25.1: "Model loading took 15.0 GiB" for Llama-3.1-8B GPTQ INT4
(docs/real-startup-results/fit-h200-2026-12-04); kvdoctor had estimated the packed 5.3 GiB."""

from __future__ import annotations

import json

from conftest import CONFIGS

QUANTIZED = CONFIGS / "quantized"
BF16_LLAMA_8B = 32 * (4096 * 128 * (2 * 32 + 2 * 8) + 3 * 4096 * 14336) * 2 + 2 * 128256 * 4096 * 2


def _facts(tmp_path, name, serve=(), vllm="0.25.1", config=None):
    from kvdoctor.check.run import derived_facts
    from kvdoctor.facts.collect import CheckOptions, collect_facts

    model = tmp_path / name
    model.mkdir(parents=True, exist_ok=True)
    text = (QUANTIZED / f"{name}.json").read_text() if config is None else json.dumps(config)
    (model / "config.json").write_text(text)
    argv = ("vllm", "serve", str(model), "--max-model-len", "8192", *serve)
    return derived_facts(collect_facts(CheckOptions(serve_argv=argv, gpu="H200", vllm_version=vllm, offline=True,
                                                    resolve_kernels=False, environ={})))  # fmt: skip


def test_dummy_load_of_a_config_only_gptq_directory_weighs_the_model_dtype(tmp_path):
    flat = _facts(tmp_path, "llama-3.1-8b-gptq-int4", serve=("--load-format", "dummy"))
    assert flat["memory.weights_bytes"] == BF16_LLAMA_8B
    assert abs(flat["memory.weights_bytes"] / 2**30 - 15.0) < 0.05  # what 0.25.1 reported on the H200


def test_a_real_load_keeps_the_packed_estimate(tmp_path):
    """Without --load-format dummy vLLM loads the weights, whose metadata names the quantized layers."""
    flat = _facts(tmp_path, "llama-3.1-8b-gptq-int4")
    assert flat["memory.weights_bytes"] < BF16_LLAMA_8B / 2.5
    assert abs(flat["memory.weights_bytes"] / 2**30 - 5.33) < 0.1


def test_a_config_that_names_its_quantized_layers_stays_packed(tmp_path):
    config = json.loads((QUANTIZED / "llama-3.1-8b-gptq-int4.json").read_text())
    config["quantization_config"]["modules_in_block_to_quantize"] = [
        ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"], ["self_attn.o_proj"],
        ["mlp.gate_proj", "mlp.up_proj"], ["mlp.down_proj"]]
    flat = _facts(tmp_path, "llama-3.1-8b-gptq-int4", serve=("--load-format", "dummy"), config=config)
    assert flat["memory.weights_bytes"] < BF16_LLAMA_8B / 2.5


def test_a_directory_with_safetensors_stays_packed(tmp_path):
    (tmp_path / "llama-3.1-8b-gptq-int4").mkdir()
    (tmp_path / "llama-3.1-8b-gptq-int4" / "model-00001-of-00002.safetensors").write_bytes(b"")
    flat = _facts(tmp_path, "llama-3.1-8b-gptq-int4", serve=("--load-format", "dummy"))
    assert flat["memory.weights_bytes"] < BF16_LLAMA_8B / 2.5


def test_releases_before_the_layer_list_stay_packed(tmp_path):
    """0.10.2 has no maybe_update_config in its GPTQ configs: every linear layer is quantized."""
    flat = _facts(tmp_path, "llama-3.1-8b-gptq-int4", serve=("--load-format", "dummy"), vllm="0.10.2")
    assert flat["memory.weights_bytes"] < BF16_LLAMA_8B / 2.5
