"""Round 8 of issue 28: the exit contract on log shapes no seen log taught, each a mechanism tried on synthetic
lines written from the launchers' and frameworks' own formats (never copied from a real log)."""

from __future__ import annotations

import pytest

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.similar_reports import rules_family

_HEALTHY = ("INFO 06-25 16:32:00 [api_server.py:1000] vLLM API server version 0.9.2\n"
            "INFO 06-25 16:32:01 [config.py:100] Using max model len 4096\n")
_TRACEBACK = ("Traceback (most recent call last):\n"
              '  File "/opt/app/train.py", line 3, in <module>\n'
              "    main()\n"
              "KeyError: 'model.layers.0.mlp.gate_proj.weight'\n")


def _exit(text: str) -> int:
    return explain_text(text).exit_code("error")


def _each_line(prefix: str, text: str) -> str:
    return "".join(prefix + line + "\n" for line in text.splitlines())


@pytest.mark.parametrize("space", ["\u00a0", "\u202f", "\u2009", "\u3000"])
@pytest.mark.parametrize("failure", [
    "ERROR 06-25 16:32:05 [core.py:500] EngineCore failed to start.",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    "RuntimeError: Engine core initialization failed. See root cause above.",
    "OSError: [Errno 28] No space left on device",
])
def test_a_log_whose_spaces_a_web_page_made_non_breaking_still_fails(space, failure):
    assert _exit((_HEALTHY + failure).replace(" ", space) + "\n") == 1


def test_a_healthy_log_with_non_breaking_spaces_stays_healthy():
    assert _exit(_HEALTHY.replace(" ", "\u00a0")) == 0


@pytest.mark.parametrize("prefix", ["[default0]:", "[default3]: ", "[1,0]<stderr>:", "[1,2]<stdout>: "])
def test_a_launchers_per_rank_prefix_is_read_as_the_ranks_stream(prefix):
    # torchrun --tee writes '[default<rank>]:', Open MPI's --tag-output '[<job>,<rank>]<stream>:'
    assert _exit(_each_line(prefix, _HEALTHY + _TRACEBACK)) == 1
    assert _exit(_each_line(prefix, _HEALTHY)) == 0


@pytest.mark.parametrize("label", ["0: ", "3: "])
def test_srun_labels_on_every_line_are_stripped(label):
    # srun -l puts the task's number on each line: the same few numbers, not a count that rises
    assert _exit(_each_line(label, _HEALTHY + _TRACEBACK)) == 1
    assert _exit(_each_line(label, _HEALTHY)) == 0


@pytest.mark.parametrize("line", [
    "[ERROR|2024-06-25 16:32:00] llamafactory.launcher:143 >> vLLM engine failed to initialise",
    "[CRITICAL|2024-06-25 16:32:00] trainer.rollout:12 >> the rollout engine died",
    "2024-06-25 16:32:00 [error    ] rollout engine died",
    "2024-06-25 16:32:00 [critical ] rollout engine died",
    "FATAL: the model could not be loaded",
    "CRITICAL: the model could not be loaded",
])
def test_other_frameworks_error_records_are_failures(line):
    assert _exit(_HEALTHY + line + "\n") == 1


@pytest.mark.parametrize("line", [
    "[INFO|2024-06-25 16:32:00] llamafactory.launcher:143 >> vLLM engine started",
    "[WARNING|2024-06-25 16:32:00] llamafactory.model:50 >> padding side set to left",
    "2024-06-25 16:32:00 [info     ] rollout engine ready",
])
def test_other_frameworks_healthy_records_are_not(line):
    assert _exit(_HEALTHY + line + "\n") == 0


def test_a_frameworks_record_header_gives_the_level():
    # the record's level is read, so an INFO record quoting an error word is not taken for an error line
    assert _exit(_HEALTHY + "[INFO|2024-06-25 16:32:00] llamafactory.data:10 >> error: none\n") == 0


