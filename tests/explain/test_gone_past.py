"""Failure lines the server came up after are not the failure when later ones follow its ready line: the error it
retried past at start-up (an offline Hub's 'Error retrieving safetensors ..., retrying') is not why a request failed
or why the process was killed while serving."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text

RETRIED = ("ERROR 09-26 23:38:47 [config.py:130] Error retrieving safetensors: Cannot reach https://huggingface.co/m/"
           "resolve/main/model.safetensors: offline mode is enabled., retrying 1 of 2\n"
           "INFO 09-26 23:39:10 [gpu_model_runner.py:1] Model loading took 0.5 GiB\n"
           "INFO:     Application startup complete.\n"
           'INFO:     127.0.0.1:60538 - "GET /v1/models HTTP/1.1" 200 OK\n')


def test_a_kill_while_serving_is_the_failure_not_the_retried_error_before_start_up():
    report = explain_text(RETRIED + "./serve.sh: line 193: 124064 Killed                  vllm serve m --port 8000\n")
    assert report.extra["primary"]["rule_id"] == "KVD461"
    assert report.extra.get("family") == "other"  # a kill, not a request's failure


def test_a_request_failure_no_rule_knows_after_start_up_is_the_failure_not_the_retried_error():
    report = explain_text(RETRIED + "ERROR 09-26 23:40:01 [serving_chat.py:222] Error in preprocessing prompt inputs\n"
                          "Traceback (most recent call last):\n"
                          '  File "/usr/lib/python3.12/site-packages/vllm/entrypoints/openai/serving_chat.py", line '
                          "205, in create_chat_completion\n    x()\n"
                          "KeyError: 'acme_image_token'\n")
    assert report.extra["primary"]["rule_id"] != "KVD323"  # the Hub fetch the server went on from
    assert report.extra.get("family") == "first_request_failure"


def test_a_retried_error_alone_before_the_ready_line_is_still_no_failure():
    assert explain_text(RETRIED).extra.get("primary") is None
