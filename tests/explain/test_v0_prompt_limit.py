"""V0's scheduler refuses a prompt over min(max_model_len, max_num_batched_tokens) without chunked prefill
(core/scheduler.py _get_prompt_limit): the per-step budget is named only where the log shows it is the limit."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text

REFUSED = "WARNING 02-13 07:19:11 scheduler.py:949] Input prompt (32889 tokens) is too long and exceeds limit of 2048\n"


def test_the_limit_the_log_shows_as_max_num_batched_tokens_is_the_budget():
    log = "INFO 02-13 07:19:10 scheduler.py:1] Chunked prefill is enabled with max_num_batched_tokens=2048.\n" + REFUSED
    finding = explain_text(log).findings[0]
    assert finding.rule_id == "KVD459" and "--max-num-batched-tokens 32889" in [f.flag for f in finding.fixes]


def test_a_log_that_shows_neither_value_is_not_claimed_for_the_budget():
    assert explain_text(REFUSED).findings[0].rule_id == "KVD355"
    other = "INFO 02-13 07:19:10 scheduler.py:1] Chunked prefill is enabled with max_num_batched_tokens=512.\n" + REFUSED
    assert explain_text(other).findings[0].rule_id == "KVD355"  # a budget that is not the limit decides nothing
