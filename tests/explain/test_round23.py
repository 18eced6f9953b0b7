"""Round 23 of issue 28: a log hard-wrapped at one column that cut a traceback's frame line inside its function's
name (the line still reads as a whole frame; its rest is the name's tail on the next line), the paste ending
inside the exception's message."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.hard_wraps import rejoin_wrapped_lines, rejoin_wrapped_frames

WHOLE = """\
(EngineCore pid=316) ERROR 11-02 09:12:01 [core.py:708] EngineCore failed to start.
(EngineCore pid=316) Traceback (most recent call last):
(EngineCore pid=316)   File "/opt/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 144, in __init__
(EngineCore pid=316)     kv_cache_config = self._initialize_kv_caches(vllm_config)
(EngineCore pid=316)   File "/opt/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 305, in _initialize_kv_caches
(EngineCore pid=316)     kv_cache_configs = get_kv_cache_configs(
(EngineCore pid=316)   File "/opt/venv/lib/python3.12/site-packages/vllm/v1/core/kv_cache_utils.py", line 758, in _check_enough_kv_cache_memory
(EngineCore pid=316)     raise ValueError(
(EngineCore pid=316) ValueError: To serve at least one request with the model's max seq len (100000), (4.26 GiB KV cach
"""
# a terminal as wide as the 5th line up to "_initialize_k" cuts that frame line inside its name
WIDTH = WHOLE.splitlines()[4].index("_initialize_kv") + len("_initialize_k")
# the same traceback as a terminal WIDTH columns wide shows it: each long line cut at the column
WRAPPED = "".join(line[i:i + WIDTH] + "\n" for line in WHOLE.splitlines() for i in range(0, len(line), WIDTH))


def test_the_cut_frame_lines_get_their_function_names_back():
    physical = WRAPPED.splitlines()
    assert max(len(line) for line in physical) == WIDTH
    joined = [line for line in rejoin_wrapped_lines(physical, rejoin_wrapped_frames(physical)) if line is not None]
    assert any(line.endswith("line 305, in _initialize_kv_caches") for line in joined)
    assert any(line.endswith("in _check_enough_kv_cache_memory") for line in joined)


def test_the_failure_is_read_from_its_exception_line_not_from_a_name_tail():
    report = explain_text(WRAPPED)
    assert report.exit_code("error") == 1
    (first, *_) = report.findings
    assert first.rule_id in ("KVD306", "KVD361"), first.rule_id  # KV cache too small: 4.26 GiB asked
    assert not any("innermost exception: v_caches" in e or "ze_kv_caches" == e for e in first.evidence)


def _first(text: str):
    report = explain_text(text)
    assert report.exit_code("error") == 1
    return report.findings[0]


def test_an_architecture_a_newer_release_registers_names_that_release():
    first = _first("INFO 10-01 09:00:00 [api_server.py:1] vLLM API server version 0.11.0\n"
                   "ValueError: Model architectures ['MiniMaxM2ForCausalLM'] are not supported for now. "
                   "Supported architectures: dict_keys(['LlamaForCausalLM'])\n")
    assert first.rule_id == "KVD448"
    assert "the first is 0.11.2" in first.cause  # read from the pack's registries, not from the log
    assert "vLLM 0.11.0 is older than 0.11.2: upgrading serves it" in first.cause


def test_an_architecture_no_release_registers_says_so():
    first = _first("ValueError: Model architectures ['MiniCPMModel'] are not supported for now. "
                   "Supported architectures: ['MiniCPMForCausalLM']\n")
    assert first.rule_id == "KVD448"
    assert "No vLLM release kvdoctor's knowledge pack read" in first.cause and "MiniCPMModel" in first.cause


def test_an_inspection_failure_is_a_registered_class_that_did_not_import():
    first = _first("ValueError: Model architectures ['Qwen2_5_VLForConditionalGeneration'] failed to be inspected. "
                   "Please check the logs for more details.\n")
    assert first.rule_id == "KVD449"
    assert "importing its model class" in first.cause and "0.7.2" in first.cause  # the first release read that registers it
