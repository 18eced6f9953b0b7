"""Quantized experts and dense FP4 layers: which kernel each release's own selection code picks per GPU (issue 25,
round 2), as check judges it.

The answers (kvdoctor/data/vllm_pack/quantization/moe_backends.json.gz) are vLLM's: select_fp8_moe_backend,
select_mxfp4_moe_backend, select_nvfp4_moe_backend and init_nvfp4_linear_kernel imported from each wheel at hand and
called with the GPU's capability stubbed (kvdoctor.builders.vllm_pack.quantization_moe). These tests check that
check's facts and rules carry those answers to the user (KVD200 refusal, KVD205 experts on a slow path, KVD206
dense NVFP4 on a slow path), on real checkpoint configs (tests/fixtures/configs/quantized/), and that the stored
answers are what the child reports.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from conftest import CONFIGS
from dryrun_support import wheel_dir

from kvdoctor.check.run import derived_facts
from kvdoctor.facts.collect import CheckOptions, collect_facts
from kvdoctor.rules import load_all_rules
from kvdoctor.rules.engine import evaluate_rules
from kvdoctor.vllm_pack.quantization_moe import asked_releases, backend_answer

QUANTIZED = CONFIGS / "quantized"
GPT_OSS = QUANTIZED / "gpt-oss-20b-mxfp4.json"
DEEPSEEK_V3 = QUANTIZED / "hub" / "deepseek-v3-fp8-block.json"
NVFP4_DENSE = QUANTIZED / "llama-3.1-8b-nvfp4-modelopt" / "config.json"
QWEN3_MOE = QUANTIZED / "hub" / "qwen3-30b-a3b-fp8-dynamic-ct.json"
GPUS = {"V100": 70, "T4": 75, "A100": 80, "L4": 89, "H100": 90, "B200": 100}
RULES = load_all_rules()
OURS = {"KVD190", "KVD200", "KVD205", "KVD206", "KVD207", "KVD208"}
ASKED = asked_releases()


def _flat(model: Path, gpu: str, vllm: str | None, serve=()) -> dict:
    facts = collect_facts(CheckOptions(model=str(model), serve_argv=tuple(serve), kv_cache_dtype="auto", gpu=gpu,
                                       vllm_version=vllm, environ={}))  # fmt: skip
    return derived_facts(facts)


def _fired(flat: dict) -> set[str]:
    return {f.rule_id for f in evaluate_rules(RULES, flat) if f.rule_id in OURS and f.status == "fired"}


@pytest.fixture(scope="module")
def nvfp4_moe(tmp_path_factory) -> Path:
    """Qwen3-30B-A3B's config (the hub fixture without its compressed-tensors block) with ModelOpt's NVFP4
    hf_quant_config.json beside it: the shape of a ModelOpt NVFP4 MoE export."""
    folder = tmp_path_factory.mktemp("qwen3-30b-a3b-nvfp4")
    config = json.loads(QWEN3_MOE.read_text())
    config.pop("quantization_config")
    (folder / "config.json").write_text(json.dumps(config))
    shutil.copy(NVFP4_DENSE.parent / "hf_quant_config.json", folder / "hf_quant_config.json")
    return folder / "config.json"


def test_the_pack_asked_the_wheels_at_hand():
    assert set(ASKED) >= {"0.23.0", "0.25.1", "0.26.0", "0.33.0", "0.34.0"}


@pytest.mark.parametrize("version", ASKED)
def test_gpt_oss_mxfp4_per_gpu_says_what_the_release_picks(version):
    """gpt-oss-20b on V100/T4/A100/L4/H100: refused by Mxfp4Config's minimum below SM 8.0 (KVD190); above it the
    experts' backend is the release's own answer, a Marlin fallback a warning naming it, the native one quiet."""
    for gpu, sm in GPUS.items():
        flat, fired = (f := _flat(GPT_OSS, gpu, version)), _fired(f)
        answer = backend_answer(version, "moe", "mxfp4", sm)
        if flat["quant.error_kind"] == "capability":
            assert fired == {"KVD190"}, (gpu, fired)
            continue
        assert flat["quant.moe_backend"] == answer.backend
        if answer.error:
            assert fired == {"KVD200"} and answer.error[:60] in flat["quant.moe_refusal"]
        elif answer.slow:
            assert fired == {"KVD205"}, (gpu, fired)
            assert "Marlin" in flat["quant.moe_slow_path"] or "emulat" in flat["quant.moe_slow_path"]
        else:
            assert fired == set(), (gpu, fired)


def test_gpt_oss_runs_on_marlin_on_ampere_and_triton_kernels_on_hopper():
    """What vLLM's gpt-oss recipe documents (Ampere: Marlin MXFP4 MoE; Hopper: triton_kernels), seen in 0.34.0's
    own oracle."""
    a100, h100 = _flat(GPT_OSS, "A100", "0.34.0"), _flat(GPT_OSS, "H100", "0.34.0")
    assert a100["quant.moe_backend"] == "MARLIN" and _fired(a100) == {"KVD205"}
    assert h100["quant.moe_backend"] == "TRITON" and _fired(h100) == set()
    assert "oracle/mxfp4.py:" in a100["quant.backend_evidence"] and "SM 9.0" in a100["quant.backend_native"]
    assert "SM 10.0" in a100["quant.backend_native"]  # FlashInfer TRT-LLM on Blackwell


@pytest.mark.parametrize("version", ASKED)
def test_block_fp8_moe_is_marlin_on_a100_and_native_on_h100(version):
    """DeepSeek-V3's block FP8 experts (Fp8MoEMethod: 128x128 weight blocks, dynamic 1x128 activations)."""
    a100, h100 = _flat(DEEPSEEK_V3, "A100", version), _flat(DEEPSEEK_V3, "H100", version)
    assert a100["quant.moe_backend"] == backend_answer(version, "moe", "fp8_block", 80).backend
    assert backend_answer(version, "moe", "fp8_block", 80).slow == "MARLIN"
    assert _fired(a100) == {"KVD205"}
    assert not backend_answer(version, "moe", "fp8_block", 90).slow and _fired(h100) == set()


