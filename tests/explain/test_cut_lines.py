"""Lines a paste or an excerpt cut: a traceback whose last line stops inside its first word (`ERR`) names no
exception, so the error record that introduced the traceback is the failure; code quoted in a request's prompt and
wrapped by the paste (`raise ValueError("...")\\n    if `) is no traceback of the server's."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text

NEURON = """ERROR 12-10 20:13:47 engine.py:366] Model architectures ['OPTForCausalLM'] are not supported on Neuron for now. Supported architectures: ['LlamaForCausalLM', 'MistralForCausalLM']
ERROR 12-10 20:13:47 engine.py:366] Traceback (most recent call last):
ERROR 12-10 20:13:47 engine.py:366]   File "/venv/lib/python3.10/site-packages/vllm/engine/multiprocessing/engine.py", line 357, in run_mp_engine
ERROR 12-10 20:13:47 engine.py:366]     engine = MQLLMEngine.from_engine_args(engine_args=engine_args,
ERR
"""


def test_a_traceback_cut_inside_its_last_line_is_explained_by_the_record_that_introduced_it():
    finding = explain_text(NEURON).findings[0]
    assert "ERR," not in finding.cause and "OPTForCausalLM" in finding.cause
    assert "neuron.py" in finding.cause  # located by the message index: where vLLM raises it


def test_a_real_bare_exception_still_ends_a_traceback():
    log = ('Traceback (most recent call last):\n  File "/x/vllm/worker.py", line 3, in f\n    assert ok\n'
           "AssertionError\n")
    assert "AssertionError" in explain_text(log).findings[0].cause


PROMPT = """INFO:     Application startup complete.
INFO 11-20 10:00:00 logger.py:37] Received request chatcmpl-1: prompt: '<|begin_of_text|>def f(s):\\n    for c in s:\\n        if c == " ":\\n
            raise ValueError("Invalid character in input string")\\n    if 
current:\\n        return 1', params: SamplingParams(n=1)
INFO:     127.0.0.1:50000 - "POST /v1/chat/completions HTTP/1.1" 200 OK
"""


def test_code_in_a_wrapped_prompt_is_not_a_failure():
    report = explain_text(PROMPT)
    assert report.exit_code("error") == 0 and report.verdict == "PASS", [f.rule_id for f in report.findings]
