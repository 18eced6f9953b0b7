"""kvdoctor's fit facts against public vLLM start-up logs (issue 24; tests/fixtures/startup_logs, measured by
tools/measure_fit_logs.py). For every seen entry (the held-back quarter stays out of this test): the KV pages kvdoctor
plans, given the memory vLLM logged, give the tokens (or, where the release prints num_blocks x block_size, the
concurrency) vLLM logged; and the available KV memory kvdoctor predicts lies inside the band it states. An entry that
misses for a known reason says so (`known_miss:` for the band, `known_exact_miss:` for the KV pages) and must keep
missing, so that a fix shows up here."""

from __future__ import annotations

import importlib.util
import math
import random
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "fixtures" / "startup_logs"


def _tool():
    spec = importlib.util.spec_from_file_location("measure_fit_logs", ROOT / "tools" / "measure_fit_logs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOOL = _tool()
ENTRIES = TOOL.load_index()
SEEN = [e for e in ENTRIES if not e["heldout"]]


# each batch's held-back quarter, drawn before anything was compared: (seed, rounding of the quarter)
DRAWS = {1: (24, round), 2: (2412, math.ceil)}


def test_the_corpus_is_public_logs_with_a_quarter_held_back_at_random():
    names = sorted(e["name"] for e in ENTRIES)
    assert len(names) >= 58 and len(set(names)) == len(names)
    for batch, (seed, rounding) in DRAWS.items():
        batch_names = sorted(e["name"] for e in ENTRIES if e.get("batch", 1) == batch)
        held = {e["name"] for e in ENTRIES if e.get("batch", 1) == batch and e["heldout"]}
        assert held == set(random.Random(seed).sample(batch_names, rounding(len(batch_names) / 4))), batch
    assert {e.get("batch", 1) for e in ENTRIES} == set(DRAWS)
    for e in ENTRIES:
        assert e["source"].startswith("https://github.com/"), e["name"]
        assert (LOGS / e["config"]).is_file() and (LOGS / f"{e['name']}.log").is_file(), e["name"]


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["name"])
def test_the_logged_numbers_are_the_logs(entry):
    """Every number the index says vLLM logged is in the log file, in vLLM's own words."""
    text = (LOGS / f"{entry['name']}.log").read_text()
    logged = entry["logged"]
    for gib in logged.get("available_kv_gib", []):
        assert re.search(rf"Available KV cache memory: {gib:g}(\.0*|0*) GiB", text), gib
    for tokens in logged.get("kv_tokens", []):
        assert f"GPU KV cache size: {tokens:,} tokens" in text, tokens
    for gib in logged.get("weights_gib", []):
        assert re.search(rf"Model loading took {gib:g}(\.0*|0*) GiB", text), gib
    if logged.get("max_model_len"):
        assert f"Maximum concurrency for {logged['max_model_len']:,} tokens per request" in text


@pytest.fixture(scope="module")
def measured() -> dict[str, dict]:
    TOOL.use_budget(None)
    return {e["name"]: TOOL.measure(e) for e in SEEN}


@pytest.mark.parametrize("entry", SEEN, ids=lambda e: e["name"])
def test_kv_pages_give_the_logged_capacity(entry, measured):
    """KV bytes per token and groups: kvdoctor's planner fed the logged available memory (both ends of its 2-decimal
    rounding) gives the logged tokens, or the logged concurrency where the release prints num_blocks x block_size."""
    row = measured[entry["name"]]
    if not entry["logged"].get("available_kv_gib"):
        assert row["exact"] == [] and "Available KV cache memory" not in (LOGS / f"{entry['name']}.log").read_text()
        return
    if entry.get("known_exact_miss"):
        assert row["exact_ok"] is not True, f"{entry['name']}'s KV pages match now: drop its known_exact_miss"
        return
    if entry.get("known_miss") and "rope-scaling" in entry["known_miss"]:
        assert row["exact_ok"] is None and "greater than the derived max_model_len" in row["exact"][0]["why"]
        return
    assert row["exact"] and row["exact_ok"] is True, row["exact"]


@pytest.mark.parametrize("entry", SEEN, ids=lambda e: e["name"])
def test_predicted_available_memory_is_within_the_stated_band(entry, measured):
    row = measured[entry["name"]]
    if not entry.get("gpu"):
        assert row["pred_avail_gib"] is None  # the source names no GPU: nothing to predict from
        return
    if row["pred_avail_gib"] is None:
        assert row["why_not"], row  # kvdoctor says why it does not judge (e.g. mxfp4 weights of unknown size)
        return
    if entry.get("known_miss"):
        assert not row["in_band"], f"{entry['name']} is in band now: drop its known_miss ({entry['known_miss']})"
        return
    assert row["in_band"], (f"predicted {row['pred_avail_gib']:.2f} +- {row['band_gib']} GiB, "
                            f"vLLM logged {row['logged_avail_gib']} GiB")  # fmt: skip


def test_the_misses_are_counted(measured):
    predicted = [e for e in SEEN if measured[e["name"]].get("in_band") is not None]
    misses = [e["name"] for e in predicted if not measured[e["name"]]["in_band"]]
    assert sorted(misses) == sorted(e["name"] for e in predicted if e.get("known_miss"))
    assert len(predicted) - len(misses) >= 6  # the dense entries with a named GPU


def test_a_budget_override_changes_the_prediction_and_is_undone():
    entry = next(e for e in SEEN if e["name"] == "abinavchandar__llama-3.1-8b_l4")
    before = TOOL.measure(entry)["pred_avail_gib"]
    from kvdoctor.facts.memory_budget import budget_table

    shift = budget_table()["non_torch_gib"] - 0.25  # less non-torch memory modelled, that much more for the KV cache
    TOOL.use_budget({"non_torch_gib": 0.25})
    try:
        assert TOOL.measure(entry)["pred_avail_gib"] == pytest.approx(before + shift, abs=0.01)
    finally:
        TOOL.use_budget(None)
    assert TOOL.measure(entry)["pred_avail_gib"] == pytest.approx(before)
