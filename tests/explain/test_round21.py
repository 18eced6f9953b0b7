"""Round 21 of issue 28: a failure no rule knows is read against the set-up the log shows (the features in play, each
with its line, and the warnings logged before it), on synthetic lines in vLLM's and torch's own formats."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text

UNKNOWN = [
    "Traceback (most recent call last):",
    '  File "/x/vllm/v1/worker/gpu_worker.py", line 10, in load_model',
    "    self.model_runner.load_model()",
    "RuntimeError: the flux capacitor is not charged",
]


def _cause(lines: list[str]) -> str:
    report = explain_text("".join(line + "\n" for line in lines))
    (first, *_) = report.findings
    assert first.rule_id == "KVD399" and report.exit_code("error") == 1
    return first.cause


def test_the_features_in_play_are_named_with_their_lines():
    cause = _cause([
        "INFO 04-05 11:55:36 [llm_engine.py:241] Initializing a V0 LLM engine (v0.8.2) with config: "
        "model='m', quantization=bitsandbytes, tensor_parallel_size=2, kv_cache_dtype=fp8",
        "INFO 09-20 08:05:46 selector.py:128] Using Torch SDPA backend.",
        "INFO 08-10 22:42:07 [utils.py:106] NixlConnector detected. Setting KV cache layout to HND.",
        *UNKNOWN,
    ])
    assert "weight quantization bitsandbytes (line 1)" in cause
    assert "attention backend TORCH_SDPA (line 2: Using Torch SDPA backend.)" in cause
    assert "KV connector NixlConnector (line 3" in cause and "tensor parallel size 2" in cause
    assert "KV-cache dtype fp8" in cause


def test_a_connector_named_on_the_command_line_counts():
    cause = _cause(["vllm serve m --kv-transfer-config '{\"kv_connector\":\"OffloadingConnector\",\"kv_role\":\"kv_both\"}'",
                    *UNKNOWN])
    assert "KV connector OffloadingConnector (line 1" in cause


def test_the_last_distinct_warnings_before_the_failure_are_quoted_once_each():
    glog = "[rank{r}]:W0106 23:01:14.131000 29 torch/_dynamo/convert_frame.py:1016] "
    cause = _cause([
        "WARNING 04-05 11:55:36 [arg_utils.py:1854] --quantization bitsandbytes is not supported by the V1 Engine.",
        glog.format(r=0) + "[6/8] torch._dynamo hit config.recompile_limit (8)",
        glog.format(r=0) + "[6/8]    function: 'forward'",  # the same record's continuation
        glog.format(r=1) + "[6/8] torch._dynamo hit config.recompile_limit (8)",  # another rank: the same warning
        "INFO 04-05 11:55:40 [x.py:1] unrelated",
        *UNKNOWN,
    ])
    assert "Warned before it: line 1: --quantization bitsandbytes" in cause
    assert cause.count("recompile_limit") == 1 and "function: 'forward'" not in cause


def test_a_log_with_no_features_or_warnings_gets_no_set_up_sentence():
    assert "The set-up the log shows" not in _cause(UNKNOWN)
    assert "Warned before it" not in _cause(UNKNOWN)


def test_a_fastchat_record_is_read_and_its_relayed_stderr_keeps_no_level():
    from kvdoctor.explain.log_lines import normalise

    relayed, own = normalise('2024-08-21 03:38:53 | ERROR | stderr |   File "/x/serve/vllm_worker.py", line 288, in '
                             "<module>\n2024-08-21 03:38:53 | INFO | model_worker | Loading the model\n")
    assert relayed.level is None and relayed.text.startswith('  File "/x/serve/vllm_worker.py"')
    assert own.level == "INFO" and own.text == "Loading the model"


def test_a_traceback_cut_inside_pythons_own_code_names_the_programs_innermost_frame():
    tag = "2024-08-21 03:38:53 | ERROR | stderr | "
    report = explain_text("".join(tag + line + "\n" for line in [
        "Traceback (most recent call last):",
        '  File "/srv/app/serve/vllm_worker.py", line 288, in <module>',
        "    parser = AsyncEngineArgs.add_cli_args(parser)",
        '  File "/srv/.venv/lib/python3.11/site-packages/vllm/engine/arg_utils.py", line 240, in add_cli_args',
        "    parser.add_argument('--max-model-len',",
        '  File "/usr/lib/python3.11/argparse.py", line 1473, in add_argument',
    ]))
    cause = report.findings[0].cause
    assert report.findings[0].rule_id == "KVD399" and report.exit_code("error") == 1
    assert ("innermost frames outside Python's standard library: File \"vllm/engine/arg_utils.py\", line 240, in "
            "add_cli_args: `parser.add_argument('--max-model-len',`") in cause, cause
