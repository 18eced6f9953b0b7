"""Model runner (V1/V2) and model dtype resolution, as each release's own code decides them (from the pack)."""
from __future__ import annotations

import pytest

from kvdoctor.vllm_pack import load_release
from kvdoctor.vllm_pack.dtypes import resolve_dtype
from kvdoctor.vllm_pack.runner import model_runner

DENSE = dict(architectures=["Qwen2ForCausalLM"], is_moe=False, is_hybrid=False)
MOE = dict(architectures=["Qwen3MoeForCausalLM"], is_moe=True, is_hybrid=False)
HYBRID = dict(architectures=["Qwen3NextForCausalLM"], is_moe=True, is_hybrid=True)


def runner(version, **kw):
    return model_runner(load_release(version), kv_cache_dtype="turboquant_k8v4", **kw)


def test_founding_case_dense_model_runs_v2_on_0_25_1_and_misses_the_auto_bug():
    choice = runner("0.25.1", **DENSE)
    assert choice.runner == "V2" and choice.bugs == ()
    assert choice.where.startswith("vllm/config/vllm.py:")


@pytest.mark.parametrize("model", [MOE, HYBRID])
def test_moe_and_hybrid_models_run_v1_and_hit_the_auto_bug_on_0_25_1(model):
    choice = runner("0.25.1", **model)
    assert choice.runner == "V1"
    assert [b.id for b in choice.bugs] == ["turboquant_auto_v1"]
    assert "Unknown TurboQuant cache dtype: 'auto'" in choice.bugs[0].message


def test_the_environment_variable_decides_when_set():
    assert runner("0.25.1", env="0", **DENSE).runner == "V1"
    assert runner("0.25.1", env="0", **DENSE).bugs
    assert runner("0.25.1", env="1", **MOE).runner == "V2"


def test_default_v2_moe_architectures_are_vllms_list():
    assert runner("0.25.1", architectures=["Qwen2MoeForCausalLM"], is_moe=True, is_hybrid=False).runner == "V2"


def test_v1_is_fixed_from_0_27_0_and_the_pack_shows_why():
    assert runner("0.26.0", **MOE).bugs
    assert runner("0.27.0", **MOE).runner == "V1" and runner("0.27.0", **MOE).bugs == ()
    from kvdoctor.vllm_pack import load_runtime

    assert "TURBOQUANT" not in load_runtime("0.26.0")["kv_quant_modes"]
    assert any("TURBOQUANT" in m for m in load_runtime("0.27.0")["kv_quant_modes"])


def test_0_34_0_has_removed_v1():
    assert runner("0.34.0", **MOE).runner == "V2"
    refused = runner("0.34.0", env="0", **DENSE)
    assert refused.runner is None and "VLLM_USE_V2_MODEL_RUNNER=0 is no longer supported" in refused.error


def test_old_releases_follow_the_environment_variable_alone():
    assert runner("0.20.0", **DENSE).runner == "V1"
    assert runner("0.20.0", env="1", **DENSE).runner == "V2"


def test_an_unknown_model_shape_is_undecided_when_it_matters():
    choice = runner("0.25.1", architectures=["Qwen2ForCausalLM"], is_moe=None, is_hybrid=False)
    assert choice.runner is None and any("is_moe" in u for u in choice.undecided)
    assert runner("0.25.1", env="0", architectures=None, is_moe=None, is_hybrid=None).runner == "V1"


def dtype(version, *args):
    return resolve_dtype(load_release(version), *args)


def test_bf16_config_on_turing_falls_back_to_fp16():
    resolved, note, error = dtype("0.25.1", "bfloat16", "auto", (7, 5), "qwen2")
    assert (resolved, error) == ("float16", None) and "falls back to float16" in note


def test_explicit_bf16_below_sm80_is_vllms_error():
    resolved, _, error = dtype("0.25.1", "bfloat16", "bfloat16", (7, 5), "qwen2")
    assert error.startswith("ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0.")


def test_fp32_config_is_downcast_to_the_first_supported_dtype():
    assert dtype("0.25.1", "float32", "auto", (8, 0), "llama")[0] == "bfloat16"
    assert dtype("0.25.1", "float32", "auto", (7, 5), "llama")[0] == "float16"


def test_model_types_that_may_not_use_fp16():
    assert dtype("0.25.1", "float32", "auto", (7, 5), "gemma2")[0] == "float32"
    _, _, error = dtype("0.25.1", "bfloat16", "half", (8, 0), "gemma2")
    assert error == ("ValueError: The model type 'gemma2' does not support float16. "
                     "Reason: Numerical instability. Please use bfloat16 or float32 instead.")


def test_dtype_needs_the_capability_and_a_config_dtype():
    assert dtype("0.25.1", "bfloat16", "auto", None, "llama")[0] is None
    assert dtype("0.25.1", None, "auto", (8, 0), "llama")[0] is None
