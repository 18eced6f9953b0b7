"""Attention-backend selection replayed from the pack, against vLLM's own answers.

The oracle: for each release the builder called vLLM's real `get_attn_backend_cls` on a deterministic sample of
configurations per capability (tests/vllm_pack/samples/*.json.gz); the replay must give the same backend or the
same error message, word for word, wherever it does not say `undecided`.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from kvdoctor.vllm_pack import load_release, releases_with
from kvdoctor.vllm_pack.release import pack_values
from kvdoctor.vllm_pack.select import SelectorInputs, select_backend

SAMPLES = Path(__file__).parent / "samples"


def _inputs(sample: dict, flashinfer_cubin: str = "present") -> SelectorInputs:
    c = sample["config"]
    return SelectorInputs(
        flashinfer_cubin=flashinfer_cubin,
        capability=tuple(sample["capability"]), head_size=c["head_size"], model_dtype=c["dtype"],
        kv_cache_dtype=c["kv_cache_dtype"], block_size=c["block_size"], use_mla=c["use_mla"],
        has_sink=c["has_sink"], use_sparse=c["use_sparse"], attn_type=c["attn_type"],
        forced_backend=sample["forced"], num_heads=sample["num_heads"],
        use_non_causal=c.get("use_non_causal", False),
        sliding_window=4096 if c.get("has_sliding_window") else None)


def _outcome(selection) -> str | None:
    if selection.error and selection.error_kind != "constructor":
        return "ValueError: " + selection.error
    return selection.backend


def _sampled_releases():
    return [v for v in releases_with("backend_replay") if (SAMPLES / f"{v}.json.gz").exists()]


@pytest.mark.parametrize("version", _sampled_releases())
def test_replay_matches_vllms_real_selection(version):
    # the samples vLLM answered as the release was read first, and (0.26.0+: the wheel does not require
    # flashinfer-cubin) those it answered asked again with FlashInfer's TRT-LLM cubins present
    release = load_release(version)
    stored = json.loads(gzip.decompress((SAMPLES / f"{version}.json.gz").read_bytes()))
    runs = [(pack_values(release, "flashinfer-cubin")[0], stored["samples"])]
    runs += [(name.split("=", 1)[1], samples) for name, samples in sorted(stored.get("variants", {}).items())]
    for cubin, samples in runs:
        decided = mismatched = 0
        first = None
        for sample in samples:
            real = sample.get("backend") or sample.get("error")
            if real and "Torch not compiled with CUDA" in real:
                continue  # vLLM itself could not answer on the builder's CPU
            selection = select_backend(release, _inputs(sample, cubin))
            if selection.undecided:
                continue
            decided += 1
            if _outcome(selection) != real:
                mismatched += 1
                first = first or (sample, _outcome(selection))
        assert decided >= 0.9 * len(samples), f"flashinfer-cubin {cubin}: only {decided} of {len(samples)} decided"
        assert mismatched == 0, f"flashinfer-cubin {cubin}: {mismatched} differ; first: {first}"


def _select(version, capability, **kw):
    defaults = dict(head_size=128, model_dtype="bfloat16", kv_cache_dtype="auto")
    return select_backend(load_release(version), SelectorInputs(capability=capability, **(defaults | kw)))


def test_founding_config_picks_turboquant_on_a100_and_says_why_the_others_are_out():
    sel = _select("0.25.1", (8, 0), kv_cache_dtype="turboquant_k8v4")
    assert sel.backend == "TURBOQUANT" and sel.error is None and not sel.undecided
    assert sel.reasons["FLASH_ATTN"] == ("kv_cache_dtype not supported",)
    assert sel.reasons["TRITON_ATTN"] == ("kv_cache_dtype not supported",)
    assert any("vllm/platforms/cuda.py:" in e for e in sel.evidence)


def test_fp8_on_a100_flash_attn_refuses_on_fa2_and_flashinfer_serves_it():
    sel = _select("0.25.1", (8, 0), kv_cache_dtype="fp8")
    assert sel.reasons["FLASH_ATTN"] == ("kv_cache_dtype not supported",)
    assert sel.backend == "FLASHINFER"
    # on H100 FA3 takes fp8
    assert _select("0.25.1", (9, 0), kv_cache_dtype="fp8").backend == "FLASH_ATTN"


def test_fp8_with_triton_attn_forced_on_a100_is_refused_by_the_constructor_from_0_24_0():
    old = _select("0.23.0", (8, 0), kv_cache_dtype="fp8", forced_backend="TRITON_ATTN")
    assert old.backend == "TRITON_ATTN" and old.error is None  # no guard: it dies later, in the compile
    for version in ("0.24.0", "0.25.1", "0.34.0"):
        new = _select(version, (8, 0), kv_cache_dtype="fp8", forced_backend="TRITON_ATTN", device_name="A100")
        assert new.backend == "TRITON_ATTN" and new.error_kind == "constructor", version
        assert new.error.startswith("ValueError: FP8 KV cache is not supported by the Triton attention backend on "
                                    "A100 (compute capability 8.0)"), new.error
    assert _select("0.25.1", (8, 9), kv_cache_dtype="fp8", forced_backend="TRITON_ATTN").error is None


def test_sinks_on_sm80_rule_out_flash_attn_in_its_own_words():
    sel = _select("0.25.1", (8, 0), has_sink=True)
    assert "sink not supported on compute capability < 9.0" in sel.reasons["FLASH_ATTN"]
    assert sel.backend == "TRITON_ATTN"


def test_mla_models_take_an_mla_backend():
    hopper = _select("0.25.1", (9, 0), head_size=576, use_mla=True, num_heads=128)
    assert hopper.backend in ("FLASH_ATTN_MLA", "FLASHMLA") and not hopper.undecided
    ampere = _select("0.25.1", (8, 0), head_size=576, use_mla=True, num_heads=128)
    assert ampere.backend == "TRITON_MLA"
    assert "compute capability not supported" in ampere.reasons["FLASHMLA"]


def test_no_valid_backend_gives_vllms_error_with_every_reason():
    sel = _select("0.25.1", (7, 5), kv_cache_dtype="fp8_ds_mla")
    assert sel.backend is None and sel.error_kind == "no_valid_backend"
    assert sel.error.startswith("No valid attention backend found for cuda with AttentionSelectorConfig(head_size=128, "
                                "dtype=torch.bfloat16, kv_cache_dtype=fp8_ds_mla")
    assert "Reasons: {FLASH_ATTN: [" in sel.error


def test_an_unknown_forced_backend_is_vllms_own_error():
    sel = _select("0.25.1", (8, 0), forced_backend="FLASH_ATTENTION")
    assert sel.error_kind == "unknown_backend"
    assert sel.error.startswith("Unknown attention backend: 'FLASH_ATTENTION'. Valid options are: FLASH_ATTN,")


def test_a_forced_invalid_backend_names_its_reasons():
    sel = _select("0.25.1", (8, 0), kv_cache_dtype="fp8", forced_backend="FLASH_ATTN")
    assert sel.error == ("Selected backend AttentionBackendEnum.FLASH_ATTN is not valid for this configuration. "
                         "Reason: ['kv_cache_dtype not supported']")


def test_a_capability_the_pack_did_not_ask_about_is_undecided_not_guessed():
    sel = _select("0.25.1", (6, 1))
    assert sel.backend is None and sel.error is None and sel.undecided
