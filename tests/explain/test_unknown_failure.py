"""KVD399, a failure no rule knows: it says what kvdoctor could not find, and where vLLM raises the message when
the message index holds it."""

from __future__ import annotations

from kvdoctor.explain.diagnosis import unknown_failure_rule
from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.message_index import load_index

HEAD = "INFO 05-02 10:22:10 [api_server.py:1] vLLM API server version 0.30.0\n"


def _unknown(text: str):
    report = explain_text(text)
    assert report.exit_code("error") == 1
    (finding,) = [f for f in report.findings if f.rule_id == unknown_failure_rule()]
    return finding


def _raised_message() -> tuple[str, str, str]:
    """A ValueError message raised by vLLM 0.30.0 with no placeholder, that no rule knows: (text, file, function)."""
    for template in load_index().templates():
        if None in template.parts or len(template.text) < 50 or "\n" in template.text:
            continue
        raises = [loc for loc in template.locations
                  if loc.package == "vllm" and loc.kind == "raise" and loc.type == "ValueError" and loc.has_release("0.30.0")]
        if len(raises) == 1 and len(template.locations) == 1:
            report = explain_text(HEAD + f"ValueError: {template.text}\n")
            if report.extra["primary"]["rule_id"] == unknown_failure_rule():
                return template.text, raises[0].file, raises[0].qualname
    raise AssertionError("no vLLM 0.30.0 ValueError message in the index that no rule knows")


def test_a_located_message_names_the_release_and_the_function():
    text, file, function = _raised_message()
    finding = _unknown(HEAD + f"ValueError: {text}\n")
    assert f"vLLM 0.30.0 raises ValueError in {file}:{function}" in finding.cause
    assert "traceback frames" in finding.cause  # what it could not find: where, without frames


def test_an_unlocated_message_says_the_index_does_not_hold_it():
    finding = _unknown("RuntimeError: the flux capacitor is not charged\n")
    assert "does not hold this message" in finding.cause
    assert "vllm 0.20.0-0.34.0" in finding.cause or "vllm " in finding.cause
    assert "the vLLM release" in finding.cause and "a rule whose signature matches it" in finding.cause
