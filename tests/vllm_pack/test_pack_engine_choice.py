"""vLLM 0.10.x has two engines (issue 27, 2): its own `_is_v1_supported_oracle` sends an fp8 KV cache without
FlashAttention 3 (an L40S) to V0, which starts (XFormers); the pack's grid holds only the V1 selector's answers, so
such a configuration is undecided, never FlashAttention's V1 constructor refusal."""
from __future__ import annotations

import pytest

from kvdoctor.vllm_pack import load_release
from kvdoctor.vllm_pack.select import SelectorInputs, select_backend
from kvdoctor.vllm_pack.store import load_backend_grid


def _engine_read() -> bool:
    return "engine" in (load_backend_grid("0.10.2") or {})


pytestmark = pytest.mark.skipif(not _engine_read(), reason="the pack's 0.10.2 grid holds no engine choice")


def _select(capability, kv, **kw):
    return select_backend(load_release("0.10.2"), SelectorInputs(capability=capability, head_size=128,
                                                                 model_dtype="bfloat16", kv_cache_dtype=kv, **kw))


def test_fp8_kv_on_an_l40s_falls_back_to_v0_and_is_not_judged_as_v1():
    selection = _select((8, 9), "fp8")
    assert selection.error is None and selection.backend is None
    assert "starts its V0 engine" in selection.undecided[0] and "--kv-cache-dtype" in selection.undecided[0]
    assert any("arg_utils.py" in e for e in selection.evidence)


def test_v1_configurations_are_still_decided():
    assert _select((9, 0), "fp8").backend  # FA3 takes fp8: V1
    assert _select((8, 9), "auto").backend


def test_a_v0_only_forced_backend_falls_back_too():
    selection = _select((8, 0), "auto", forced_backend="XFORMERS")
    assert "VLLM_ATTENTION_BACKEND=XFORMERS" in selection.undecided[0]


def test_releases_without_v0_have_no_engine_table():
    assert "engine" not in (load_backend_grid("0.11.2") or {})
