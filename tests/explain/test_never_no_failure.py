"""A log with a failure never reads as healthy; a healthy one with warnings exits 0."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text

HEALTHY = """INFO 05-02 10:22:10 [api_server.py:1] vLLM API server version 0.30.0
WARNING 05-02 10:22:11 [config.py:1] Default sampling parameters have been overridden by the model's Hugging Face generation config recommended from the model creator. If this is not intended, please relaunch vLLM instance with `--generation-config vllm`.
INFO 05-02 10:22:18 [launcher.py:1] Application startup complete.
"""


def test_an_error_line_without_exception_is_a_failure():
    report = explain_text("INFO 05-02 10:22:10 [x.py:1] loading\nERROR 05-02 10:22:18 [worker.py:9] The worker lost its GPU\n")
    assert report.exit_code("error") == 1
    assert report.extra["primary"]["rule_id"] == "KVD399"
    assert "The worker lost its GPU" in report.extra["primary"]["message"]


def test_a_compiler_error_line_is_a_failure():
    report = explain_text("gcc -shared cuda_utils.c\ncollect2: error: ld returned 1 exit status\n")
    assert report.exit_code("error") == 1


def test_a_worker_error_with_no_traceback_is_located():
    report = explain_text("RuntimeError: Worker failed with error 'Total number of attention heads (28) must be "
                          "divisible by tensor parallel size (8)', please check the stack trace above for the root cause")
    assert report.exit_code("error") == 1
    assert report.extra["family"] == "parallel_divisibility"
    assert any("verify_with_parallel_config" in note for note in report.notes)


def test_a_healthy_log_with_warnings_exits_zero_and_says_why():
    report = explain_text(HEALTHY)
    assert report.exit_code("error") == 0
    assert report.findings == ()
    assert any("warning line(s), none of them a failure" in note for note in report.notes)


def test_a_failure_after_start_up_is_a_request_time_failure():
    log = HEALTHY + ('INFO:     127.0.0.1:41950 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error\n'
                     "ERROR 05-02 10:23:00 [engine.py:158] AssertionError('Something only a request reaches')\n")
    report = explain_text(log)
    assert report.exit_code("error") == 1
    assert report.extra["family"] == "first_request_failure"
    assert any("while serving a request" in note for note in report.notes)
    assert any("failed with HTTP 500" in note for note in report.notes)


def test_without_the_message_index_explain_still_works(monkeypatch):
    import kvdoctor.explain.message_index as message_index

    monkeypatch.setattr(message_index, "load_index", lambda: None)
    report = explain_text("ERROR 05-02 10:22:18 [worker.py:9] The worker lost its GPU\n")
    assert report.exit_code("error") == 1 and "located" not in report.extra


def test_an_unknown_failure_after_the_server_came_up_is_titled_as_a_request_not_a_start_up():
    log = ("INFO 05-02 10:22:18 [api_server.py:1] vLLM API server version 0.10.0\n"
           "INFO:     Application startup complete.\n"
           'INFO:     127.0.0.1:50000 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
           "ERROR 05-02 10:23:01 [serving_chat.py:1] Error in applying chat template from request: the flux capacitor\n"
           'INFO:     127.0.0.1:50002 - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request\n')
    first = explain_text(log).sorted_findings()[0]
    assert first.rule_id == "KVD399" and first.title.startswith("vLLM was up; a request failed")
    cold = explain_text("RuntimeError: the flux capacitor is not charged\n").sorted_findings()[0]
    assert cold.rule_id == "KVD399" and cold.title.startswith("vLLM failed to start")
