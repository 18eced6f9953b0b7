"""A finding's "Checked against" says in words what it was checked against: 'vllm pack' (a rule whose facts are
read from vLLM's own code per release) names the release judged, or the releases judged when none was named."""

from __future__ import annotations

import pytest

from kvdoctor.rules.engine import checked_against_text


@pytest.mark.parametrize(("text", "facts", "said"), [
    ("vllm pack", {"vllm.version": "0.25.1"}, "vLLM 0.25.1's own code, as kvdoctor's knowledge pack read it"),
    ("vllm pack (the kv-cache dtype choices of 0.10.2-0.34.0)", {"vllm.version": "0.25.1"},
     "vLLM 0.25.1's own code, as kvdoctor's knowledge pack read it (the kv-cache dtype choices of 0.10.2-0.34.0)"),
    ("vllm pack", {"vllm.version": None, "vllm.judged": "(version unknown: 0.20.0-0.34.0)"},
     "the code of the vLLM releases judged (0.20.0-0.34.0), as kvdoctor's knowledge pack read it"),
    ("vllm 0.20.0-0.23.0", {"vllm.version": "0.25.1"}, "vllm 0.20.0-0.23.0"),  # a range people checked: as written
    ("any", {"vllm.version": "0.25.1"}, "no particular vLLM release: the rule holds for every one"),
    (None, {}, None),
])  # fmt: skip
def test_the_knowledge_pack_is_named_with_the_release_it_judged(text, facts, said):
    assert checked_against_text(text, facts) == said


def test_a_check_report_never_prints_the_bare_label(tmp_path):
    from typer.testing import CliRunner

    from kvdoctor.cli import app

    out = CliRunner().invoke(app, ["check", "--no-compile", "--model", "examples/qwen2.5-3b-instruct", "--gpu", "T4",
                                   "--vllm-version", "0.25.1"]).output  # fmt: skip
    assert "Checked against vLLM 0.25.1's own code" in out and "Checked against vllm pack" not in out
