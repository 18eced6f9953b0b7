"""Logs of real vLLM start-ups this project ran (docs/real-startups.md, drawn grid, 2026-12-07, an H100)."""

from __future__ import annotations

from pathlib import Path

from kvdoctor.explain.explain import explain_text

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "explain"


def test_a_backend_constructor_refusing_the_layers_is_named_not_read_as_a_bare_not_implemented_method():
    # vLLM 0.26.0's FlashInferMetadataBuilder.__init__ raises NotImplementedError(<a message>); KVD418 is for a vLLM
    # method a framework calls that raises a bare NotImplementedError
    report = explain_text((FIXTURES / "flashinfer_sm90_sliding_window_0.26.0.log").read_text())
    failing = [f for f in report.findings if f.status == "fired" and f.severity == "error"]
    assert failing and failing[0].rule_id == "KVD464" and all(f.rule_id != "KVD418" for f in failing)
    text = " ".join(" ".join(f.evidence) for f in failing)
    assert "flashinfer.py" in text and "sliding-window attention layers" in text
