"""An unknown failure (KVD399) names the warnings vLLM's own source logged before it: they may say what went wrong."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text

WARNING = ("WARNING 01-02 03:04:05 [profiling.py:1] The context length (32768) of the model is too short to hold the "
           "multi-modal embeddings in the worst case (49152 tokens in total, out of which {'image': 49152} are reserved "
           "for multi-modal embeddings). This may cause certain multi-modal inputs to fail during inference, even when "
           "the input text is short. To avoid this, you should increase max_model_len, reduce max_num_seqs, and/or "
           "reduce mm_counts.")
FAILURE = "RuntimeError: a kernel nobody has a rule for went quite wrong at index 8529"


def _evidence(text: str) -> list[str]:
    report = explain_text(text)
    (finding,) = [f for f in report.findings if f.rule_id == "KVD399"]
    return [e for e in finding.evidence if e.startswith("vLLM warned before the failure")]


def test_a_warning_vllm_logs_before_an_unknown_failure_is_named_with_where_it_is_logged():
    (warned,) = _evidence(f"{WARNING}\n{WARNING}\nINFO 01-02 03:04:06 [x.py:1] Loading weights\n{FAILURE}\n")
    assert "line 2" in warned and "49152" in warned and "vllm/multimodal/profiling.py" in warned  # once, the nearest


def test_a_warning_after_the_failure_or_a_line_vllm_does_not_log_is_not_named():
    assert _evidence(f"{FAILURE}\n{WARNING}\n") == []
    assert _evidence(f"WARNING 01-02 03:04:05 [app.py:1] my own app's warning about 49152 things\n{FAILURE}\n") == []
