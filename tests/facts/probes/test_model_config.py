from __future__ import annotations

import json
import struct

import pytest

from conftest import CONFIGS, EXAMPLE_MODEL
from kvdoctor.base.errors import ModelConfigError
from kvdoctor.facts.probes.model_config import read_model_facts
from kvdoctor.facts.probes.model_dtype import resolve_model_dtype
from kvdoctor.facts.probes.model_source import locate_config


def facts_for(path):
    return read_model_facts(locate_config(str(path), revision=None, offline=True, download_dir=None))


def test_qwen_dense_gqa():
    facts = facts_for(EXAMPLE_MODEL)
    assert (facts.model_type, facts.config_dtype, facts.head_dim, facts.num_kv_heads) == ("qwen2", "bfloat16", 128, 2)
    assert facts.num_hidden_layers == 36 and not facts.is_mla and not facts.is_hybrid


def test_deepseek_mla_and_remote_code():
    facts = facts_for(CONFIGS / "deepseek-v2-lite.json")
    assert facts.is_mla is True
    assert facts.head_dim == 512 + 64  # latent + rope part is what MLA caches
    assert facts.num_kv_heads == 1
    assert facts.has_remote_code is True


def test_jamba_is_hybrid_and_gemma_has_explicit_head_dim():
    assert facts_for(CONFIGS / "jamba-v0.1.json").is_hybrid is True
    gemma = facts_for(CONFIGS / "gemma-2-9b-it.json")
    assert gemma.head_dim == 256 and gemma.sliding_window == 4096 and not gemma.is_hybrid


def test_legacy_gpt2_names_and_missing_dtype():
    facts = facts_for(CONFIGS / "gpt2.json")
    assert (facts.num_attention_heads, facts.num_hidden_layers, facts.head_dim) == (12, 12, 64)
    assert facts.config_dtype is None


def test_text_sub_config_supplies_dtype_and_heads():
    facts = facts_for(CONFIGS / "qwen2-vl-7b-instruct.json")
    assert facts.config_dtype == "bfloat16"  # text_config's, not the vision tower's float32
    assert facts.num_kv_heads == 4 and facts.head_dim == 128


def test_modelopt_checkpoint_declares_fp8_kv():
    facts = facts_for(CONFIGS / "llama-3.1-8b-instruct-fp8-modelopt.json")
    assert facts.quant_method == "modelopt" and facts.kv_cache_quant_algo == "FP8"


def test_safetensors_header_supplies_missing_dtype(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "num_attention_heads": 8, "hidden_size": 512}))
    header = json.dumps({"a": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}, "__metadata__": {}}).encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 4)
    assert facts_for(tmp_path).config_dtype == "float16"


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "invalid JSON at line 1"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"num_attention_heads": "32"}', "'num_attention_heads' must be a positive integer"),
        ('{"num_key_value_heads": -8}', "'num_key_value_heads' must be a positive integer"),
        ('{"num_attention_heads": 8, "num_key_value_heads": 16}', "exceeds num_attention_heads"),
        ('{"torch_dtype": "float8"}', "not a dtype vLLM knows"),
        ('{"architectures": "Llama"}', "'architectures' must be a list"),
    ],
)
def test_malformed_configs_name_the_problem(tmp_path, content, message):
    (tmp_path / "config.json").write_text(content)
    with pytest.raises(ModelConfigError) as error:
        facts_for(tmp_path)
    assert message in error.value.one_line()


def test_directory_without_config_and_missing_path(tmp_path):
    with pytest.raises(ModelConfigError, match="no config.json"):
        facts_for(tmp_path)
    with pytest.raises(ModelConfigError, match="not found"):
        facts_for(tmp_path / "missing-dir")


def test_hf_id_offline_and_not_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(ModelConfigError, match="not in the local Hugging Face cache"):
        locate_config("Qwen/Qwen2.5-3B-Instruct", revision=None, offline=True, download_dir=None)


def test_hf_id_found_in_cache(hf_cache, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(hf_cache))
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hf_cache))
    location = locate_config("Qwen/Qwen2.5-3B-Instruct", revision=None, offline=True, download_dir=None)
    assert location.source == "hf-cache:Qwen/Qwen2.5-3B-Instruct"
    assert read_model_facts(location).head_dim == 128


# vLLM's `--dtype auto` resolution (docs/facts/vllm-kv-cache.md section 5)
@pytest.mark.parametrize(
    "config_dtype, model_type, flag, capability, expected",
    [
        ("bfloat16", "qwen2", "auto", (8, 0), "bfloat16"),
        ("bfloat16", "qwen2", "auto", (7, 5), "float16"),  # no bf16 below SM80: fall back
        ("float32", "gpt2", "auto", (8, 0), "bfloat16"),  # fp32 downcast to first supported
        ("float32", "gpt2", "auto", (7, 0), "float16"),
        (None, "gpt2", "auto", (9, 0), "bfloat16"),  # no dtype = float32
        ("float16", "mistral", "auto", (9, 0), "float16"),
        ("bfloat16", "qwen2", "half", (8, 0), "float16"),
        ("float16", "qwen2", "bfloat16", (7, 5), "bfloat16"),  # explicit: vLLM refuses it (rule KVD121)
        ("float16", "qwen2", "auto", None, "float16"),
        ("bfloat16", "qwen2", "auto", None, None),  # depends on the GPU
    ],
)
def test_resolve_model_dtype(config_dtype, model_type, flag, capability, expected):
    assert resolve_model_dtype(config_dtype, flag, capability)[0] == expected  # model_type labels the case


def test_the_dtype_fallback_agrees_with_every_release_the_pack_read():
    """kvdoctor/data/dtype_fallback.yaml is used only where the pack cannot say; where both answer they agree
    (vLLM's refusals, such as an explicit --dtype bfloat16 below SM80, are the pack's alone)."""
    from kvdoctor.data.dtypes import MODEL_DTYPES
    from kvdoctor.vllm_pack import load_release, pack_releases
    from kvdoctor.vllm_pack.dtypes import resolve_dtype

    from kvdoctor.base.versions import release_numbers

    compared = 0
    # 0.7-0.9.0.1 downcast a float32 config to float16 on every GPU (vllm/config.py:2905 in 0.8.5.post1, :3072 in
    # 0.9.0.1); the fallback reads 0.9.1+ (the platform's preferred dtype), and never judges them (a named release in
    # the pack answers for itself)
    for version in [v for v in pack_releases() if release_numbers(v) >= (0, 9, 1)]:
        release = load_release(version)
        for capability in [(7, 0), (7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0)]:
            for config_dtype in ("float16", "bfloat16", "float32"):
                for flag in MODEL_DTYPES:
                    dtype, _, error = resolve_dtype(release, config_dtype, flag, capability, "qwen2")
                    if dtype is None or error:
                        continue
                    assert resolve_model_dtype(config_dtype, flag, capability)[0] == dtype, (version, capability)
                    compared += 1
    assert compared > 1000