@pytest.mark.parametrize("line", [
    "rollout worker 3: ValueError: max_model_len 65536 is larger than the model's 32768",
    "generation failed for batch 7: torch.OutOfMemoryError: CUDA out of memory.",
    "errors: ['RuntimeError: CUDA error: device-side assert triggered']",
    '("AssertionError: head_size must be divisible by 8",)',
    "'KeyError: model.layers.0.mlp.gate_proj.weight'",
])
def test_an_exception_a_program_quoted_inside_its_own_line_is_a_failure(line):
    assert _exit(_HEALTHY + line + "\n") == 1


def test_an_exception_name_in_prose_without_its_colon_is_not():
    assert _exit(_HEALTHY + "retrying after a ValueError in the tokenizer warm-up\n") == 0


@pytest.mark.parametrize("label", ["0: ", "1: "])
@pytest.mark.parametrize("failure", ["KeyboardInterrupt", "FATAL: the model could not be loaded",
                                     "E0625 16:32:00.123456 1234 nccl.cc:100] NCCL failed"])
def test_srun_labels_do_not_hide_a_failure_that_needs_column_zero(label, failure):
    text = _HEALTHY + ('Traceback (most recent call last):\n  File "/opt/app/train.py", line 3, in <module>\n'
                       "    main()\n" if failure == "KeyboardInterrupt" else "") + failure + "\n"
    assert _exit(_each_line(label, text)) == 1


@pytest.mark.parametrize("line", [
    "torch._C._LinAlgError: linalg.cholesky: The factorization could not be completed",
    "libc++abi: terminating due to uncaught exception of type std::runtime_error: bad shape",
    "terminate called recursively",
    "*** Error in `python3': double free or corruption (out): 0x00007f",
    "CUDA driver error: invalid argument",
    "Unhandled exception in the engine loop, shutting down",
    "Uncaught exception: engine core died",
    "vLLM server did not become healthy within 600 seconds",
    "::error::the vLLM server failed its smoke test",
])
def test_last_words_of_runtimes_and_runners_are_failures(line):
    assert _exit(_HEALTHY + line + "\n") == 1


def test_an_info_record_mentioning_an_unhandled_exception_is_not():
    assert _exit(_HEALTHY + "INFO 06-25 16:32:02 [launcher.py:1] unhandled exceptions are logged at ERROR\n") == 0


def _family(text: str) -> str | None:
    """The family the rules give (a similar report may name a likely one on top: similar_reports.py)."""
    return rules_family(explain_text(text))


_REQUEST_FAILURE = ("Traceback (most recent call last):\n"
                    '  File "/venv/lib/python3.12/site-packages/somelib/integrations/glue.py", line 5, in <module>\n'
                    "    from otherlib.processing import OldWarper\n"
                    "ImportError: cannot import name 'OldWarper' from 'otherlib.processing'\n")


@pytest.mark.parametrize("access", [
    'INFO:     10.0.0.7:51234 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error',
    '(APIServer pid=7) INFO:     127.0.0.1:40000 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error',
    'INFO 06-25 16:32:09 [launcher.py:1] 10.0.0.7:51234 - "POST /v1/embeddings HTTP/1.0" 503 Service Unavailable',
])
def test_a_failure_the_server_answered_a_request_with_is_a_request_time_failure(access):
    report = explain_text(_REQUEST_FAILURE + access + "\n")
    assert report.extra["family"] == "first_request_failure"
    text = " ".join(__import__("kvdoctor.report.check.text", fromlist=["render"]).render(report).split())
    assert "right after (line 5)" in text and access.split('"')[1] in text


def test_an_exception_under_uvicorns_asgi_header_is_a_request_time_failure():
    assert _family(_HEALTHY + "ERROR:    Exception in ASGI application\n" + _REQUEST_FAILURE) == "first_request_failure"


