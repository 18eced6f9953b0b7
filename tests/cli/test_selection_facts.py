"""check's attention facts, replayed from vLLM's own selector, against what people measured independently
(docs/facts/vllm-kv-cache.md section 4, written from reading the releases before the pack existed).

A disagreement here means the pack, the replay or the old facts are wrong: look before changing either side.
"""

from __future__ import annotations

import pytest

from rules_support import scenario_facts

RELEASES = ["0.25.1", "0.27.0", "0.33.0"]


def backend(**scenario) -> tuple[str | None, str | None]:
    facts = scenario_facts(**scenario)
    return facts["attention.backend"], facts["attention.error_kind"]


@pytest.mark.parametrize("vllm", RELEASES)
def test_flash_attn_needs_sm80(vllm):
    assert backend(gpu="T4", vllm=vllm, serve=["--attention-backend", "FLASH_ATTN"])[1] == "forced_invalid"
    assert backend(gpu="A10", vllm=vllm, serve=["--attention-backend", "FLASH_ATTN"]) == ("FLASH_ATTN", "none")


@pytest.mark.parametrize("vllm", RELEASES)
def test_fp8_kv_on_flash_attn_only_with_fa3(vllm):
    assert backend(kv="fp8", gpu="H100", vllm=vllm) == ("FLASH_ATTN", "none")
    assert backend(kv="fp8", gpu="A100", vllm=vllm, serve=["--attention-backend", "FLASH_ATTN"])[1] == "forced_invalid"


@pytest.mark.parametrize("vllm", RELEASES)
def test_fp8_on_ampere_goes_to_flashinfer(vllm):
    assert backend(kv="fp8", gpu="A100", vllm=vllm) == ("FLASHINFER", "none")


@pytest.mark.parametrize("vllm", RELEASES)
def test_fp8_e5m2_never_on_flash_attn(vllm):
    assert backend(kv="fp8_e5m2", gpu="H100", vllm=vllm, serve=["--attention-backend", "FLASH_ATTN"])[1] == "forced_invalid"


@pytest.mark.parametrize("vllm", RELEASES)
def test_flashinfer_range(vllm):
    assert backend(gpu="V100", vllm=vllm, serve=["--attention-backend", "FLASHINFER"])[1] == "forced_invalid"
    assert backend(gpu="L4", vllm=vllm, serve=["--attention-backend", "FLASHINFER"]) == ("FLASHINFER", "none")


def test_triton_guard_from_0_24():
    forced = ["--attention-backend", "TRITON_ATTN"]
    assert backend(kv="fp8", gpu="A100", vllm="0.23.0", serve=forced) == ("TRITON_ATTN", "none")  # dies in compile
    assert backend(kv="fp8", gpu="A100", vllm="0.24.0", serve=forced) == ("TRITON_ATTN", "constructor")
    assert backend(kv="fp8", gpu="T4", vllm="0.24.0") == ("TRITON_ATTN", "constructor")
    assert backend(kv="bfloat16", gpu="T4", vllm="0.24.0") == ("TRITON_ATTN", "constructor")


def test_flashinfer_on_turing_until_0_24():
    # vLLM 0.20-0.23 accept FlashInfer on SM75; 0.24.0 raised the floor to SM80 (FlashInfer broken on Turing)
    assert backend(kv="fp8", gpu="T4", vllm="0.23.0") == ("FLASHINFER", "none")


@pytest.mark.parametrize("vllm", RELEASES)
def test_turboquant_is_served_by_its_backend(vllm):
    assert backend(kv="turboquant_4bit_nc", gpu="A100", vllm=vllm) == ("TURBOQUANT", "none")
    assert backend(kv="turboquant_4bit_nc", gpu="A100", vllm=vllm, serve=["--attention-backend", "FLASH_ATTN"])[1] == "forced_invalid"


@pytest.mark.parametrize("vllm", RELEASES)
def test_mla_backends_by_capability(vllm):
    assert backend(model="deepseek", gpu="A100", vllm=vllm, serve=["--attention-backend", "FLASHMLA"])[1] == "forced_invalid"
    assert backend(model="deepseek", gpu="T4", vllm=vllm, serve=["--attention-backend", "TRITON_MLA"])[0] == "TRITON_MLA"


@pytest.mark.parametrize("vllm", RELEASES)
def test_mla_only_dtype_on_a_dense_model_has_no_backend(vllm):
    assert backend(kv="fp8_ds_mla", gpu="H100", vllm=vllm)[1] == "no_valid_backend"


def test_unknown_release_decides_only_when_all_agree():
    facts = scenario_facts(kv="fp8", gpu="T4", vllm=None)
    # 0.20-0.23 pick FLASHINFER on SM75, 0.24+ TRITON_ATTN and its guard refuses: undecided
    assert facts["attention.backend"] is None and facts["attention.error_kind"] is None
    assert "FLASHINFER" in facts["attention.picked_by"] and "TRITON_ATTN" in facts["attention.picked_by"]
    decided = scenario_facts(kv="auto", gpu="H100", vllm=None)
    assert decided["attention.backend"] == "FLASH_ATTN" and decided["attention.error_kind"] == "none"
