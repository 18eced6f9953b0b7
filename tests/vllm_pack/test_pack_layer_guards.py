"""Layer features the selector never asks about (issue 27, 1): each backend's implementation constructor and
metadata builder, probed per release with sliding windows, soft caps, sinks, ALiBi and other head sizes
(kvdoctor/builders/vllm_pack/child_layer_probes.py), decide whether vLLM starts; a release whose constructors
were not probed with the model's layer features is undecided, never a PASS."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvdoctor.vllm_pack import load_release, releases_with
from kvdoctor.vllm_pack.select import SelectorInputs, select_backend
from kvdoctor.vllm_pack.selector import layer_error, layer_features
from kvdoctor.vllm_pack.store import load_selection

REPO = Path(__file__).resolve().parents[2]
GEMMA2 = REPO / "tests" / "fixtures" / "configs" / "gemma-2-9b-it.json"
SM90_SLIDING = "FlashInfer backend on SM90 currently crashes with sliding-window attention layers"


def _inputs(**kw) -> SelectorInputs:
    base = dict(capability=(9, 0), head_size=128, model_dtype="bfloat16", forced_backend="FLASHINFER")
    return SelectorInputs(**{**base, **kw})


def _probed(version: str) -> bool:
    return "layer_guards" in (load_selection(version, (9, 0)) or {})


PROBED = [v for v in releases_with("backend_replay") if _probed(v)]


# the releases whose flashinfer.py raises it (grep "currently crashes with" in each wheel: 0.25.0 adds it, 0.30.0
# drops it)
SM90_SLIDING_RELEASES = {"0.25.0", "0.25.1", "0.26.0", "0.27.0", "0.27.1", "0.28.0", "0.29.0"}


@pytest.mark.parametrize("version", PROBED)
def test_flashinfer_refuses_sliding_window_layers_on_sm90_where_the_release_does(version):
    """The H200 start-ups of issue 27: FlashInfer forced on a sliding-window model stops in its metadata builder
    (0.25.0-0.29.0); the probe finds it there and nowhere else."""
    selection = select_backend(load_release(version), _inputs(sliding_window=4096))
    if version in SM90_SLIDING_RELEASES:
        assert selection.error_kind == "constructor" and SM90_SLIDING in selection.error, selection
        assert any("vllm/v1/attention/backends/flashinfer.py:" in e for e in selection.evidence)
    else:
        assert SM90_SLIDING not in (selection.error or ""), selection
        assert not selection.undecided, selection
    # the same layer without a window, and the window on an A100, construct
    assert select_backend(load_release(version), _inputs()).error is None
    assert select_backend(load_release(version), _inputs(capability=(8, 0), sliding_window=4096)).error is None


def test_flex_attention_refuses_a_soft_cap_in_its_constructor():
    if "0.25.1" not in PROBED:
        pytest.skip("0.25.1's constructors were not probed")
    selection = select_backend(load_release("0.25.1"), _inputs(forced_backend="FLEX_ATTENTION", logits_soft_cap=50.0,
                                                                capability=(8, 0)))
    assert selection.error_kind == "constructor" and "soft cap" in selection.error


def test_a_missing_probe_is_undecided_never_a_pass():
    attention = {"guards": {}}
    error, why = layer_error(attention, "FLASH_ATTN", _inputs(sliding_window=4096), "0.99.0")
    assert error is None and "did not probe" in why
    # a plain layer needs no layer probe
    assert layer_error(attention, "FLASH_ATTN", _inputs(), "0.99.0") == (None, None)


def test_a_cell_the_probe_could_not_construct_is_undecided():
    layer = {"features": {}, "probed": {"FLASHINFER": {"impl": ["9.0|auto"], "builder": []}}, "refusals": {}}
    error, why = layer_error({"layer_guards": layer}, "FLASHINFER", _inputs(sliding_window=4096), "0.99.0")
    assert error is None and "could not be probed" in why
    layer["probed"]["FLASHINFER"]["builder"] = ["9.0|auto"]
    assert layer_error({"layer_guards": layer}, "FLASHINFER", _inputs(sliding_window=4096), "0.99.0") == (None, None)
    # head sizes are constructor-only: no builder probe needed
    layer["probed"]["FLASHINFER"]["builder"] = []
    assert layer_error({"layer_guards": layer}, "FLASHINFER", _inputs(head_size=256), "0.99.0") == (None, None)


def test_turboquant_with_sliding_window_layers_is_undecided_where_the_selector_lets_it_through():
    """0.25.1 stops in page_size_bytes (TurboQuant's KV-cache spec with sliding-window layers), which the probes do not
    reach: undecided, never a PASS; 0.26.0 refuses it by name in the selector (decided)."""
    if "0.25.1" not in PROBED:
        pytest.skip("0.25.1's constructors were not probed")
    tq = dict(forced_backend=None, kv_cache_dtype="turboquant_k8v4", sliding_window=4096)
    selection = select_backend(load_release("0.25.1"), _inputs(**tq))
    assert selection.undecided and "TurboQuant KV-cache spec" in selection.undecided[0], selection
    assert select_backend(load_release("0.25.1"), _inputs(**{**tq, "sliding_window": None})).error is None


def test_layer_features_of_real_layers():
    assert layer_features(_inputs(sliding_window=4096, has_sink=True, head_size=64)) == (
        "sliding_window", "sinks", "head_size_64")
    assert layer_features(_inputs(use_mla=True, head_size=576)) == ()


def test_check_on_an_h200_fails_gemma2_with_flashinfer_forced():
    """Through the CLI: a Gemma-2 config (sliding window 4096) with FlashInfer forced on an H200, vLLM 0.25.1."""
    if "0.25.1" not in PROBED:
        pytest.skip("0.25.1's constructors were not probed")
    proc = subprocess.run([sys.executable, "-m", "kvdoctor", "check", "--gpu", "H200", "--vllm-version", "0.25.1",
                           "--no-compile", "--format", "json", "--", "vllm", "serve", str(GEMMA2),
                           "--attention-backend", "FLASHINFER"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert SM90_SLIDING in proc.stdout
    report = json.loads(proc.stdout)
    assert report["verdict"] == "FAIL"


def test_every_full_release_was_probed_with_layer_features():
    """Else every check of a sliding-window, sink or soft-capped model would be undecided with the version unknown."""
    assert PROBED == list(releases_with("backend_replay"))


# ------------------------------------------------------------ releases the pack holds as vLLM's answers over a grid
from kvdoctor.base.versions import release_numbers  # noqa: E402
from kvdoctor.vllm_pack.store import pack_releases  # noqa: E402
from kvdoctor.vllm_pack.select_grid import select_from_grid, v0_grid  # noqa: E402
from kvdoctor.vllm_pack.store import load_backend_grid  # noqa: E402

GRID = [v for v in pack_releases() if (0, 11) <= release_numbers(v)[:2] < (0, 20)]


@pytest.mark.parametrize("version", GRID)
def test_grid_releases_probed_their_v1_backends_with_layer_features(version):
    """0.11-0.19: the backends the grid's answers name were constructed with each layer feature too, so a Gemma-2 or
    gpt-oss model is decided there, not undecided for want of a probe."""
    grid = load_backend_grid(version)
    assert grid.get("layer_guards"), f"vLLM {version}: no layer probes in the pack"
    probed = grid["layer_guards"]["probed"]
    # 0.11.0 answers FlashInfer by class path, whose module the builder cannot import (no FlashInfer stand-in):
    # not probed, so FlashInfer with layer features stays undecided there
    flashinfer = {"FLASHINFER"} if "backend:FLASHINFER" in grid["answers"] else set()
    assert {"FLASH_ATTN", "TRITON_ATTN"} | flashinfer <= set(probed)
    assert not flashinfer or (probed["FLASHINFER"]["impl"] and probed["FLASHINFER"]["builder"])


@pytest.mark.parametrize("version", GRID)
def test_flex_attention_refuses_a_soft_cap_and_alibi_in_its_constructor_on_grid_releases(version):
    """The selector lets FlexAttention through for a Gemma-2 soft cap or BLOOM's ALiBi slopes; its constructor
    (flex_attention.py, 0.11-0.19) refuses both: a FAIL with the release's file:line, not a PASS."""
    release = load_release(version)
    for feature, words in ((dict(logits_soft_cap=50.0), "logits soft cap"), (dict(use_alibi=True), "alibi slopes")):
        selection = select_backend(release, _inputs(forced_backend="FLEX_ATTENTION", **feature))
        assert selection.error_kind == "constructor" and words in selection.error, selection
        assert any("vllm/v1/attention/backends/flex_attention.py:" in e for e in selection.evidence)
    # gpt-oss's sinks on an A100 with vLLM's own choice: Triton serves them, decided
    served = select_backend(release, _inputs(forced_backend=None, has_sink=True, head_size=64, capability=(8, 0)))
    assert served.backend == "TRITON_ATTN" and served.error is None and not served.undecided, served


@pytest.mark.parametrize("version", GRID)
def test_a_gemma2_layer_is_decided_on_grid_releases(version):
    """Sliding window 4096, soft cap 50, head size 256 (Gemma-2) with vLLM's own choice on an H100: decided."""
    selection = select_backend(load_release(version), _inputs(forced_backend=None, sliding_window=4096,
                                                              logits_soft_cap=50.0, head_size=256))
    assert not selection.undecided, selection
    assert selection.backend or selection.error


def test_the_v0_engine_does_not_borrow_v1s_layer_probes():
    """0.10.2's V0 backends were not probed: a layer feature there stays undecided."""
    grid = v0_grid(load_backend_grid("0.10.2"))
    assert "layer_guards" not in grid
    selection = select_from_grid(load_release("0.10.2"), grid, _inputs(forced_backend=None, sliding_window=4096,
                                                                        capability=(7, 5), model_dtype="float16"))
    assert selection.undecided or selection.error is not None, selection