def test_a_start_up_failure_with_no_answered_request_is_not():
    assert _family(_HEALTHY + _REQUEST_FAILURE) != "first_request_failure"
    # a 5xx logged long after the failure is another request's
    filler = "".join(f"INFO 06-25 16:32:{i:02d} [loader.py:1] step {i}\n" for i in range(10, 20))
    assert _family(_REQUEST_FAILURE + filler + 'INFO:     1.2.3.4:5 - "POST /v1/x HTTP/1.1" 500 Internal Server Error\n'
                   ) != "first_request_failure"


def _primary(text: str) -> tuple[str | None, str | None]:
    primary = explain_text(text).extra.get("primary") or {}
    return primary.get("exception_type"), primary.get("message")


_UNKNOWN = "The frobnicator width (48) does not divide the page size (4096)"


@pytest.mark.parametrize("wrapper", [
    f'RuntimeError: vLLM engine failed to initialize: ValueError("{_UNKNOWN}")',
    f"RuntimeError: rollout init failed: ValueError('{_UNKNOWN}')",
    'Exception: Request failed: 500, {"detail": "ValueError: ' + _UNKNOWN + '"}',
    f"RuntimeError: generation failed: ValueError: {_UNKNOWN}",
    "RuntimeError: Worker failed with error 'Traceback (most recent call last):\\n  File \"/v/vllm/worker.py\", "
    f"line 5, in f\\n    raise ValueError(msg)\\nValueError: {_UNKNOWN}'",
    "RuntimeError: outer failed: RuntimeError: Worker failed with error 'ValueError: " + _UNKNOWN + "', please check "
    "the stack trace above for the root cause",
])
def test_an_exception_quoted_in_a_wrappers_message_is_the_failure(wrapper):
    assert _primary(wrapper + "\n") == ("ValueError", _UNKNOWN)


def test_a_quoted_exception_says_where_it_was_quoted():
    text = " ".join(__import__("kvdoctor.report.check.text", fromlist=["render"]).render(
        explain_text(f"RuntimeError: init failed: ValueError: {_UNKNOWN}\n")).split())
    assert "quoted in a RuntimeError's message" in text


def test_an_exception_printed_on_the_line_after_a_message_is_not_quoted_by_it():
    # a continuation line is the next thing the log printed, not the wrapper's words
    chain = ("Traceback (most recent call last):\n"
             '  File "/v/vllm/v1/engine/core.py", line 5, in __init__\n'
             "    x()\n"
             "AssertionError: the setup hook variable is reserved\n"
             "RuntimeError: Engine core initialization failed. See root cause above.\n")
    assert _primary(chain)[0] == "AssertionError"


def test_an_exception_name_in_prose_is_not_a_payload():
    assert _primary(f"RuntimeError: retry the ValueError handler later, {_UNKNOWN}\n")[0] == "RuntimeError"


def test_rays_task_error_header_is_a_wrapper_of_the_error_after_it():
    text = ("ray.exceptions.RayTaskError(ValueError): ray::WorkerDict.actor_rollout_init_model() (pid=1, ip=10.0.0.1)\n"
            '  File "/venv/lib/python3.12/site-packages/verl/workers/fsdp_workers.py", line 10, in init_model\n'
            "    self.rollout = Rollout(config)\n"
            f"ValueError: {_UNKNOWN}\n")
    assert _primary(text) == ("ValueError", _UNKNOWN)


def test_torch_elastics_child_failed_is_a_wrapper():
    text = ("Traceback (most recent call last):\n  File \"/opt/app/train.py\", line 3, in <module>\n    main()\n"
            f"ValueError: {_UNKNOWN}\n"
            "Traceback (most recent call last):\n"
            '  File "/venv/lib/python3.12/site-packages/torch/distributed/run.py", line 900, in elastic_launch\n'
            "    raise ChildFailedError(\n"
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
            "============================================================\ntrain.py FAILED\n")
    assert _primary(text) == ("ValueError", _UNKNOWN)


def test_an_asyncio_task_whose_exception_nobody_retrieved_is_a_failure():
    text = _HEALTHY + ("Task exception was never retrieved\n"
                       f"future: <Task finished name='Task-3' coro=<run() done> exception=ValueError('{_UNKNOWN}')>\n")
    assert _exit(text) == 1


