"""Round 16 (batch 20's seen misses, by mechanism): the vLLM version a reporter's shell printed, an MLA backend
refusing the KV dtype in the attention selector, a kernel's out-of-bounds assert under VLLM_ALLOW_LONG_MAX_MODEL_LEN.
Lines written from the tools' and vLLM's own output formats."""

from __future__ import annotations

import pytest

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.log_facts import read_facts
from kvdoctor.explain.log_lines import normalise


@pytest.mark.parametrize("text", [
    '$ python3 -c "import vllm; print(vllm.__version__)"\n0.3.3\n',
    "$ vllm --version\n\n0.3.3\n",
    "$ pip show vllm\nName: vllm\nVersion: 0.3.3\nSummary: A high-throughput and memory-efficient inference engine\n",
    "vllm==0.3.3\n",
    "vllm                              0.3.3\n",
])
def test_the_version_a_shell_printed_is_the_vllm_version(text):
    facts, evidence = read_facts(normalise(text))
    assert facts["vllm.version"] == "0.3.3", evidence


@pytest.mark.parametrize("text", [
    "0.3.3\n",  # a bare version with no question before it
    "$ python -c 'import torch; print(torch.__version__)'\n2.3.0\n",
    "$ pip show torch\nName: torch\nVersion: 2.3.0\n",
    "vllm-flash-attn==2.5.8\n",
])
def test_other_versions_are_not_vllms(text):
    facts, _ = read_facts(normalise(text))
    assert "vllm.version" not in facts


def test_an_mla_backend_refusing_the_kv_dtype_is_the_mla_layout_family():
    one_line = ("Selected backend AttentionBackendEnum.ROCM_AITER_MLA is not valid for this configuration. "
                "Reason: ['kv_cache_dtype not supported']\n")
    assert explain_text(one_line).extra["family"] == "mla_sparse"
    plain = ("Selected backend AttentionBackendEnum.FLASH_ATTN is not valid for this configuration. "
             "Reason: ['kv_cache_dtype not supported']\n")
    assert explain_text(plain).extra["family"] == "kv_dtype_backend"


ASSERT = ("/tmp/torchinductor_root/q5/cq5.py:97: unknown: block: [4,0,0], thread: [0,0,0] Assertion "
          "`index out of bounds: 0 <= tmp48 < 40960` failed.\n")


def test_an_out_of_bounds_assert_under_the_long_length_override_is_the_derived_length():
    report = explain_text("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve Qwen/Qwen3-32B-FP8 --max-model-len 87040\n" + ASSERT)
    assert report.exit_code("error") == 1 and report.extra["family"] == "max_model_len_derived"
    first = report.findings[0]
    assert first.rule_id == "KVD428" and "40960" in first.title and "87040" in first.cause
    assert any(fix.flag == "--max-model-len 40960" for fix in first.fixes)


def test_the_same_assert_without_the_override_is_not_claimed():
    report = explain_text("vllm serve Qwen/Qwen3-32B-FP8 --max-model-len 32768\n" + ASSERT)
    assert report.exit_code("error") == 1 and report.findings[0].rule_id != "KVD428"


UP = ("(APIServer pid=1) INFO 08-21 09:51:50 [core.py:337] init engine (profile, create kv cache, warmup model) took 162.10 s\n"
      '(APIServer pid=1) INFO:     127.0.0.1:58220 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n')
TEARDOWN = ("(APIServer pid=1) ERROR 08-21 10:24:34 [async_llm.py:704] AsyncLLM output_handler failed.\n"
            "(APIServer pid=1) ERROR 08-21 10:24:34 [async_llm.py:704] vllm.v1.engine.exceptions.EngineDeadError: "
            "EngineCore encountered an issue. See stack trace (above) for the root cause.\n")


@pytest.mark.parametrize("shutdown", [
    "(APIServer pid=1) INFO 08-21 10:24:34 [launcher.py:100] [shutdown] API server: shutdown triggered\n",
    "(EngineCore pid=2) INFO 08-21 10:24:34 [core.py:1214] [shutdown] EngineCore: trigger received signal=SIGTERM\n",
    "INFO:     Shutting down\n",
])
def test_errors_of_a_requested_shutdowns_teardown_are_not_a_failure(shutdown):
    report = explain_text(UP + shutdown + TEARDOWN)
    assert report.exit_code("error") == 0, report.findings
    assert any("after the shutdown the running server was asked for" in note for note in report.notes)


