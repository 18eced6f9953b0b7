"""A failure no rule knows whose message names a flag the run set: the finding says which flag, the family is the
flag's (explain/named_flag.py). The logs are written here in the shapes real logs have, not copied from a thread."""

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.log_lines import LogLine
from kvdoctor.explain.named_flag import flags_set, named_flag

TRACEBACK = """\
Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 699, in run_engine_core
    engine_core = EngineCoreProc(*args, **kwargs)
  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/attention/backends/registry.py", line 120, in get_path
    raise ValueError(
{message}
"""


def _line(number: int, text: str, level: str | None = None) -> LogLine:
    return LogLine(number, "", level, None, text)


def test_a_flag_value_the_message_names_is_the_cause_and_the_family_is_serve_args():
    log = ("$ vllm serve /models/glm --max-model-len 10240 --attention-backend TORCH_SDPA --port 8000\n"
           "INFO 06-19 10:00:01 [__init__.py:200] Automatically detected platform cuda.\n"
           + TRACEBACK.format(message="ValueError: Backend TORCH_SDPA must be registered before use. Use "
                                      "register_backend(Backend.TORCH_SDPA, 'your.module.YourClass')"))
    report = explain_text(log)
    assert report.exit_code("error") == 1
    assert report.extra["family"] == "serve_args"
    assert report.extra["named_flag"] == {"flag": "--attention-backend", "value": "TORCH_SDPA", "by": "value",
                                          "line": 1}
    first = report.findings[0]
    assert "`--attention-backend TORCH_SDPA`, which the run set (line 1)" in first.cause
    assert "Run without `--attention-backend TORCH_SDPA`" in first.fixes[0].title


def test_a_switch_the_message_names_by_its_words_from_the_non_default_args_record():
    log = ("(APIServer pid=1) INFO 06-19 10:00:00 [utils.py:253] non-default args: {'model_tag': '/models/glm', "
           "'numa_bind': True, 'tensor_parallel_size': 4}\n"
           "(APIServer pid=1) WARNING 06-19 10:00:02 [numa_utils.py:90] CPU affinity is already constrained; pass "
           "--numa-bind-nodes explicitly to override.\n"
           + TRACEBACK.format(message="RuntimeError: NUMA binding was requested, but the GPU-to-NUMA topology is "
                                      "unknown. Pass --numa-bind-nodes explicitly or disable --numa-bind."))
    report = explain_text(log)
    named = report.extra["named_flag"]
    # the warning record's own '--numa-bind-nodes explicitly' sets nothing: the run's --numa-bind is named
    assert (named["flag"], named["by"], named["line"]) == ("--numa-bind", "name", None)
    assert "vLLM's non-default args" in report.findings[0].cause


def test_a_message_that_echoes_the_command_names_no_flag():
    assert named_flag("Killed vllm serve /m --enforce-eager --port 8080", [("enforce-eager", None, 1)]) is None
    three = "usage: x --enforce-eager --max-model-len N --tool-call-parser P"
    assert named_flag(three, [("tool-call-parser", "hermes", 1)]) is None


def test_values_too_plain_or_short_to_say_anything_are_not_matched():
    flags = [("gpu-memory-utilization", "0.9", 1), ("distributed-executor-backend", "ray", 1),
             ("served-model-name", "qwen-chat", 1), ("dtype", "auto", 1)]
    assert named_flag("ray failed: the qwen-chat model could not use auto at 0.9", flags) is None


def test_spellings_differ_only_in_separators_and_case():
    found = named_flag("RuntimeError: DeepSeek-V3 Tool parser could not locate tool call start/end tokens",
                       [("tool-call-parser", "deepseek_v3", 3)])
    assert (found.flag, found.value, found.by, found.setting) == ("--tool-call-parser", "deepseek_v3", "value",
                                                                  "--tool-call-parser deepseek_v3")


def test_environment_variables_set_on_the_command_line_count_and_log_records_do_not():
    lines = [_line(1, "VLLM_ATTENTION_BACKEND=FLASH_MAGIC VLLM_USE_V1=0 vllm serve m --enable-foo-bar"),
             _line(2, "VLLM_ATTENTION_BACKEND=OTHER_ONE", level="INFO"),
             _line(3, "RuntimeError: boom")]
    assert flags_set(lines, 3, {}) == [("enable-foo-bar", None, 1), ("VLLM_ATTENTION_BACKEND", "FLASH_MAGIC", 1),
                                      ("VLLM_USE_V1", "0", 1)]
    found = named_flag("ValueError: FLASH_MAGIC is no backend of this build", flags_set(lines, 3, {}))
    assert found.setting == "VLLM_ATTENTION_BACKEND=FLASH_MAGIC"


def test_the_set_up_names_the_vllm_environment_the_command_set():
    log = ("VLLM_USE_V1=0 VLLM_HOST_IP=10.0.0.2 python3 -m vllm.entrypoints.openai.api_server --model /m "
           "--data-parallel-size 8\n"
           "ERROR 07-10 10:00:00 [shm_broadcast.py:1] Timed out after 601 seconds waiting for clients. 1/8 clients "
           "joined.\n")
    report = explain_text(log)
    assert report.exit_code("error") == 1
    assert "environment VLLM_USE_V1=0, VLLM_HOST_IP=10.0.0.2 (line 1" in report.findings[0].cause


def test_a_family_the_rules_gave_is_kept():
    log = ("vllm serve /m --kv-cache-dtype fp8 --max-model-len 32768\n"
           "ValueError: To serve at least one request with the models's max seq len (32768), (4.0 GiB KV cache is "
           "needed, which is larger than the available KV cache memory (1.5 GiB).\n")
    report = explain_text(log)
    assert report.extra["family"] == "kv_cache_too_small"
    assert "named_flag" not in report.extra
