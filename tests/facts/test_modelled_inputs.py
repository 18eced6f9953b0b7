"""The pack's modelled inputs (kvdoctor/model/modelled.py): stated values parsed, the pack's own value per release,
and which selections depend on them (facts/attention.py)."""

from __future__ import annotations

import pytest

from kvdoctor.base.errors import UsageError
from kvdoctor.facts.attention import modelled_dependency, pack_value
from kvdoctor.model.facts import Facts, GpuFacts, ServeFacts, VersionFacts
from kvdoctor.model.modelled import ENV_VAR, parse_target_packages
from kvdoctor.vllm_pack import load_release
from kvdoctor.vllm_pack.candidates import candidates
from kvdoctor.vllm_pack.release import modelled_variant, pack_values
from kvdoctor.vllm_pack.select import SelectorInputs, select_backend


def test_defaults_are_the_official_image_and_say_assumed():
    targets = parse_target_packages(())
    assert targets.value("flashinfer-cubin") == "present" and targets.value("flashinfer") == "present"
    assert "assumed" in targets.describe("flashinfer-cubin") and "vllm/vllm-openai" in targets.describe("flashinfer")


def test_stated_values_env_then_flag():
    targets = parse_target_packages(["flashinfer_cubin=ABSENT"], {ENV_VAR: "flashinfer-python=absent, flashinfer-cubin=present"})
    assert targets.stated == (("flashinfer", "absent"), ("flashinfer-cubin", "absent"))  # the flag wins over the env
    assert targets.describe("flashinfer-cubin") == "flashinfer-cubin absent (stated)"


@pytest.mark.parametrize("item", ["flashinfer-cubin", "flashinfer-cubin=maybe", "xformers=absent", "=present"])
def test_bad_items_are_usage_errors(item):
    with pytest.raises(UsageError, match="NAME=present\\|absent"):
        parse_target_packages([item])


def test_pack_value_follows_the_wheels_requirements():
    # flashinfer-cubin is a Requires-Dist of 0.19.1-0.25.1 only; the builder stubbed exactly those
    assert [pack_value(load_release(v), "flashinfer-cubin") for v in ("0.18.1", "0.19.1", "0.25.1", "0.26.0", "0.34.0")] \
        == ["absent", "present", "present", "absent", "absent"]


def test_pack_values_name_the_second_read_of_releases_without_the_cubins():
    # 0.26.0-0.34.0 were asked again with flashinfer-cubin present (builders/vllm_pack/variants.py); the grid
    # releases (0.10.2-0.18.1) were not, and 0.19.1-0.25.1 were read with it present
    assert [pack_values(load_release(v), "flashinfer-cubin") for v in ("0.18.1", "0.25.1", "0.26.0", "0.34.0")] \
        == [("absent",), ("present",), ("absent", "present"), ("absent", "present")]
    assert modelled_variant(load_release("0.34.0"), "flashinfer-cubin", "present") == "flashinfer-cubin=present"
    assert modelled_variant(load_release("0.34.0"), "flashinfer-cubin", "absent") is None
    assert modelled_variant(load_release("0.25.1"), "flashinfer-cubin", "absent") is None


def _dependency(version, stated=(), **inputs):
    facts = Facts(GpuFacts("none"), None, VersionFacts(), ServeFacts(), targets=parse_target_packages(stated))
    releases = candidates(version)
    selector = SelectorInputs(head_size=inputs.pop("head_size", 128), model_dtype="bfloat16", **inputs)
    selections = {r.version: select_backend(r, selector) for r in releases.releases}
    return modelled_dependency(facts, releases, selections, selector)


def test_nvfp4_on_blackwell_depends_on_the_cubins():
    # decided by default: the pack asked 0.34.0 again with the cubins present, as the official image has them
    assumes, undecided = _dependency("0.34.0", capability=(10, 0), kv_cache_dtype="nvfp4")
    assert "flashinfer-cubin present (assumed" in assumes and undecided is None
    assumes, undecided = _dependency("0.34.0", ["flashinfer-cubin=absent"], capability=(10, 0), kv_cache_dtype="nvfp4")
    assert assumes.startswith("flashinfer-cubin absent (stated)") and undecided is None
    assumes, undecided = _dependency("0.25.1", ["flashinfer-cubin=absent"], capability=(10, 0), kv_cache_dtype="nvfp4")
    assert "the pack read vLLM 0.25.1 with flashinfer-cubin present" in undecided
    # a grid release was read once, without the cubins: undecided for the official image
    assumes, undecided = _dependency("0.18.1", capability=(10, 0), kv_cache_dtype="nvfp4")
    assert "the pack read vLLM 0.18.1 with flashinfer-cubin absent" in undecided


def test_the_cubins_change_vllms_answer_for_nvfp4_on_blackwell():
    # vLLM 0.34.0's own answers, asked both ways by the builder: the replay reads the one the target states
    present = select_backend(load_release("0.34.0"), SelectorInputs(
        capability=(10, 0), head_size=128, model_dtype="bfloat16", kv_cache_dtype="nvfp4"))
    absent = select_backend(load_release("0.34.0"), SelectorInputs(
        capability=(10, 0), head_size=128, model_dtype="bfloat16", kv_cache_dtype="nvfp4", flashinfer_cubin="absent"))
    assert not present.undecided and not absent.undecided
    assert (present.backend, present.error) != (absent.backend, absent.error)
    assert any("asked with flashinfer-cubin present" in e for e in present.evidence)
    assert not any("asked with" in e for e in absent.evidence)


def test_sinks_depend_on_the_cubins_where_flashinfer_is_tried():
    # decided by default (vLLM 0.34.0 asked with the cubins present picks FlashInfer, so it depends on FlashInfer too)
    assumes, undecided = _dependency("0.34.0", capability=(10, 0), has_sink=True, head_size=64)
    assert undecided is None and assumes.startswith("flashinfer-cubin present (assumed") \
        and "; flashinfer present (assumed" in assumes
    assert _dependency("0.18.1", capability=(10, 0), has_sink=True, head_size=64)[1] is not None
    # SM 8.0: FlashInfer's sink support never asks for TRT-LLM kernels there
    assert _dependency("0.34.0", capability=(8, 0), has_sink=True, head_size=64) == ("none", None)


def test_a_plain_hopper_selection_depends_on_nothing():
    assert _dependency("0.34.0", ["flashinfer-cubin=absent", "flashinfer=absent"], capability=(9, 0)) == ("none", None)


def test_flashinfer_picked_depends_on_flashinfer():
    assumes, undecided = _dependency("0.25.1", capability=(8, 0), kv_cache_dtype="fp8")  # FlashInfer picked
    assert assumes.startswith("flashinfer present (assumed") and undecided is None
    assumes, undecided = _dependency("0.25.1", ["flashinfer=absent"], capability=(8, 0), kv_cache_dtype="fp8")
    assert "flashinfer absent" in assumes and "importable" in undecided