def test_nvfp4_moe_on_h100_warns_and_on_b200_is_native(nvfp4_moe):
    for version in ASKED:
        h100, b200 = _flat(nvfp4_moe, "H100", version), _flat(nvfp4_moe, "B200", version)
        assert h100["model.is_moe"] is True and h100["quant.method"] == "modelopt_fp4"
        assert "KVD205" in _fired(h100), version
        native = backend_answer(version, "moe", "nvfp4", 100)
        assert "KVD205" not in _fired(b200) and not native.slow and not native.error, version
        assert b200["quant.moe_backend"] == native.backend, version
        # FlashInfer from 0.14.1 (its wheel pins flashinfer-python); vLLM's own CUTLASS FP4 MoE before
        assert native.backend.startswith("FLASHINFER") or version in LEGACY and "CUT" in native.backend.upper()


def test_dense_nvfp4_before_blackwell_warns_what_changes():
    h100, b200 = _flat(NVFP4_DENSE, "H100", "0.34.0"), _flat(NVFP4_DENSE, "B200", "0.34.0")
    assert _fired(h100) == {"KVD206"}
    assert "weight-only" in h100["quant.dense_slow_path"]
    assert _fired(b200) == set() and b200["quant.dense_slow_path"] == "none"
    assert "kernels/linear/__init__.py:" in h100["quant.backend_evidence"]


def test_a_refused_moe_backend_flag_fails_in_vllms_words():
    """--moe-backend flashinfer_trtllm names a backend the A100 does not have for FP8 experts: the oracle's
    explicit-request path raises, and check says so with its message."""
    flat = _flat(DEEPSEEK_V3, "A100", "0.34.0", serve=["--moe-backend", "flashinfer_trtllm"])
    answer = backend_answer("0.34.0", "moe", "fp8_block", 80, "flashinfer_trtllm")
    assert answer.error and "does not support the deployment configuration" in answer.error
    assert _fired(flat) == {"KVD200"}
    assert flat["quant.moe_refusal"] == answer.error


def test_capabilities_not_asked_stay_undecided_never_passed():
    """SM 8.7 (Jetson Orin) is not in the builder's capability grid: nothing was asked, so nothing is said."""
    orin = _flat(GPT_OSS, "8.7", "0.18.1")
    assert orin["quant.moe_backend"] is None and "not asked" in orin["quant.backend_evidence"]
    assert "KVD205" not in _fired(orin) and "KVD200" not in _fired(orin)