def _render(text: str) -> str:
    from kvdoctor.report.check.text import render

    return " ".join(render(explain_text(text)).split())


@pytest.mark.parametrize("header", ["ERROR 05-13 12:15:31 [core.py:387] ",
                                    "(EngineCore_DP0 pid=9) ERROR 05-13 12:15:31 [core.py:387] "])
def test_a_headerless_excerpt_under_error_records_keeps_its_frames(header):
    # vLLM's logger prints each line of a traceback as its own record: an excerpt pasted without its Traceback line
    text = "".join(header + line + "\n" for line in (
        '  File "/venv/lib/python3.12/site-packages/vllm/v1/spec_decode/widget_proposer.py", line 14, in __init__',
        "    self.width = vllm_config.widget_config.widget_width",
        "AttributeError: 'NoneType' object has no attribute 'widget_width'"))
    out = _render(text)
    assert "widget_proposer.py:14 in __init__" in out and "widget_config.widget_width" in out


def test_frames_under_another_level_are_not_the_exceptions():
    text = ('WARNING 05-13 12:15:30 [x.py:1]   File "/venv/lib/python3.12/site-packages/vllm/a.py", line 3, in f\n'
            "ERROR 05-13 12:15:31 [core.py:387] AttributeError: 'NoneType' object has no attribute 'widget_width'\n")
    assert "a.py:3" not in _render(text)


@pytest.mark.parametrize("line", [
    "urllib3.exceptions.ReadTimeoutError: HTTPSConnectionPool(host='huggingface.co', port=443): Read timed out. "
    "(read timeout=10)",
    "requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='huggingface.co', port=443): Read timed out. "
    "(read timeout=10.0)",
    "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='hf-mirror.com', port=443): Max retries exceeded "
    "with url: /api/models/org/model (Caused by NewConnectionError)",
    "urllib3.exceptions.ReadTimeoutError: HTTPSConnectionPool(host='cas-bridge.xethub.hf.co', port=443): Read timed out.",
    "requests.exceptions.ConnectionError: ('Connection aborted.', HTTPSConnectionPool(host='huggingface.co', "
    "port=443): Connection aborted.)",
])
def test_a_read_or_connection_the_hubs_hosts_dropped_is_a_failed_model_fetch(line):
    assert _family(line + "\n") == "hf_download"


def test_a_timeout_at_another_host_is_not_a_model_fetch():
    assert _family("urllib3.exceptions.ReadTimeoutError: HTTPSConnectionPool(host='api.example.com', port=443): "
                   "Read timed out. (read timeout=10)\n") != "hf_download"


@pytest.mark.parametrize("line", [
    "FileNotFoundError: [Errno 2] No such file or directory: 'nvcc'",
    "FileNotFoundError: [Errno 2] No such file or directory: '/usr/local/cuda/bin/nvcc'",
    "FileNotFoundError: [Errno 2] No such file or directory: 'ninja'",
    "RuntimeError: FlashInfer failed to JIT-compile: ninja (build tool) not found.",
    "(Worker_TP0 pid=4) ERROR 09-26 10:57:34 [multiproc_executor.py:671] FileNotFoundError: [Errno 2] No such file "
    "or directory: 'nvcc'",
])
def test_the_jit_builds_missing_tools_are_flashinfers_toolkit(line):
    assert _family(line + "\n") == "flashinfer_jit_toolkit"


def test_another_missing_file_is_not_the_toolkit():
    assert _family("FileNotFoundError: [Errno 2] No such file or directory: 'nvcc_notes.txt'\n") != "flashinfer_jit_toolkit"


