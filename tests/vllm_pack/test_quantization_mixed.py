"""ModelOpt MIXED_PRECISION per layer (issue 25): the static reading of each release's
ModelOptMixedPrecisionConfig.get_quant_method (builders/vllm_pack/quantization_mixed.py) against vLLM's own dispatch
asked by import (child_quantization.run_mixed), and what check says of hub-shaped checkpoints, the held-back ones
(hub/held_back_mixed.txt, drawn before KVD209 was written) included."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from dryrun_support import wheel_dir
from rules_support import fired, scenario_facts

from kvdoctor.vllm_pack.quantization import release_quantization
from kvdoctor.vllm_pack.quantization_mixed import judge_mixed, layer_part, quantized_layers
from kvdoctor.vllm_pack.store import pack_releases

HUB = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "quantized" / "hub"
HELD_BACK = [n for n in (HUB / "held_back_mixed.txt").read_text().splitlines() if n and not n.startswith("#")]
DEV = ["qwen3.5-397b-a17b-nvfp4-v2-mixed", "qwen3.6-35b-a3b-nvfp4-mixed", "qwen3.6-27b-nvfp4-mixed"]
MIXED_RELEASES = [v for v in pack_releases() if (q := release_quantization(v)) and q.modelopt_mixed]


def _config(name: str) -> Path:
    folder = HUB / name
    return folder / "config.json" if folder.is_dir() else HUB / f"{name}.json"


def _quant_config(name: str) -> dict:
    path = _config(name)
    raw = json.loads(path.read_text())
    beside = path.with_name("hf_quant_config.json")
    return raw.get("quantization_config") or (json.loads(beside.read_text()) if path.name == "config.json"
                                              and beside.is_file() else {})  # fmt: skip


def _static(name: str, version: str, is_moe: bool) -> dict[str, str]:
    """(algo, part) -> the method the static reading says this release builds ('unbuilt' where no branch names it)."""
    verdict = judge_mixed(release_quantization(version), _quant_config(name), is_moe)
    out = {}
    for item in verdict.built:
        label, method = item.split(" -> ")
        out[label.rsplit(" x", 1)[0]] = method.split(" (")[0]
    for item in verdict.unbuilt:
        out[item.split(":")[0].rsplit(" x", 1)[0]] = "unbuilt"
    return out


def test_the_dispatch_is_read_from_every_release_that_has_the_class():
    assert MIXED_RELEASES[0] == "0.17.0" and MIXED_RELEASES[-1] == pack_releases()[-1]  # 0.17.0: its first release
    first, last = release_quantization("0.17.0").modelopt_mixed, release_quantization("0.34.0").modelopt_mixed
    assert set(first["linear"]["built"]) == {"FP8", "NVFP4"} and first["linear"]["types"] == ["LinearBase"]
    assert first["linear"]["otherwise"]["method"] == "UnquantizedLinearMethod" and first["moe"]["otherwise"]["method"] == "None"
    assert {"W4A16_NVFP4", "MXFP8", "FP8_PB_WO"} <= set(last["linear"]["built"]) and "ParallelLMHead" in last["linear"]["types"]
    assert last["both"]["algos"]  # 0.34.0's block codecs, named in vllm/utils/b12x.py (followed through the import)


def test_layer_parts():
    assert layer_part("model.layers.0.mlp.experts") == "experts"
    assert layer_part("backbone.layers.1.mixer.experts.3.down_proj") == "experts"
    assert layer_part("model.layers.0.mlp.shared_expert.gate_proj") == "linear"
    assert layer_part("backbone.layers.1.mixer.shared_experts.up_proj") == "linear"
    assert layer_part("lm_head") == "lm_head"
    assert quantized_layers({"quantization": {"quantized_layers": {"a.b": {"quant_algo": "fp8"}}}}) == {"a.b": "FP8"}


def test_w4a16_experts_are_unbuilt_where_no_branch_names_them_and_kvd209_says_so():
    older = _static("qwen3.6-35b-a3b-nvfp4-mixed", "0.20.0", is_moe=True)
    assert older["W4A16_NVFP4 experts"] == older["W4A16_NVFP4 linear"] == older["W4A16_NVFP4 lm_head"] == "unbuilt"
    assert older["FP8 linear"] == "ModelOptFp8LinearMethod"
    assert "KVD209" in fired(model="mixed-w4a16-moe", gpu="H100", vllm="0.20.0")
    assert "KVD209" not in fired(model="mixed-w4a16-moe", gpu="H100", vllm="0.34.0")
    flat = scenario_facts(model="mixed-w4a16-moe", gpu="H100", vllm="0.20.0")
    assert flat["quant.mixed_fix_releases"] not in (None, "none") and "0.34.0" in flat["quant.mixed_fix_releases"]


def test_nvfp4_experts_go_on_to_the_stored_kernel_answers():
    """NVFP4 (W4A4) experts are built with ModelOptNvFp4FusedMoE, whose kernel the pack asked: Marlin on an H100."""
    h100 = fired(model="mixed-nvfp4-moe", gpu="H100", vllm="0.34.0")
    assert "KVD205" in h100 and "KVD209" not in h100
    assert "KVD205" not in fired(model="mixed-nvfp4-moe", gpu="B200", vllm="0.34.0")
    assert "KVD190" in fired(model="mixed-nvfp4-moe", gpu="A100", vllm="0.20.0")  # the class minimum then: SM 8.9


@pytest.mark.vllm_wheel
@pytest.mark.parametrize("version", ["0.17.1", "0.20.0", "0.25.1", "0.29.0", "0.34.0"])
def test_static_reading_agrees_with_vllms_own_dispatch(version):
    """vLLM's own get_quant_method, asked by import in the builder's venv, builds the same method per (algo, part)
    as the static reading says, for every dev and held-back checkpoint."""
    python = os.environ.get("KVDOCTOR_PACK_PYTHON")
    if not python:
        pytest.skip("KVDOCTOR_PACK_PYTHON (the builder's venv, made by .ci/run) is not set")
    from kvdoctor.builders.vllm_pack.build import run_child
    from kvdoctor.builders.vllm_pack.wheel import extract, find_wheel, stub_versions

    wheel = find_wheel(wheel_dir(), version)
    if wheel is None:
        pytest.skip(f"no vllm-{version} wheel")
    names = DEV + [n for n in HELD_BACK if _config(n).is_file()]
    with tempfile.TemporaryDirectory() as tmp:
        shipped = extract(wheel, Path(tmp))
        pins = {name: spec for name, spec, _ in shipped["requirements"]}
        request = {"version": version, "tasks": ["module:quantization"], "legacy": True,
                   "compiled_modules": shipped["compiled_modules"], "stub_packages": stub_versions(pins),
                   "mixed_configs": {n: _quant_config(n) for n in names}}
        raw = run_child(python, Path(tmp), request, timeout=600)["quantization"]["mixed"]
    for name in names:
        layers = quantized_layers(_quant_config(name))
        own: dict[str, set] = {}
        for key, algo in layers.items():
            parts = key.split(".")
            prefix = ".".join(parts[: parts.index("experts") + 1]) if "experts" in parts else key
            answer = raw[name][prefix]
            got = "unbuilt" if answer in ("None", "UnquantizedLinearMethod") else answer
            own.setdefault(f"{algo} {layer_part(key)}", set()).add(got if isinstance(got, str) else json.dumps(got))
        static = _static(name, version, is_moe=True)
        assert {k: v.pop() if len(v) == 1 else v for k, v in own.items()} == static, (name, version)