def test_a_failure_before_the_shutdown_or_a_shutdown_before_vllm_was_up_still_fails():
    crash = "(EngineCore pid=2) ERROR 08-21 10:24:30 [core.py:1] RuntimeError: CUDA error: an illegal memory access was encountered\n"
    shutdown = "INFO:     Shutting down\n"
    assert explain_text(UP + crash + shutdown + TEARDOWN).exit_code("error") == 1
    assert explain_text(shutdown + TEARDOWN).exit_code("error") == 1


def test_line_numbers_are_the_files_own_with_progress_bars_redrawn_by_carriage_returns():
    text = ("Loading safetensors checkpoint shards:   0% Completed | 0/4\rLoading safetensors checkpoint shards: "
            "100% Completed | 4/4\n"
            "INFO 08-21 09:51:50 [core.py:337] init engine (profile, create kv cache, warmup model) took 12.1 s\n"
            "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    report = explain_text(text)
    assert report.exit_code("error") == 1
    assert report.extra["failure_evidence"][0]["line"] == 3  # `grep -n` says 3; the CR does not make a line
    lines = normalise(text)
    assert [line.number for line in lines] == [1, 2, 3] and "100% Completed" in lines[0].text


def test_a_log_with_carriage_returns_only_is_still_read_line_by_line():
    lines = normalise("INFO 08-21 09:51:50 [core.py:337] one\rRuntimeError: two\r")
    assert [line.text for line in lines][-1].startswith("RuntimeError: two")


def test_waking_from_sleep_without_memory_is_told_by_the_message_whatever_its_path():
    line = ('"error":{"message":"Call to wake_up method failed: CUDA Error: out of memory at <path>:163",'
            '"type":"InternalServerError","param":null,"code":500}}\n')
    report = explain_text(line)
    assert report.findings[0].rule_id == "KVD426" and report.extra["family"] == "gpu_memory_occupied"


# round 16c (batch 22's seen misses)

def test_a_message_vllm_both_warns_and_raises_is_the_raise_when_the_logs_value_meets_the_condition():
    # vllm/config/vllm.py _set_max_num_scheduled_tokens: raises when max_num_scheduled_tokens <= 0 (0.20-0.34); the
    # value is taken after the template's literal even where the rest of the wording differs
    report = explain_text("max_num_scheduled_tokens is set to -1792, which does not allow any tokens to be scheduled\n")
    assert report.exit_code("error") == 1
    assert report.findings[0].rule_id == "KVD429" and report.extra["family"] == "spec_decode_config"
    assert "-1792" in report.findings[0].title


def test_the_same_message_with_a_positive_value_is_no_failure():
    report = explain_text("WARNING 05-02 10:22:18 [vllm.py:1] max_num_scheduled_tokens is set to 8192 based on the "
                          "speculative decoding settings, which does not allow any tokens to be scheduled.\n")
    assert report.exit_code("error") == 0


@pytest.mark.parametrize("word, flag", [
    ("trust_remote_code=True", "`--trust-remote-code`"),
    ("max_model_len=8192", "`--max-model-len 8192`"),
    ("enforce_eager", "`--enforce-eager`"),
])
def test_an_option_written_without_its_dashes_is_named_as_the_flag(word, flag):
    report = explain_text(f"vllm: error: unrecognized arguments: {word}\n")
    assert report.extra["family"] == "serve_args"
    assert any(flag in fix.title for fix in report.findings[0].fixes), report.findings[0].fixes


def test_an_unknown_word_gets_no_flag_spelling():
    report = explain_text("vllm: error: unrecognized arguments: frobnicate=3\n")
    assert not any("two dashes" in fix.title for fix in report.findings[0].fixes)


def test_a_traceback_cut_before_its_exception_names_its_innermost_frame_even_unindented():
    text = ("ERROR 08-29 10:18:10 [core.py:459] Invocation of wake_up method failed\n"
            "ERROR 08-29 10:18:10 [core.py:459] Traceback (most recent call last):\n"
            'ERROR 08-29 10:18:10 [core.py:459] File "/usr/lib/python3/dist-packages/vllm/v1/engine/core.py", line 456, '
            "in _handle_client_request\n"
            "ERROR 08-29 10:18:10 [core.py:459] output.result = method(\n"
            'ERROR 08-29 10:18:10 [core.py:459] File "/usr/lib/python3/dist-packages/verl/workers/rollout/'
            'vllm_rollout/vllm_async_server.py", line 98, in collective_rpc\n')
    report = explain_text(text)
    assert any("ends inside a traceback" in note and "vllm_async_server.py:98 in collective_rpc" in note
               for note in report.notes), report.notes
