"""Round 20 of issue 28: the mechanisms behind misses of batch 46 (a V0 engine line whose config the excerpt cut, an
`assert` of a remainder against a parallel size), on synthetic lines written from vLLM's own formats."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.families import load_families
from kvdoctor.explain.log_facts import read_facts
from kvdoctor.explain.log_lines import normalise


def test_the_release_is_read_from_a_v0_engine_line_whose_config_the_excerpt_cut():
    """'Initializing an LLM engine (v0.4.0) with config ...' (no 'with config:', the config elided) names the release."""
    facts, evidence = read_facts(normalise("INFO 04-03 16:53:31 llm_engine.py:75] Initializing an LLM engine (v0.4.0) "
                                           "with config ...\n"))
    assert facts["vllm.version"] == "0.4.0" and any("log line 1" in e for e in evidence)


def _family(log: str) -> str | None:
    return explain_text(log).extra.get("family")


def test_a_bare_assertion_of_a_remainder_against_a_parallel_size_is_a_divisibility_failure():
    tag = "(VllmWorker rank=0 pid=1) "
    log = "".join(tag + line + "\n" for line in [
        "Traceback (most recent call last):",
        '  File "/x/vllm/model_executor/models/qwen2.py", line 98, in __init__',
        "    assert self.total_num_heads % tp_size == 0",
        "AssertionError",
    ])
    assert _family(log) == "parallel_divisibility"


def test_an_assertion_without_a_parallel_size_is_not_taken_for_a_divisibility_failure():
    families = load_families()
    by_words = [p for p, family in families.word_families if family == "parallel_divisibility"]
    said = "vllm/v1/worker/gpu_worker.py in load_model assert self.total_num_kv_heads % tp_size == 0"
    assert any(p.search(said) for p in by_words)
    assert not any(p.search("vllm/v1/worker/block_table.py in append assert num_blocks % 2 == 0") for p in by_words)
    assert not any(p.search("vllm/x.py in f assert len(heads) == 2") for p in by_words)
