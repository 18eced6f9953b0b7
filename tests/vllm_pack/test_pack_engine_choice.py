"""vLLM 0.7-0.10 have two engines (issue 27, 2): 0.8-0.10's own `_is_v1_supported_oracle` sends e.g. an fp8 KV cache
without FlashAttention 3 (an L40S) or a pre-SM80 GPU to V0; 0.7 starts V0 unless VLLM_USE_V1=1. The pack holds
the oracle's answers and V0's own selector answers (asked with `use_v1=False`), so such a configuration is judged
by V0's backend (XFormers starts), never by V1's FlashAttention constructor and never left undecided."""
from __future__ import annotations

import pytest

from kvdoctor.vllm_pack import load_release
from kvdoctor.vllm_pack.select import SelectorInputs, select_backend
from kvdoctor.vllm_pack.store import load_backend_grid


def _engine_read(version: str) -> bool:
    grid = load_backend_grid(version) or {}
    return "engine" in grid and "v0" in grid


def _select(version, capability, kv, dtype="bfloat16", **kw):
    assert _engine_read(version), f"the pack's {version} grid holds no engine choice or no V0 grid"
    return select_backend(load_release(version), SelectorInputs(capability=capability, head_size=128, block_size=16,
                                                                model_dtype=dtype, kv_cache_dtype=kv, **kw))


def _started_v0(selection) -> str:
    (line,) = [e for e in selection.evidence if "starts its V0 engine" in e]
    return line


def test_fp8_kv_on_an_l40s_starts_v0_with_xformers():
    selection = _select("0.10.2", (8, 9), "fp8")
    assert (selection.backend, selection.error, selection.undecided) == ("XFORMERS", None, ())
    line = _started_v0(selection)
    assert "vllm/engine/arg_utils.py:" in line and "--kv-cache-dtype is not supported by the V1 Engine" in line
    assert any(e.startswith("vllm/platforms/cuda.py:") for e in selection.evidence)


def test_v1_configurations_are_still_judged_by_v1():
    for capability, kv in (((9, 0), "fp8"), ((8, 9), "auto")):  # FA3 takes fp8 on SM90: V1
        selection = _select("0.10.2", capability, kv)
        assert selection.backend == "FLASH_ATTN" and not any("V0 engine" in e for e in selection.evidence)


def test_a_v0_only_forced_backend_starts_v0_and_gets_it():
    selection = _select("0.10.2", (8, 0), "auto", forced_backend="XFORMERS")
    assert selection.backend == "XFORMERS" and "VLLM_ATTENTION_BACKEND=XFORMERS" in _started_v0(selection)


@pytest.mark.parametrize("version", ["0.8.5.post1", "0.9.2"])
def test_pre_sm80_gpus_start_v0(version):
    selection = _select(version, (7, 5), "auto", dtype="float16")
    assert selection.backend == "XFORMERS" and "Compute Capability < 8.0" in _started_v0(selection)
    assert _select(version, (8, 0), "auto").backend == "FLASH_ATTN"  # V1's FlashAttention, not V0's
    assert not any("V0 engine" in e for e in _select(version, (8, 0), "auto").evidence)


def test_0_7_starts_v0_by_default_and_v0_flashattention_on_an_a100():
    selection = _select("0.7.3", (8, 0), "auto")
    assert selection.backend == "FLASH_ATTN" and "VLLM_USE_V1" in _started_v0(selection)
    assert "vllm/envs.py:" in _started_v0(selection)
    assert _select("0.7.3", (8, 9), "fp8").backend == "XFORMERS"  # V0 FlashAttention-2 takes no fp8 cache


def test_0_8_float32_models_start_v0():
    """0.8's oracle reads the model dtype (V1 takes bfloat16 and float16 only)."""
    selection = _select("0.8.5.post1", (8, 0), "auto", dtype="float32")
    assert "--dtype" in _started_v0(selection) and selection.backend == "XFORMERS"


def test_releases_without_v0_have_no_engine_table():
    grid = load_backend_grid("0.11.2") or {}
    assert "engine" not in grid and "v0" not in grid


def test_vllm_use_v1_set_in_the_environment_decides_the_engine():
    # VLLM_USE_V1=0: V0 whatever the oracle says (V0's FlashAttention-2 on an A100)
    off = _select("0.9.2", (8, 0), "auto", use_v1_env="0")
    assert off.backend == "FLASH_ATTN" and "VLLM_USE_V1=0 is set" in _started_v0(off)
    # VLLM_USE_V1=1 where the oracle falls back: vLLM refuses to start; the pack lacks its words, so undecided
    refused = _select("0.9.2", (7, 5), "auto", dtype="float16", use_v1_env="1")
    assert refused.backend is None and "VLLM_USE_V1=1 is set" in refused.undecided[0]
    # 0.7.3 starts V1 on request: V1's own answer
    on = _select("0.7.3", (8, 0), "auto", use_v1_env="1")
    assert on.backend == "FLASH_ATTN" and not any("V0 engine" in e for e in on.evidence)


def test_the_engine_is_a_fact_of_the_selection():
    assert _select("0.10.2", (8, 9), "fp8").engine == "V0"
    assert _select("0.10.2", (8, 9), "auto").engine == "V1"
    assert _select("0.9.2", (7, 5), "auto", dtype="float16", use_v1_env="1").engine is None  # undecided
