"""The knowledge pack's backend selector plugs into explain's selector findings, and its absence degrades."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import pytest

from kvdoctor.explain.explain import explain_text

LOG = ("INFO 05-02 10:22:10 [api_server.py:1] vLLM API server version 0.30.0\n"
       "ValueError: No valid attention backend found for cuda with AttentionSelectorConfig(head_size=256, "
       "dtype=torch.bfloat16, kv_cache_dtype=fp8, block_size=None, use_mla=False, has_sink=False, use_sparse=False, "
       "attn_type=AttentionType.DECODER). Reasons: {FLASH_ATTN: [kv_cache_dtype not supported], TRITON_ATTN: "
       "[compute capability not supported]}.\n")


@dataclass(frozen=True)
class FakeInputs:
    capability: tuple
    head_size: int
    model_dtype: str
    kv_cache_dtype: str = "auto"
    use_mla: bool = False
    has_sink: bool = False
    use_sparse: bool = False
    attn_type: str = "decoder"
    forced_backend: str | None = None


@pytest.fixture
def fake_pack(monkeypatch):
    calls = []

    def select_backend(release, inputs):
        calls.append((release, inputs))
        ok = inputs.kv_cache_dtype == "auto" or inputs.capability >= (8, 9)
        return types.SimpleNamespace(backend="FLASHINFER" if ok else None, reasons={} if ok else {"FLASHINFER": ["x"]},
                                     error=None if ok else "No valid attention backend")

    module = types.ModuleType("kvdoctor.vllm_pack.select")
    module.SelectorInputs = FakeInputs
    module.select_backend = select_backend
    monkeypatch.setitem(sys.modules, "kvdoctor.vllm_pack.select", module)
    FakeInputs.__dataclass_fields__  # a dataclass: explain passes only the fields it has
    return calls


def test_pack_says_which_gpus_serve_it_and_what_to_change(fake_pack):
    cause = explain_text(LOG + "GPU models and configuration : GPU 0: NVIDIA A100-SXM4-80GB\n").findings[0].cause
    assert "Knowledge pack:" in cause
    assert "with --kv-cache-dtype auto vLLM 0.30.0 would serve it with FLASHINFER on this GPU" in cause
    assert "Ada (L4/L40S): FLASHINFER" in cause and "Turing (T4)" not in cause
    assert fake_pack[0][0].version == "0.30.0" and fake_pack[0][1].head_size == 256


def test_without_the_pack_selector_the_reasons_still_explain_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "kvdoctor.vllm_pack.select", None)  # import fails
    report = explain_text(LOG)
    cause = report.findings[0].cause
    assert "Knowledge pack" not in cause
    assert "FLASH_ATTN cannot store a fp8 KV cache" in cause
    assert report.exit_code("error") == 1


def test_a_selector_that_cannot_decide_says_nothing(fake_pack, monkeypatch):
    select = sys.modules["kvdoctor.vllm_pack.select"]  # the fake; `import a.b as x` would find the real one

    monkeypatch.setattr(select, "select_backend", lambda release, inputs: types.SimpleNamespace(
        backend=None, reasons={}, error=None))
    cause = explain_text(LOG).findings[0].cause
    assert "Knowledge pack" not in cause and "FLASH_ATTN cannot store a fp8 KV cache" in cause
