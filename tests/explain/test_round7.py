"""Round 7 of issue 28: the mechanisms behind the seen misses of batches 11-13, each on synthetic variants written
from the wordings of Python and vLLM (never copied from a real log)."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text
from kvdoctor.report.check.text import render


def _text(report) -> str:
    return " ".join(render(report).split())


def test_a_pasted_traceback_that_lost_its_indent_keeps_the_callers_frame():
    # a headerless excerpt whose code line sits at column 0: the frame above is still the program that imported
    report = explain_text('File "/app/mytrainer/rollout/engine_glue.py", line 12, in <module>\n'
                          "from vllm.sampling_params import GuidedDecodingParams\n"
                          "ImportError: cannot import name 'GuidedDecodingParams' from 'vllm.sampling_params'\n")
    assert report.extra["family"] == "wrapper_api_mismatch"
    assert "engine_glue.py:12" in _text(report)


def test_a_plain_line_under_a_log_record_is_not_a_frame_code_line():
    report = explain_text("INFO 01-02 03:04:05 [core.py:1] starting\n"
                          "ImportError: cannot import name 'GuidedDecodingParams' from 'vllm.sampling_params'\n")
    assert "raised at" not in _text(report)
