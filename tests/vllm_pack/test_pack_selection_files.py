"""The per-capability selection files are derived from the release detail files, exactly and losslessly."""
from __future__ import annotations

from pathlib import Path

import pytest

from kvdoctor.builders.vllm_pack.build import derived_files
from kvdoctor.vllm_pack import load_attention, load_release, load_selection, releases_with
from kvdoctor.vllm_pack.store import load_variant_attention

REPO = Path(__file__).resolve().parents[2]
PACK = REPO / "kvdoctor" / "data" / "vllm_pack"


def test_shipped_index_and_selection_files_are_what_the_detail_files_derive():
    derived = derived_files(PACK)
    assert "index.json" in derived and len([n for n in derived if n.startswith("selection-")]) >= 10
    for name, blob in derived.items():
        assert (PACK / name).read_bytes() == blob, f"{name}: run python -m kvdoctor.builders.vllm_pack --index-only"
    shipped = {p.name for p in PACK.glob("selection-*.json.gz")}
    assert shipped == {n for n in derived if n.startswith("selection-")}


def _cells(entries, cap):
    return sorted(c for c in entries if c.split("|")[0] == cap)


@pytest.mark.parametrize("version", releases_with("backend_replay"))
def test_a_capabilitys_selection_facts_equal_the_detail_files_answers(version):
    _compare(load_attention(version), lambda cap: load_selection(version, cap))


def _asked_again():
    return [(v, variant) for v in releases_with("backend_replay")
            for variant in (load_release(v).data.get("modelled_inputs") or {}).get("variants", ())]


@pytest.mark.parametrize("version, variant", _asked_again())
def test_a_variants_selection_facts_equal_the_detail_files_variant(version, variant):
    # the part `<version>+flashinfer-cubin=present` of each selection file is the detail file's variant applied
    full = load_variant_attention(version, variant)
    assert full is not None and full != load_attention(version)  # asked again, and something differs
    _compare(full, lambda cap: load_selection(version, cap, variant))


def test_releases_without_the_cubins_were_asked_again_with_them():
    assert [v for v, _ in _asked_again()] == [v for v in releases_with("backend_replay")
                                              if "flashinfer-cubin" not in load_release(v).data["pins"]["requires"]]


def _compare(full, narrow_of):
    for cap in full["per_capability"]:
        narrow = narrow_of(tuple(int(p) for p in cap.split(".")))
        assert narrow["per_capability"].keys() == {cap}
        for name, index in full["per_capability"][cap].items():
            assert narrow["answer_sets"][narrow["per_capability"][cap][name]] == full["answer_sets"][index]
        for key in ("checks", "classes", "enum", "templates", "selector_config", "block_domain", "kv_domain"):
            assert narrow[key] == full[key]
        table = {k: full["priorities"]["lists"][v] for k, v in full["priorities"]["table"].items()
                 if k.split("|")[0] == cap}
        assert {k: narrow["priorities"]["lists"][v] for k, v in narrow["priorities"]["table"].items()} == table
        for name, messages in full.get("guards", {}).items():
            for message, entry in messages.items():
                kept = narrow["guards"].get(name, {}).get(message, {}).get("cells", [])
                assert sorted(kept) == _cells(entry["cells"], cap)
        for name, cells in full.get("query_quant", {}).items():
            assert sorted(narrow["query_quant"].get(name, [])) == _cells(cells, cap)


def test_a_capability_no_release_was_asked_about_has_no_answers():
    narrow = load_selection("0.25.1", (6, 1))
    assert narrow["per_capability"] == {} and narrow["templates"]
