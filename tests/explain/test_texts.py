"""A finding's text names only the values the log gave, and says which ones it did not (explain/texts.py)."""

from __future__ import annotations

import re

import pytest

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.families import load_families
from kvdoctor.explain.findings import finding_with_log_values
from kvdoctor.explain.texts import fill_known, missing_sentence, unfilled
from kvdoctor.rules import load_all_rules

# What an unfilled template used to read like: a unit with no number, a placeholder's 'unknown', a raw placeholder.
UNFILLED = re.compile(r"\b(?:more|less|fewer|available|the)\s+(?:GiB|MiB)\b|\bfor unknown\b|vLLM unknown\b"
                      r"|\(SM unknown\)|\{[a-z]+\.[A-Za-z_]+")
KV_LINE = ("ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is "
           "needed, which is larger than the available KV cache memory (0.71 GiB).{rest}")


def test_a_sentence_that_needs_a_missing_value_is_left_out():
    template = "vLLM stops. Here {log.needed} GiB is needed. Lower {log.flag|the share}."
    assert fill_known(template, {}) == "vLLM stops. Lower the share."
    assert fill_known(template, {"log.needed": "16.00"}) == "vLLM stops. Here 16.00 GiB is needed. Lower the share."
    assert unfilled(template, {}) == ["log.needed", "log.flag"]


def test_a_one_sentence_title_marks_the_missing_value():
    assert fill_known("A kernel needs {log.check} after sharding", {}) == "A kernel needs (not in the log) after sharding"


def test_the_missing_values_are_named():
    sentence = missing_sentence(["log.estimated", "model.model_type"])
    assert "did not carry estimated" in sentence and "model.model_type (config.json's model_type)" in sentence


def test_a_kv_cache_message_without_its_estimate_names_only_what_it_has():
    full = explain_text(KV_LINE.format(rest=" Based on the available memory, the estimated maximum model length is 5632."))
    cut = explain_text(KV_LINE.format(rest=""))
    (finding,) = [f for f in full.findings if f.rule_id == "KVD306"]
    assert "At most 5632 tokens fit" in finding.cause and "did not carry" not in finding.cause
    (finding,) = [f for f in cut.findings if f.rule_id == "KVD306"]
    assert "16.00 GiB" in finding.title and "0.71 GiB" in finding.cause
    assert "At most" not in finding.cause and "did not carry estimated" in finding.cause
    assert not UNFILLED.search(finding.title + " " + finding.cause)


def _log_rules():
    return [rule for rule in load_all_rules([]) + list(load_families().rules) if rule.signatures]


@pytest.mark.parametrize("rule", _log_rules(), ids=lambda rule: rule.id)
def test_no_rule_reads_unfilled_when_the_log_gives_no_value(rule):
    finding = finding_with_log_values(rule, {})
    texts = [finding.title, finding.cause] + [fix.title for fix in finding.fixes]
    assert not any(UNFILLED.search(text) for text in texts), texts


def test_a_sentence_keeps_its_clauses_before_the_first_one_that_needs_a_missing_value():
    from kvdoctor.explain.texts import fill_known

    template = "{gpu.name} has no bfloat16 arithmetic: vLLM {vllm.version} stops with \"{log.msg}\". Use float16."
    assert fill_known(template, {"gpu.name": "Tesla V100"}) == "Tesla V100 has no bfloat16 arithmetic. Use float16."
    # a first clause that needs one drops the whole sentence
    assert fill_known("{log.a} is wrong: fix it. Then rerun.", {}) == "Then rerun."
    assert fill_known("No check guards it, so on {gpu.name} it crashes.", {}) == "No check guards it."


def test_the_note_on_misleading_last_lines_names_the_failure_with_the_logs_values():
    """'The failure underneath is KVD315 (...)': the title as the finding has it, filled (was the rule's template,
    '{log.batched}')."""
    log = ('Traceback (most recent call last):\n'
           '  File "/usr/lib/python3/dist-packages/vllm/config/scheduler.py", line 280, in _verify_args\n'
           '    raise ValueError(\n'
           'ValueError: max_num_batched_tokens (2048) is smaller than max_model_len (8192). This effectively limits '
           'the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences.\n'
           'Traceback (most recent call last):\n'
           '  File "/usr/lib/python3/dist-packages/vllm/v1/engine/core_client.py", line 90, in make_client\n'
           'RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n')
    note = next(n for n in explain_text(log).notes if "failure underneath" in n)
    assert "{log." not in note and "max_num_batched_tokens (2048)" in note