# Releases whose experts' kernel is decided before the FusedMoEConfig oracles (round 3): where each decides it.
LEGACY = ["0.10.2", "0.11.2", "0.12.0", "0.13.0", "0.14.1", "0.15.1", "0.16.0", "0.17.1", "0.18.1"]
LEGACY_VIA = {
    "fp8_block": {"0.10.2": "quantization.fp8.Fp8MoEMethod", "0.11.2": "quantization.fp8.get_fp8_moe_backend",
                  "0.13.0": "quantization.fp8.get_fp8_moe_backend",
                  "0.14.1": "fused_moe.oracle.fp8.select_fp8_moe_backend"},
    "mxfp4": {v: "quantization.mxfp4.Mxfp4MoEMethod" for v in LEGACY},
    "nvfp4": {"0.10.2": "nvfp4_moe_support.detect_nvfp4_moe_support",
              "0.13.0": "nvfp4_moe_support.detect_nvfp4_moe_support",
              "0.14.1": "fused_moe.oracle.nvfp4.select_nvfp4_moe_backend"},
}  # fmt: skip


@pytest.mark.parametrize("version", [v for v in LEGACY if v in ASKED])
def test_older_releases_are_asked_where_they_decide(version):
    """0.10.2-0.18.1: every kind answered on every grid capability (no stand-in failures), by the function or MoE
    method the release's own quantization method calls, with its file:line."""
    from kvdoctor.vllm_pack.quantization_moe import _answers

    release = _answers()["releases"][version]
    for kind in ("fp8_block", "fp8_tensor", "mxfp4", "nvfp4"):
        for sm in ("75", "80", "86", "89", "90", "100"):
            answer = backend_answer(version, "moe", kind, int(sm))
            assert answer is not None and (answer.backend or answer.error), (kind, sm)
            via = release["moe"][kind][sm]["auto"].get("via")
            expected = LEGACY_VIA.get(kind, {}).get(version)
            if expected:
                assert via and via.endswith(expected), (kind, via)
        where = release["where"][f"moe:{kind}"]["select"]
        assert where and where.startswith("vllm/model_executor/layers/"), (kind, where)


@pytest.mark.parametrize("version", [v for v in LEGACY if v in ASKED])
def test_older_fp8_experts_take_marlin_below_the_threshold_fp8_py_states(version):
    """Two independent readings agree: the static reader's Fp8LinearMethod threshold (fp8.py's
    has_device_capability(89), stored as ct_schemes.fp8_marlin_below) and the experts' kernel the release's own MoE
    selection picks when asked (Marlin below it, a native FP8 path at and above it)."""
    from kvdoctor.vllm_pack.quantization import release_quantization

    stated = (release_quantization(version).ct_schemes or {}).get("fp8_marlin_below", {}).get("value")
    assert stated == 89
    for kind in ("fp8_block", "fp8_tensor"):
        for sm in (75, 80, 86, 89, 90):
            answer = backend_answer(version, "moe", kind, sm)
            assert (answer.slow == "MARLIN") == (sm < stated), (kind, sm, answer.backend)



def test_with_the_version_unknown_every_candidate_must_agree():
    """Version unknown: the candidates are the releases read in full (0.20.0-0.34.0), all asked; they agree on
    gpt-oss (Marlin on the A100, triton_kernels on the H100; 0.20.x through select_gpt_oss_mxfp4_moe_backend). A
    candidate set with a release that was not asked is undecided, never passed (see the SM 8.7 test above)."""
    a100, h100 = _flat(GPT_OSS, "A100", None), _flat(GPT_OSS, "H100", None)
    assert a100["quant.moe_backend"] == "MARLIN" and _fired(a100) == {"KVD205"}
    assert h100["quant.moe_backend"] == "TRITON" and _fired(h100) == set()
    assert all(backend_answer(v, "moe", "mxfp4", 90).backend == "TRITON" for v in ASKED if v != "0.19.1"
               and v.split(".")[1] >= "20")  # fmt: skip


def test_unquantized_and_dense_fp8_models_have_no_backend_verdict():
    dense = _flat(QUANTIZED / "llama-3.1-8b-fp8-block.json", "A100", "0.34.0")
    assert dense["quant.moe_backend"] == "none" and dense["quant.dense_slow_path"] == "none"
    assert not {"KVD200", "KVD205", "KVD206"} & set(_fired(dense))


