"""A judged release whose dtype resolution kvdoctor did not read: the model dtype and vLLM's refusal stay unknown
(with the builder's reason), never kvdoctor's own `--dtype auto` reading standing in for the release (issue 27)."""
from __future__ import annotations

from dataclasses import replace

from conftest import EXAMPLE_MODEL

from kvdoctor.data.gpus import resolve_gpu_target
from kvdoctor.facts import collect
from kvdoctor.model.facts import Facts, GpuFacts, ServeFacts, VersionFacts
from kvdoctor.rules.engine import hint_for
from kvdoctor.vllm_pack import load_release
from kvdoctor.vllm_pack.candidates import Candidates

WHY = "the workers' bf16 check could not be asked"


def _release_without_dtype_facts(monkeypatch):
    read = load_release("0.6.6.post1")
    unread = replace(read, kinds=read.kinds - {"dtype_resolution"},
                     data={**read.data, "not_read": {"dtype_resolution": WHY}})  # fmt: skip
    monkeypatch.setattr("kvdoctor.vllm_pack.candidates.candidates", lambda version: Candidates((unread,), exact=True))
    monkeypatch.setattr("kvdoctor.vllm_pack.dtypes.load_runtime", lambda version: {})
    return unread


def _model_on_a_t4(version: str):
    gpu = GpuFacts("target", (resolve_gpu_target("T4"),))
    return collect._model_facts(str(EXAMPLE_MODEL), collect.CheckOptions(offline=True), gpu, ServeFacts(), version)


def test_release_without_dtype_resolution_leaves_dtype_and_refusal_unknown(monkeypatch):
    _release_without_dtype_facts(monkeypatch)
    model = _model_on_a_t4("0.6.6.post1")  # a bf16 checkpoint: kvdoctor's reading would say float16
    assert model.dtype is None and model.dtype_error is None
    assert model.dtype_undecided.startswith("kvdoctor did not read vLLM 0.6.6.post1's dtype resolution")
    assert WHY in model.dtype_undecided and "--vllm-version" in model.dtype_undecided
    flat = Facts(gpu=GpuFacts("target", (resolve_gpu_target("T4"),)), model=model, versions=VersionFacts(),
                 serve=ServeFacts()).flat()  # fmt: skip
    assert flat["model.dtype_error"] is None  # unknown, not 'none' (no refusal)
    assert hint_for("model.dtype_error", flat) == f"which follows from vllm.version, {model.dtype_undecided}"
    assert WHY in hint_for("attention.backend", flat)  # through model.dtype, a derived input


def test_release_with_dtype_resolution_answers_for_itself():
    model = _model_on_a_t4("0.6.6.post1")
    assert model.dtype == "bfloat16" and model.dtype_undecided is None
    assert model.dtype_error.startswith("ValueError: Bfloat16 is only supported on GPUs with compute capability")


def test_version_unknown_keeps_the_full_releases_answer():
    model = _model_on_a_t4(None)  # 0.20.0-0.34.0 agree: float16 with a warning on a T4
    assert model.dtype == "float16" and model.dtype_undecided is None