@pytest.mark.parametrize("line", [
    "KeyError: 'invalid tool call parser: frobnitz (chose from { hermes, mistral })'",
    "KeyError: 'invalid reasoning parser: frobnitz (chose from { deepseek_r1, qwen3 })'",
    "(APIServer pid=9) KeyError: 'invalid tool call parser: frobnitz (chose from { hermes })'",
])
def test_the_api_servers_check_of_its_parsers_refuses_a_serve_argument(line):
    report = explain_text(line + "\n")
    assert report.extra["family"] == "serve_args"
    assert "frobnitz" in " ".join(__import__("kvdoctor.report.check.text", fromlist=["render"]).render(report).split())


def test_any_raise_of_the_serve_argument_checks_is_a_refused_argument():
    # located by where vLLM raises it (the traceback's frame), whatever its words
    text = ("Traceback (most recent call last):\n"
            '  File "/venv/lib/python3.12/site-packages/vllm/entrypoints/openai/cli_args.py", line 300, in '
            "validate_parsed_serve_args\n"
            '    raise TypeError("Error: --frob requires --widget")\n'
            "TypeError: Error: --frob requires --widget\n")
    assert _family(text) == "serve_args"


def _raised_under(file: str, function: str, exception: str = "KeyError: 4711") -> str:
    return ("Traceback (most recent call last):\n"
            f'  File "/venv/lib/python3.12/site-packages/{file}", line 90, in {function}\n'
            "    step = table[token_id]\n"
            f"{exception}\n")


@pytest.mark.parametrize("file, function", [
    ("vllm/entrypoints/openai/completion/serving.py", "_create_completion_logprobs"),
    ("vllm/entrypoints/openai/serving_chat.py", "chat_completion_stream_generator"),
    ("vllm/entrypoints/serve/tokenize/serving.py", "create_tokenize"),
    ("fastapi/routing.py", "run_endpoint_function"),
    ("starlette/routing.py", "handle"),
])
def test_a_failure_under_a_request_serving_place_is_a_request_time_failure(file, function):
    assert _family(_raised_under(file, function)) == "first_request_failure"


@pytest.mark.parametrize("file, function", [
    ("vllm/entrypoints/openai/serving_chat.py", "__init__"),
    ("vllm/entrypoints/openai/serving_models.py", "init_static_loras"),
    ("vllm/entrypoints/openai/serving_engine.py", "_load_chat_template"),
    ("starlette/routing.py", "lifespan"),
    ("vllm/entrypoints/openai/api_server.py", "init_app_state"),
])
def test_the_serving_layers_set_up_is_start_up(file, function):
    assert _family(_raised_under(file, function)) != "first_request_failure"


_CUT = ('(Worker_TP0 pid=4) ERROR 09-26 10:57:34 [multiproc_executor.py:671]   File "/venv/lib/python3.10/site-packages/'
        'widgetlib/sampling.py", line 980, in top_p_sample\n'
        "(Worker_TP0 pid=4) ERROR 09-26 10:57:34 [multiproc_executor.py:671]     masked = mask_logits(logits, top_k)\n"
        '(Worker_TP0 pid=4) ERROR 09-26 10:57:34 [multiproc_executor.py:671]   File "/venv/lib/python3.10/site-packages/'
        'widgetlib/sampling.py", line 1300, in mask_logits\n'
        "(Worker_TP0 pid=4) ERROR 09-26 10:57:34 [multiproc_executor.py:671]     return get_widget_module().mask(\n")


@pytest.mark.parametrize("head", [
    "FileNotFoundError: [Errno 2] No such file or directory: 'nvcc'\n",
    "when running the server, FileNotFoundError: [Errno 2] No such file or directory: 'nvcc'\nlogs:\n",
    "ERROR 09-26 10:57:30 [core.py:1] EngineCore failed to start.\n",
])
def test_a_log_that_ends_inside_a_traceback_names_its_innermost_frame(head):
    out = _render(head + _CUT)
    assert "ends inside a traceback" in out and "sampling.py:1300 in mask_logits" in out and "get_widget_module" in out


