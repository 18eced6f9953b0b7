"""Releases 0.7-0.19: the facts that decide dtype and backends, read from each release's own code.

Their backend choice is vLLM's own `get_attn_backend_cls` over a grid of inputs (older releases select with
if/else code or other signatures, so the pack does not replay their checks); the samples the builder asked
afresh at random grid cells are the oracle for the lookup. 0.7-0.10 also have the V0 engine: its selector's
answers (`use_v1=False`) are a second grid with samples of their own (marked `engine: V0`).
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from kvdoctor.base.versions import release_numbers
from kvdoctor.vllm_pack.candidates import candidates, partial_note
from kvdoctor.vllm_pack import load_backend_grid, load_release, pack_releases, releases_with
from kvdoctor.vllm_pack.select import SelectorInputs, select_backend
from kvdoctor.vllm_pack.select_grid import select_from_grid, v0_grid

SAMPLES = Path(__file__).parent / "samples"
OLD = [v for v in pack_releases() if (0, 7) <= release_numbers(v)[:2] < (0, 20)]
WITH_V0 = [v for v in OLD if release_numbers(v)[:2] <= (0, 10)]
EAGER = [v for v in pack_releases() if release_numbers(v)[:2] < (0, 7)]
"""Before 0.7 (a platform picked at import, no get_attn_backend_cls): serve parser, dtypes and dtype resolution."""


def _inputs(sample: dict) -> SelectorInputs:
    c = sample["cell"]
    return SelectorInputs(
        capability=tuple(sample["capability"]), head_size=c["head_size"], model_dtype=c["dtype"],
        kv_cache_dtype=c["kv_cache_dtype"], block_size=c["block_size"], use_mla=c["use_mla"],
        has_sink=c["has_sink"], use_sparse=c["use_sparse"], forced_backend=c["forced"], num_heads=c["num_heads"])


def test_old_releases_hold_dtype_and_backend_facts_and_say_what_they_lack():
    assert OLD, "no release before 0.20.0 in the pack"
    assert set(OLD) == set(releases_with("backend_grid"))
    for version in OLD:
        release = load_release(version)
        assert release.has("kv_cache_dtypes") and release.has("model_dtypes") and release.has("backend_grid")
        assert not release.has("backend_replay")
        note = partial_note(release)
        assert note and "stop at 0.20.0" in note and "grid" in note
        assert candidates(version).note == note
    assert partial_note(load_release("0.25.1")) is None


def test_releases_before_0_7_hold_their_parser_and_dtype_facts_and_name_what_was_not_read():
    assert {"0.5.5", "0.6.3.post1", "0.6.6.post1"} <= set(EAGER)
    for version in EAGER:
        release = load_release(version)
        assert {"serve_args", "kv_cache_dtypes", "model_dtypes", "pins", "dtype_resolution"} <= release.kinds
        assert not release.has("backend_grid") and not release.has("backend_replay") and not release.has("model_runner")
        note = partial_note(release)
        assert "not read: " in note and "which_attn_to_use" in note and "V0 engine only" in note, note
        selection = select_backend(release, SelectorInputs(capability=(8, 0), head_size=128, model_dtype="bfloat16",
                                                           kv_cache_dtype="auto"))  # fmt: skip
        assert selection.backend is None and "which_attn_to_use" in selection.undecided[0]


def test_releases_before_0_7_refuse_bf16_below_sm80_in_their_worker():
    # vLLM 0.5-0.6's `--dtype auto` keeps a bf16 checkpoint's dtype and vllm/worker/worker.py's
    # _check_if_gpu_supports_dtype refuses it below SM80, as the builder asked it per capability
    from kvdoctor.vllm_pack.dtypes import resolve_dtype
    from kvdoctor.vllm_pack.store import load_runtime

    for version in EAGER:
        release = load_release(version)
        assert load_runtime(version)["where"]["check_if_supports_dtype"].startswith("vllm/worker/worker.py:")
        dtype, _, error = resolve_dtype(release, "bfloat16", "auto", (7, 5), "llama")
        assert dtype == "bfloat16" and error.startswith("ValueError: Bfloat16 is only supported on GPUs with compute "
                                                        "capability of at least 8.0"), (version, error)
        assert resolve_dtype(release, "bfloat16", "auto", (8, 0), "llama") == ("bfloat16", None, None)
        assert resolve_dtype(release, "bfloat16", "half", (7, 5), "llama")[::2] == ("float16", None)
        assert resolve_dtype(release, "float32", "auto", (9, 0), "llama")[::2] == ("float16", None)


V1_NAMES = {"FLASH_ATTN_VLLM_V1": "FLASH_ATTN", "TRITON_ATTN_VLLM_V1": "TRITON_ATTN", "TRITON_MLA_VLLM_V1": "TRITON_MLA",
            "FLASHMLA_VLLM_V1": "FLASHMLA", "XFORMERS_VLLM_V1": "XFORMERS", "TREE_ATTN_VLLM_V1": "TREE_ATTN",
            "vllm.v1.attention.backends.flashinfer.FlashInferBackend": "FLASHINFER",
            "vllm.v1.attention.backends.mla.flashinfer_mla.FlashInferMLABackend": "FLASHINFER_MLA",
            # 0.9.1-0.11.0 (read because real manifests pin them): the sparse-MLA twin, V0's class paths
            "FLASHMLA_SPARSE_VLLM_V1": "FLASHMLA_SPARSE",
            "vllm.attention.backends.triton_mla.TritonMLABackend": "TRITON_MLA",
            "vllm.attention.backends.flashinfer.FlashInferBackend": "FLASHINFER",
            "vllm.attention.backends.flashmla.FlashMLABackend": "FLASHMLA"}
"""vLLM 0.10.2's selector answers, as the names 0.11+ (and rules.yaml) give the same backends."""


