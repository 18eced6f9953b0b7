"""explain's similar reports (kvdoctor/explain/similar_reports.py): a failure no rule knows cites the seen real logs
that read like it, and takes the closest one's family when close enough."""

from __future__ import annotations

import gzip
import importlib.util
import json
from importlib import resources
from pathlib import Path

import yaml

from kvdoctor.explain import similar_reports as sr
from kvdoctor.explain.explain import explain_text
from kvdoctor.model.report import Finding, Report

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "fixtures" / "logs_real"


def _entries() -> list[dict]:
    index = yaml.safe_load((LOGS / "index.yaml").read_text())
    return index["logs"] if isinstance(index, dict) else index


def _data() -> dict:
    return json.loads(gzip.decompress(resources.files("kvdoctor.data").joinpath(sr.DATA).read_bytes()))


def _builder():
    spec = importlib.util.spec_from_file_location("build_similar_reports", ROOT / "tools" / "build_similar_reports.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_data_holds_every_seen_failing_log_and_no_held_out_one():
    """Built from the seen entries only (a held-out log is never its own neighbour), and rebuilt after each cut."""
    held_out = {e["file"] for e in _entries() if e.get("heldout")}
    seen_failing = {e["file"] for e in _entries() if not e.get("heldout") and e.get("failure", True)}
    in_data = {log["file"] for log in _data()["logs"]}
    assert not in_data & held_out
    assert in_data == seen_failing, "run tools/build_similar_reports.py after cutting a batch"


def test_a_seen_log_read_at_run_time_finds_itself():
    """The builder reads a log the way explain_text does: the same log is its own closest report, at 1.0."""
    builder = _builder()
    entry = next(e for e in _entries() if not e.get("heldout") and e.get("failure", True)
                 and (LOGS / e["file"]).stat().st_size > 2000)
    found = sr.similar_reports(builder.failure_terms((LOGS / entry["file"]).read_text(errors="replace")))
    assert found and found[0].source == entry["source"] and found[0].similarity >= 0.99


def _unknown(family: str = "other", rule_id: str = "KVD399") -> Report:
    finding = Finding(rule_id=rule_id, severity="error", title="t", cause="No rule knows it.")
    return Report(command="explain", findings=(finding,), facts={}, notes=("Failure family: other.",), extra={"family": family})


def test_a_close_report_gives_its_family_cause_and_fix():
    closest = max(_data()["logs"], key=lambda log: log["family"] != "other")
    terms = {word: 5 for word in closest["terms"]}
    found = sr.similar_reports(__import__("collections").Counter(terms))
    assert found[0].similarity >= sr.LIKELY_FAMILY

    report = sr.with_similar_reports(_unknown(), [], (), "KVD399")
    assert report.extra["family"] == "other"  # no words at all: nothing cited

    from kvdoctor.explain.verdict import FailureEvidence

    evidence = (FailureEvidence(1, "error text", " ".join(closest["terms"])),)
    report = sr.with_similar_reports(_unknown(), [], evidence, "KVD399")
    top = report.extra["similar_reports"][0]
    assert top["similarity"] >= sr.LIKELY_FAMILY
    assert report.extra["family"] == top["family"] != "other"
    assert top["source"] in report.findings[0].cause and top["source"] in report.findings[0].fixes[0].title
    assert report.notes[0].startswith(f"Failure family: {top['family']} (likely")


def test_known_failures_and_far_reports_keep_their_words():
    from kvdoctor.explain.verdict import FailureEvidence

    known = _unknown(family="kv_dtype_backend", rule_id="KVD103")
    evidence = (FailureEvidence(1, "error text", "ValueError: something"),)
    assert sr.with_similar_reports(known, [], evidence, "KVD399") is known
    far = (FailureEvidence(1, "error text", "zzqx quuxfrob wibblewobble"),)
    assert sr.with_similar_reports(_unknown(), [], far, "KVD399").extra["family"] == "other"


def test_a_healthy_log_cites_nothing():
    report = explain_text("INFO 05-02 10:22:18 [api_server.py:1] vLLM API server version 0.25.1\n"
                          "INFO:     Application startup complete.\n")
    assert report.exit_code("error") == 0 and "similar_reports" not in report.extra


def test_an_unknown_failure_lists_reports_by_url():
    """End to end: an exception no rule knows, told in words seen logs use, lists those logs' threads."""
    report = explain_text("FluxCapacitorError: the flux capacitor refused FusedMoE's keyword argument "
                          "'reduce_results'\n")
    assert report.exit_code("error") == 1 and report.findings[0].rule_id == "KVD399"
    assert any(line.startswith("similar report (") and "https://" in line for line in report.findings[0].evidence)