def test_a_traceback_that_reached_its_exception_line_is_not_called_cut():
    out = _render(_CUT + "(Worker_TP0 pid=4) ERROR 09-26 10:57:34 [multiproc_executor.py:671] "
                  "RuntimeError: widget module failed\n")
    assert "ends inside a traceback" not in out


def test_frames_far_above_the_logs_end_are_not_its_end():
    tail = "".join(f"INFO 09-26 10:58:{i:02d} [loader.py:1] step {i}\n" for i in range(6))
    assert "ends inside a traceback" not in _render("EngineCore failed to start.\n" + _CUT + tail)


_RELAYED_TRACEBACK = ("Traceback (most recent call last):\n"
                      '  File "/venv/lib/python3.12/site-packages/vllm/entrypoints/openai/serving_chat.py", line 90, '
                      "in create_chat_completion\n"
                      "    args = json.loads(text)\n"
                      "json.decoder.JSONDecodeError: Unterminated string starting at: line 1 column 14 (char 13)\n")


@pytest.mark.parametrize("prefix", [
    "(RayWorkerWrapper pid=4711) vllm-1  | (APIServer pid=1) ",
    "(TaskRunner pid=7) 2024-06-25T16:32:00.123Z (APIServer pid=1) ",
    "(pid=7) [2024-06-25 16:32:00] ",
    "(TaskRunner pid=7) [rank0]: ",
    "(TaskRunner pid=7) [default0]:",
])
def test_a_prefix_behind_a_process_tag_is_stripped_too(prefix):
    report = explain_text(_each_line(prefix, _RELAYED_TRACEBACK))
    assert report.exit_code("error") == 1
    assert (report.extra.get("primary") or {}).get("exception_type", "").endswith("JSONDecodeError")


def test_a_vllm_record_behind_a_tag_and_a_shippers_prefix_keeps_its_level():
    line = ("(RayWorkerWrapper pid=4711) decode-6c8f vllm (APIServer pid=1) ERROR 10-27 22:25:30 [async_llm.py:480] "
            "AsyncLLM output_handler failed.\n")
    from kvdoctor.explain.log_lines import normalise

    parsed = normalise(line)[0]
    assert (parsed.stream, parsed.level) == ("APIServer pid=1", "ERROR")
    assert _exit(_HEALTHY + line) == 1


@pytest.mark.parametrize("line", [
    "OSError: /models/qwen does not appear to have a file named config.json. Checkout "
    "'https://huggingface.co//models/qwen/tree/None' for available files.",
    "OSError: org/lora-only-repo does not appear to have a file named config.json. Checkout "
    "'https://huggingface.co/org/lora-only-repo/tree/main' for available files.",
    "(EngineCore pid=3) ERROR 05-02 10:22:18 [core.py:1] OSError: C:\\models\\qwen does not appear to have a file "
    "named config.json.",
])
def test_transformers_words_for_a_model_without_config_json(line):
    assert _family(line + "\n") == "model_config_missing"


def test_a_wait_loop_saying_the_server_is_not_ready_yet_is_not_a_failure():
    assert _exit(_HEALTHY + "vLLM server did not become ready yet, retrying in 5 s\n") == 0


@pytest.mark.parametrize("text", [
    "RuntimeError: Worker failed with error 'expected scalar type Widget but found Int'\n"
    "RuntimeError: Engine core initialization failed. See root cause above.\n",
    "ERROR 05-02 10:22:18 [core.py:1] RuntimeError: Worker failed with error 'expected scalar type Widget but found Int'\n"
    "ERROR 05-02 10:22:18 [core.py:1] RuntimeError: Engine core initialization failed. See root cause above.\n",
    "ValueError: expected scalar type Widget but found Int\n"
    "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.\n",
])
def test_the_next_exception_line_is_not_the_rest_of_a_message(text):
    assert _primary(text)[1] == "expected scalar type Widget but found Int"


def test_a_messages_own_continuation_lines_stay_with_it():
    message = _primary("ValueError: widget width 48 is invalid\nexpected a multiple of 64 for this page size\n")[1]
    assert "multiple of 64" in message