@pytest.mark.parametrize("version", OLD)
def test_grid_lookup_matches_vllms_own_answers(version):
    grid = load_backend_grid(version)
    samples = json.loads(gzip.decompress((SAMPLES / f"{version}.json.gz").read_bytes()))["samples"]
    legacy_signature = "attn_selector_config" not in grid["params"]
    v1_grid = {k: v for k, v in grid.items() if k not in ("engine", "v0")}
    decided = asked = 0
    for sample in samples:
        if sample.get("engine") == "V0":
            continue  # the V0 selector's answers: test_v0_grid_lookup_matches_vllms_own_answers
        if legacy_signature and sample["cell"]["block_size"] is None:
            continue  # 0.10-0.12 never see None: vLLM sets the block size before it selects
        selection = select_backend(load_release(version), _inputs(sample))
        if any("starts its V0 engine" in e for e in selection.evidence):  # 0.7-0.10: V0 here; V1's grid itself
            selection = select_from_grid(load_release(version), v1_grid, _inputs(sample))
        # out of the count: sinks on a release whose constructors were not probed with layer features (undecided
        # by design)
        if selection.undecided and "did not probe" in selection.undecided[0]:
            continue
        asked += 1
        if selection.undecided:
            continue
        decided += 1
        kind, _, real = sample["answer"].partition(":")
        if kind == "backend":  # 0.10 answers V1 twins and class paths: reported by today's enum names
            assert selection.backend == V1_NAMES.get(real, real) and selection.error_kind in (None, "constructor"), sample
        else:
            head, _, tail = real.replace("{config_no_block}", "{config}").partition("{config}")
            assert selection.error and selection.error.startswith(head), (sample, selection.error)
            assert selection.error.endswith(tail.rsplit("{config}", 1)[-1]), (sample, selection.error)
    assert decided >= 0.5 * asked and asked >= 40, f"only {decided} of {asked} decided ({len(samples)} samples)"


def test_an_unknown_version_is_judged_against_the_full_releases_and_says_so(run_cli, tmp_path):
    """Head size 112 is outside the old releases' grid. With the version unknown, the releases read in full
    decide (the note names the older ones); named, an old release leaves it undecided, never guessed."""
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 1792,
              "num_attention_heads": 16, "num_key_value_heads": 8, "num_hidden_layers": 2, "torch_dtype": "bfloat16",
              "vocab_size": 32000, "intermediate_size": 4096, "max_position_embeddings": 4096}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    unknown = run_cli("check", "--model", str(tmp_path), "--gpu", "A100", "--no-compile", "-f", "json")
    assert unknown.code == 0, unknown.stdout + unknown.stderr
    facts = unknown.json()["facts"]
    assert facts["model.head_dim"] == 112 and facts["attention.backend"] not in (None, "none")
    assert (EAGER + OLD)[0] in facts["vllm.facts_note"] and "--vllm-version" in facts["vllm.facts_note"]
    assert facts["vllm.judged"].startswith("(version unknown: 0.20.0-")
    named = run_cli("check", "--model", str(tmp_path), "--gpu", "A100", "--no-compile", "--vllm-version", OLD[-1],
                    "-f", "json").json()["facts"]  # fmt: skip
    assert named["attention.backend"] is None and "head_size 112" in named["attention.picked_by"]


@pytest.mark.parametrize("version", WITH_V0)
def test_v0_grid_lookup_matches_vllms_own_answers(version):
    """The V0 selector's answers (XFormers, FlashAttention V0, FlashInfer, Triton MLA, FlashMLA) looked up as vLLM
    gave them at random cells asked afresh."""
    grid = v0_grid(load_backend_grid(version))
    assert grid is not None, f"vLLM {version} has a V0 engine but the pack holds no V0 grid"
    samples = json.loads(gzip.decompress((SAMPLES / f"{version}.json.gz").read_bytes()))["samples"]
    samples = [s for s in samples if s.get("engine") == "V0" and s["cell"]["block_size"] is not None]
    decided = asked = 0
    for sample in samples:
        selection = select_from_grid(load_release(version), grid, _inputs(sample))
        if selection.undecided and "did not probe" in selection.undecided[0]:
            continue  # head size 64/256: layer features the pack did not probe on old releases (undecided by design)
        asked += 1
        if selection.undecided:
            continue
        decided += 1
        kind, _, real = sample["answer"].partition(":")
        if kind == "backend":
            assert selection.backend == V1_NAMES.get(real, real), (sample, selection)
        else:
            assert selection.error and selection.error.split(":")[0] == real.split(":")[0], (sample, selection.error)
    # ~480 V0 samples, ~80% with a block size, ~25% of those head 64/256 (not probed): ~290-310 asked per release
    assert asked >= 250 and decided == asked, f"{decided} of {asked} decided"
    backends = {a.split(":", 1)[1] for a in grid["answers"] if a.startswith("backend:")}
    assert {"XFORMERS", "FLASH_ATTN"} <= backends, backends


def test_float32_configs_downcast_as_each_release_does():
    """0.7-0.8 use float16 for float32 models on every GPU ('Following common practice', vllm/config.py); 0.9 picks
    the platform's first supported dtype (bfloat16 from SM80), as later releases do."""
    from kvdoctor.vllm_pack.dtypes import resolve_dtype

    answers = {v: resolve_dtype(load_release(v), "float32", "auto", (8, 0), "qwen2")[0]
               for v in ("0.7.3", "0.8.5.post1", "0.9.2", "0.25.1")}
    assert answers == {"0.7.3": "float16", "0.8.5.post1": "float16", "0.9.2": "bfloat16", "0.25.1": "bfloat16"}
