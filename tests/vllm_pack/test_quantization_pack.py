"""The shipped quantization facts (kvdoctor/data/vllm_pack/quantization/) are what the static reader makes of
vLLM's released wheels, byte for byte, and agree with vLLM's own classes asked by import (issue 25)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from dryrun_support import wheel_dir

from kvdoctor.builders.vllm_pack.build import run_child
from kvdoctor.builders.vllm_pack.quantization import OUT, ReleaseSource, dumps, release_file
from kvdoctor.builders.vllm_pack.wheel import extract, find_wheel, stub_versions
from kvdoctor.base.versions import release_numbers
from kvdoctor.vllm_pack.quantization import release_quantization
from kvdoctor.vllm_pack.store import pack_releases

WHEELS = wheel_dir()
PACK_PYTHON = os.environ.get("KVDOCTOR_PACK_PYTHON")
AT_HAND = ("0.23.0", "0.25.1", "0.26.0", "0.33.0", "0.34.0")  # the wheels .ci/run downloads


def test_every_pack_release_has_its_quantization_facts():
    shipped = {p.stem for p in OUT.glob("*.json")}
    assert set(pack_releases()) <= shipped
    for version in pack_releases():
        quant = release_quantization(version)
        assert {"awq", "gptq", "fp8"} <= set(quant.methods), version
        assert ("compressed-tensors" in quant.methods) == (release_numbers(version) >= (0, 5)), version  # 0.5 added it
        assert quant.methods_where.startswith("vllm/model_executor/layers/quantization/__init__.py:")
        assert "capability" in quant.messages and "unknown_method" in quant.messages, version


def test_the_issue_minimum_capabilities_of_0_33_0():
    """vllm/config/vllm.py:930 and each config class's get_min_capability(): AWQ 75, FP8 75, MXFP4 80."""
    quant = release_quantization("0.33.0")
    assert {m: quant.methods[m].min_capability for m in ("awq", "fp8", "mxfp4")} == {"awq": 75, "fp8": 75, "mxfp4": 80}
    assert quant.messages["capability"] == (
        "The quantization method {0} is not supported for the current GPU. Minimum capability: {1}. "
        "Current capability: {2}.", "vllm/config/vllm.py:931")
    assert quant.methods["fp8"].min_capability_where == "vllm/model_executor/layers/quantization/fp8.py:147"


@pytest.mark.vllm_wheel
@pytest.mark.parametrize("version", AT_HAND)
def test_rebuild_from_the_wheel_is_byte_identical(version):
    wheel = find_wheel(WHEELS, version)
    if wheel is None:
        pytest.skip(f"no vllm-{version} wheel in {WHEELS}")
    rebuilt = dumps(release_file(version, ReleaseSource(wheel)))
    assert rebuilt == (OUT / f"{version}.json").read_text("utf-8"), f"{version}.json differs from the rebuild"


@pytest.mark.vllm_wheel
def test_static_reading_agrees_with_vllms_own_classes():
    """The builder's venv imports 0.33.0's quantization package (compiled ops stood in) and asks every registered
    method's class; each answer it gives equals what the static reader shipped."""
    version = "0.33.0"
    if not PACK_PYTHON:
        pytest.skip("KVDOCTOR_PACK_PYTHON (the builder's venv, made by .ci/run) is not set")
    wheel = find_wheel(WHEELS, version)
    if wheel is None:
        pytest.skip(f"no vllm-{version} wheel in {WHEELS}")
    with tempfile.TemporaryDirectory() as tmp:
        shipped = extract(wheel, Path(tmp))
        pins = {name: spec for name, spec, _ in shipped["requirements"]}
        request = {"version": version, "tasks": ["module:quantization"], "legacy": True,
                   "compiled_modules": shipped["compiled_modules"], "stub_packages": stub_versions(pins),
                   "capabilities": [[9, 0]]}  # fmt: skip
        raw = run_child(PACK_PYTHON, Path(tmp), request, timeout=600)
    answers = raw["quantization"]
    static = release_quantization(version).methods
    assert set(answers) == set(static)
    asked = {m: a["min_capability"] for m, a in answers.items() if isinstance(a.get("min_capability"), int)}
    assert len(asked) >= 25, answers
    assert asked == {m: static[m].min_capability for m in asked}
    dtypes = {m: tuple(a["act_dtypes"]) for m, a in answers.items() if isinstance(a.get("act_dtypes"), list)}
    assert len(dtypes) >= 20
    assert dtypes == {m: static[m].act_dtypes for m in dtypes}
    for method, answer in answers.items():
        if "config_class" in answer:
            assert static[method].config_class.endswith(":" + answer["config_class"]), method


@pytest.mark.parametrize(("name", "version"), [
    ("vllm-0.8.5.post1-cp38-abi3-manylinux1_x86_64.whl", "0.8.5.post1"),   # was None: the .post1 release went unread
    ("vllm-0.20.1-1-cp38-abi3-manylinux_2_35_x86_64.whl", "0.20.1"),        # a build tag is not part of the release
    ("vllm-0.34.0-cp38-abi3-manylinux_2_28_x86_64.whl", "0.34.0"),
    ("vllm-0.34.0.dev12-cp38-abi3-manylinux_2_28_x86_64.whl", None),        # not a release
])
def test_release_of_reads_post_releases(tmp_path, name, version):
    from kvdoctor.builders.vllm_pack.quantization import release_of, sources
    (tmp_path / name).write_bytes(b"")
    assert release_of(tmp_path / name) == version
    tree = tmp_path / "trees" / "0.8.5.post1"
    (tree / "vllm/model_executor/layers/quantization").mkdir(parents=True)
    (tree / "vllm/model_executor/layers/quantization/__init__.py").write_text("")
    assert release_of(tree) == "0.8.5.post1" and "0.8.5.post1" in sources(None, [tmp_path / "trees"])