@pytest.mark.vllm_wheel
@pytest.mark.parametrize("version", ["0.34.0", "0.13.0"])
def test_stored_answers_are_what_the_child_reports(version):
    """The stored answers are vLLM's: the child asks 0.34.0's oracles (and 0.13.0's pre-oracle selection) again and
    gets them."""
    python = os.environ.get("KVDOCTOR_PACK_PYTHON")
    if not python:
        pytest.skip("KVDOCTOR_PACK_PYTHON (the builder's venv, made by .ci/run) is not set")
    from kvdoctor.builders.vllm_pack.quantization_moe import ask_release
    from kvdoctor.builders.vllm_pack.wheel import find_wheel
    from kvdoctor.vllm_pack.quantization_moe import FILE
    from kvdoctor.vllm_pack.store import read_pack_file

    wheel = find_wheel(wheel_dir(), version)
    if wheel is None:
        pytest.skip(f"no vllm-{version} wheel")
    with tempfile.TemporaryDirectory():
        fresh = ask_release(version, wheel, python)
    assert fresh == read_pack_file(FILE)["releases"][version]


LLAMA = CONFIGS / "llama-3.1-8b-instruct.json"


@pytest.mark.parametrize("version", ASKED)
def test_dense_mxfp4_says_what_the_releases_mxfp4_config_builds(version):
    """--quantization mxfp4 on a dense bf16 model: each release's Mxfp4Config.get_quant_method, asked for a linear
    layer, either raises (KVD207, its words) or returns UnquantizedLinearMethod (KVD208); a release whose answer was
    not stored stays undecided (neither fires)."""
    answer = backend_answer(version, "dense", "mxfp4_method", 90)
    flat = _flat(LLAMA, "H100", version, serve=["--quantization", "mxfp4"])
    fired = _fired(flat) & {"KVD207", "KVD208"}
    if answer is None:
        assert flat["quant.dense_method"] is None and fired == set()
    elif answer.error:
        assert fired == {"KVD207"} and flat["quant.dense_refusal"] == answer.error
        assert "mxfp4.py:" in flat["quant.backend_evidence"]
    else:
        assert answer.backend == "UnquantizedLinearMethod" and fired == {"KVD208"}


def test_dense_mxfp4_refused_in_0_10_2_and_unquantized_later():
    """0.10.2's Mxfp4Config raises for a linear layer ("Mxfp4 linear layer is not implemented"); later releases
    fall back to UnquantizedLinearMethod (read in the wheels: mxfp4.py get_quant_method)."""
    first = backend_answer("0.10.2", "dense", "mxfp4_method", 90)
    assert first.error == "Mxfp4 linear layer is not implemented"
    later = [v for v in ASKED if v != "0.10.2" and backend_answer(v, "dense", "mxfp4_method", 90)]
    assert later and all(backend_answer(v, "dense", "mxfp4_method", 90).backend == "UnquantizedLinearMethod"
                         for v in later)  # fmt: skip


def test_gpt_oss_linear_layers_are_not_judged_as_dense_mxfp4():
    flat = _flat(GPT_OSS, "H100", "0.34.0")
    assert flat["quant.dense_method"] == "none" and flat["quant.dense_refusal"] == "none"
    assert not {"KVD207", "KVD208"} & _fired(flat)


CT_ASKED = [v for v in ASKED if backend_answer(v, "moe", "ct_fp8_channel", 90) is not None]


@pytest.mark.parametrize("version", CT_ASKED)
def test_compressed_tensors_fp8_experts_get_the_releases_own_backend(version):
    """Qwen3-30B-A3B FP8-dynamic (compressed-tensors: channel weights, per-token dynamic activations): from 0.15.1
    CompressedTensorsW8A8Fp8MoEMethod calls the fp8 oracle with kFp8StaticChannelSym x kFp8DynamicTokenSym and
    allow_vllm_cutlass=True (0.14.1: select_fp8_moe_backend(block_quant, tp_size, with_lora_support,
    allow_vllm_cutlass=True)); check carries that answer per GPU."""
    for gpu, sm in (("A100", 80), ("H100", 90), ("B200", 100)):
        flat = _flat(QWEN3_MOE, gpu, version)
        answer = backend_answer(version, "moe", "ct_fp8_channel", sm)
        assert flat["quant.moe_backend"] == (answer.backend or "none"), gpu
        assert ("KVD205" in _fired(flat)) == bool(answer.slow and not answer.error), gpu
        assert "oracle/fp8.py:" in flat["quant.backend_evidence"]


def test_compressed_tensors_experts_before_the_oracle_took_their_keys_stay_undecided():
    """0.10.2-0.13.0: CompressedTensorsW8A8Fp8MoEMethod decides in its own __init__ (not asked): no verdict."""
    for version in ("0.12.0", "0.13.0"):
        assert backend_answer(version, "moe", "ct_fp8_channel", 80) is None
        flat = _flat(QWEN3_MOE, "A100", version)
        assert flat["quant.moe_backend"] is None and "KVD205" not in _fired(flat)
