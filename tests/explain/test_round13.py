"""Round 13 (issue 28, batch 16's seen healthy logs read as failing): a request a running server refused with a 4xx
status, and a Python warning whose message spans lines, are not failures."""

from __future__ import annotations

import pytest

from kvdoctor.explain.explain import explain_text

_UP = ("INFO 04-10 03:52:56 [launcher.py:34] Route: /v1/chat/completions, Methods: POST\n"
       "INFO:     Started server process [758654]\n"
       "INFO:     Waiting for application startup.\n"
       "INFO:     Application startup complete.\n")


@pytest.mark.parametrize("refused", [
    "ERROR 04-10 03:53:16 [serving_chat.py:135] Error with model object='error' message='The model `llama` does not "
    "exist.' type='NotFoundError' param=None code=404\n"
    'INFO:     127.0.0.1:45822 - "POST /v1/chat/completions HTTP/1.1" 404 Not Found\n',
    "ERROR 04-10 03:53:16 [serving_completion.py:120] Error in preprocessing: ErrorResponse(object='error', "
    "message='max_tokens must be at least 1, got 0.', type='BadRequestError', param=None, code=400)\n",
    'INFO:     10.0.0.7:5123 - "POST /v1/embeddings HTTP/1.1" 400 Bad Request\n',
])
def test_a_request_a_running_server_refused_with_a_4xx_is_not_a_failure(refused):
    report = explain_text(_UP + refused)
    assert report.exit_code("error") == 0


def test_the_refused_requests_are_said_in_a_note():
    report = explain_text(_UP + "ERROR 04-10 03:53:16 [serving_chat.py:135] Error with model object='error' "
                          "message='The model `llama` does not exist.' type='NotFoundError' param=None code=404\n")
    assert any("refused with a 4xx status" in note and "llama" in note for note in report.notes)


@pytest.mark.parametrize("log", [
    # the same refusal before the server said it was up: nothing says the server runs
    "ERROR 04-10 03:53:16 [serving_chat.py:135] Error with model object='error' message='The model `llama` does not "
    "exist.' type='NotFoundError' param=None code=404\n",
    # a 5xx is the server's own failure
    _UP + "ERROR 04-10 03:53:16 [serving_chat.py:135] Error in chat completion: ErrorResponse(object='error', "
    "message='CUDA error: an illegal memory access was encountered', type='InternalServerError', param=None, "
    "code=500)\n",
    # an error record that is not a response to a request
    _UP + "ERROR 04-10 03:53:16 [core.py:135] EngineCore encountered a fatal error: code=404 in the NIXL agent\n",
])
def test_a_refusal_before_the_server_is_up_a_5xx_or_an_engine_error_still_fails(log):
    assert explain_text(log).exit_code("error") == 1


@pytest.mark.parametrize("prefix", ["", "(pid=880853) "])
def test_a_python_warning_whose_message_spans_lines_is_a_warning(prefix):
    log = (f"{prefix}/envs/rl/lib/python3.10/site-packages/vllm/connections.py:8: RuntimeWarning: Failed to read "
           "commit hash:\n"
           f"{prefix}No module named 'vllm._version'\n"
           f"{prefix}  from vllm.version import __version__ as VLLM_VERSION\n")
    assert explain_text(log).exit_code("error") == 0


def test_an_exception_after_a_warning_with_no_source_line_still_fails():
    log = ("/app/train.py:8: UserWarning: the tokenizer has no pad token\n"
           "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be "
           "stored in KV cache (9024).\n")
    assert explain_text(log).exit_code("error") == 1


def test_a_frame_named_like_a_request_function_outside_vllm_is_not_request_time():
    """torch Inductor's codegen has a `generate`: an OOM while compiling at start-up is not a request's failure."""
    log = ("Traceback (most recent call last):\n"
           '  File "/usr/local/lib/python3.12/dist-packages/torch/_inductor/codegen/wrapper.py", line 1716, in generate\n'
           "    return self._generate(is_inference)\n"
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.02 GiB. GPU 0 has a total capacity of "
           "14.74 GiB of which 111.81 MiB is free.\n")
    report = explain_text(log)
    assert report.extra["family"] != "first_request_failure"
    assert not any("while serving a request" in note for note in report.notes)
    served = log.replace("/usr/local/lib/python3.12/dist-packages/torch/_inductor/codegen/wrapper.py",
                         "/usr/local/lib/python3.12/dist-packages/vllm/engine/async_llm_engine.py")
    assert any("while serving a request" in note for note in explain_text(served).notes)


_RETRY = ("ERROR 10-14 19:21:52 [config.py:120] Error retrieving safetensors: 'gpt-oss-120b' is not a safetensors repo. "
          "Couldn't find 'model.safetensors.index.json' or 'model.safetensors' files., retrying 1 of 2\n")


def test_error_records_the_server_came_up_after_are_not_the_failure():
    log = _RETRY + "INFO 10-14 19:25:01 [gpu_worker.py:1] Model loading took 65.97 GiB\n" + _UP
    report = explain_text(log)
    assert report.exit_code("error") == 0
    assert any("after which the server came up" in note and "safetensors" in note for note in report.notes)


_FALLBACK = ("Traceback (most recent call last):\n  File \"/x/vllm/model_executor/layers/fused_moe/x.py\", line 1, in "
             "probe\nImportError: cannot import name 'deep_gemm' from 'vllm.third_party'\n")


def test_an_exception_the_same_run_came_up_after_is_not_the_failure():
    """A traceback an optional import or a fallback printed, then the server's ready line in the same run."""
    report = explain_text(_RETRY + _FALLBACK + _UP)
    assert report.exit_code("error") == 0
    assert any("2 ERROR record(s) or exception(s), after which the server came up" in note and "safetensors" in note
               for note in report.notes)


@pytest.mark.parametrize("after", [
    "",  # the log ends on the error: nothing says start-up went on
    _FALLBACK + "INFO 10-14 19:30:00 [api_server.py:1] vLLM API server version 0.11.0\n" + _UP,  # another run came up
    _FALLBACK + "ERROR 10-14 19:30:00 [core.py:1] EngineCore failed to start.\n" + _UP,  # the start-up said it failed
    _UP + _FALLBACK,  # the exception came after the server was up
])
def test_an_error_with_no_ready_line_after_or_one_from_another_run_still_fails(after):
    assert explain_text(_RETRY + after).exit_code("error") == 1


def test_tensorflow_import_noise_cut_by_a_wrap_is_not_a_failure():
    log = ("E0000 00:00:1760469722.892123    4394 cuda_dnn.cc:8579] Unable to register cuDNN\n"
           " factory: Attempting to register factory for plugin cuDNN when one has already\n"
           "been registered\n"
           "INFO 10-14 19:25:01 [api_server.py:1] vLLM API server version 0.11.0\n")
    assert explain_text(log).exit_code("error") == 0
