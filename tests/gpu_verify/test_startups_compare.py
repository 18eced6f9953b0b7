"""The comparison of recorded start-ups with kvdoctor's verdict (gpu_verify/startups/compare.py), offline."""

from __future__ import annotations

import json

from gpu_verify.startups import compare
from gpu_verify.startups.grid import case, grid, has_v1_runner

AUTO_CHAIN = [{"type": "ValueError", "message": "Unknown TurboQuant cache dtype: 'auto'. Valid presets: ...",
               "where": "vllm/model_executor/layers/quantization/turboquant/config.py:222 in from_cache_dtype"}]


def record(**kw):
    base = dict(case(kv=kw.pop("kv", "turboquant_k8v4"), runner=kw.pop("runner", None),
                     force_e4b15=kw.pop("force_e4b15", False), model=kw.pop("model", "dense")))
    base.update(kw)
    return base


def test_judgement_table():
    fail = {"verdict": "FAIL", "errors": ["KVD102"]}
    ok = {"verdict": "WARN", "errors": []}
    assert compare.judge("failed", fail) == "agree"
    assert compare.judge("crashed", fail) == "agree"
    assert compare.judge("started", ok) == "agree"
    assert compare.judge("started", fail) == "disagree"
    assert compare.judge("failed", {"verdict": "PASS"}) == "disagree"
    for outcome in ("timeout", "env_error", "cut", "not_run"):
        assert compare.judge(outcome, fail) == "not comparable"
    assert compare.judge("failed", {"verdict": "ERROR"}) == "not comparable"


def test_cause_is_matched_against_the_innermost_error():
    rec = record(outcome="failed", result={"error": AUTO_CHAIN}, summary="ValueError: Unknown TurboQuant cache dtype: 'auto'")
    assert compare.cause_match(rec, {"verdict": "FAIL", "errors": ["KVD102"]}) == "same cause"
    assert compare.cause_match(rec, {"verdict": "FAIL", "errors": ["KVD101"]}).startswith("other cause")
    assert compare.cause_match(dict(rec, outcome="started"), {"verdict": "FAIL", "errors": ["KVD102"]}) is None


def test_argv_and_env_follow_the_start_up():
    rec = record(runner="0", backend="TRITON_ATTN")
    argv = compare.kvdoctor_argv(rec, "0.25.1", "/m", compile_=False)
    assert argv[argv.index("--gpu") + 1] == "H200"
    assert argv[argv.index("--attention-backend") + 1] == "TRITON_ATTN"
    assert "--no-compile" in argv and argv[argv.index("--vllm-version") + 1] == "0.25.1"
    env = compare.kvdoctor_env(rec, wheels=None)
    assert env["VLLM_USE_V2_MODEL_RUNNER"] == "0"
    forced = compare.kvdoctor_argv(record(force_e4b15=True), "0.25.1", "/m", compile_=True)
    assert forced[forced.index("--gpu") + 1] == "A100" and "--no-compile" not in forced
    assert "VLLM_USE_V2_MODEL_RUNNER" not in compare.kvdoctor_env(record(), wheels=None)


def test_a_later_verdict_replaces_an_earlier_timeout_but_not_the_reverse(tmp_path):
    first = {"release": {"vllm": "0.25.1"}, "results": [
        record(outcome="timeout", summary="no result"), dict(record(kv="auto"), outcome="started", summary="4 tokens")]}
    second = {"release": {"vllm": "0.25.1"}, "results": [
        record(outcome="started", summary="4 tokens", result={"attention_backends": ["FLASH_ATTN", "TURBOQUANT"]}),
        dict(record(kv="auto"), outcome="cut", summary="deadline")]}
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(first))
    b.write_text(json.dumps(second))
    got = {r["id"]: r["outcome"] for _, r in compare.load([a, b])}
    assert got == {"dense-k8v4-bf16": "started", "dense-auto-bf16": "started"}


def test_machine_errors_are_re_read_from_the_recorded_chain(tmp_path):
    chain = [{"type": "ImportError", "message": "cannot import name 'Float8E4M3FN' from 'cutlass' (unknown location)",
              "where": None}]
    doc = {"release": {"vllm": "0.34.0"}, "results": [record(outcome="failed", result={"error": chain}, summary="x")]}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    assert compare.load([path])[0][1]["outcome"] == "env_error"


def test_turboquant_that_no_layer_used_is_not_a_verdict():
    rec = record(model="moe", outcome="started", summary="4 tokens", result={"attention_backends": ["FLASH_ATTN"]})
    assert "no layer used TurboQuant" in compare.artefact(rec)
    used = dict(rec, result={"attention_backends": ["FLASH_ATTN", "TURBOQUANT"]})
    assert compare.artefact(used) is None


def test_grid_ids_are_unique_and_follow_the_release():
    for version in ("0.25.1", "0.26.0", "0.27.0", "0.34.0"):
        ids = [c["id"] for c in grid(version)]
        assert len(ids) == len(set(ids))
    assert has_v1_runner("0.27.0") and not has_v1_runner("0.34.0")
    v1_034 = [c for c in grid("0.34.0") if c["runner"] == "0"]
    assert [c["id"] for c in v1_034] == ["dense-auto-bf16-v1"]  # only the case that shows the removal
    assert {c["id"] for c in grid("0.26.0", "short")} <= {c["id"] for c in grid("0.26.0")}


def test_markdown_counts_each_judgement():
    rows = [{"vllm": "0.25.1", "id": "a", "outcome": "failed", "summary": "x|y", "proxy": True,
             "kvdoctor": {"verdict": "FAIL", "errors": ["KVD101"], "warnings": []}, "judgement": "agree",
             "cause": "same cause"},
            {"vllm": "0.25.1", "id": "b", "outcome": "timeout", "summary": "t", "proxy": False,
             "kvdoctor": {"verdict": "-"}, "judgement": "not comparable"}]
    table = compare.markdown(rows)
    assert "x\\|y" in table and "(A100 proxy)" in table
    assert table.splitlines()[-1] == "agree: 1, not comparable: 1"
