"""Round 26 of issue 28 (logs batches 55-56): a bare exception type carries no message (the next line is the next
output); an OpenAI error body nested under "error" is read as the client raises it; Python's words for a refused call
are a failure even quoted without their TypeError, and a dashed keyword is still one; a rule's words on a line vLLM only
ever logs as a warning are not a failure once the server came up after them; the record a logger.exception call
printed above its traceback is quoted with the failure."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text


def test_a_bare_assertion_error_does_not_take_the_next_line_as_its_message():
    report = explain_text('File ".../vllm/lora/ops/triton_ops/lora_shrink_op.py", in _lora_shrink\n'
                          "    assert token_lora_mapping.size(0) == M\nAssertionError\nEngineCore failed to start.\n")
    assert report.exit_code("error") == 1
    first = report.findings[0]
    assert "EngineCore failed to start" not in first.title
    assert "token_lora_mapping" in " ".join(first.evidence)


def test_an_openai_error_body_under_error_is_the_refusal_the_server_sent():
    body = ('{"error":{"message":"\\"auto\\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to '
            'be set","type":"BadRequestError","param":null,"code":400}}\n')
    report = explain_text(body)
    assert report.exit_code("error") == 1
    assert report.extra.get("family") == "first_request_failure"
    assert "--enable-auto-tool-choice" in report.findings[0].title


def test_pythons_words_for_a_refused_call_are_a_failure_without_their_typeerror():
    report = explain_text("Server error: 500 - [address=0.0.0.0:46149, pid=156] AsyncEngineArgs.__init__() got an "
                          "unexpected keyword argument 'tool-call-parser'\n")
    assert report.exit_code("error") == 1
    assert report.extra.get("family") == "wrapper_api_mismatch"
    assert "tool-call-parser" in report.findings[0].title


HEALTHY_AFTER_A_WARNING = """\
INFO 08-16 02:15:01 [api_server.py:1805] vLLM API server version 0.10.0
CutlassBlockScaledGroupedGemm not supported on the current platform.
CutlassBlockScaledGroupedGemm not supported on the current platform.
INFO:     Started server process [774511]
INFO:     Application startup complete.
INFO:     127.0.0.1:33684 - "GET /v1/models HTTP/1.1" 200 OK
"""


def test_a_rules_words_on_a_line_vllm_only_logs_as_a_warning_are_not_a_failure_once_the_server_came_up():
    assert explain_text(HEALTHY_AFTER_A_WARNING).exit_code("error") == 0
    cut = HEALTHY_AFTER_A_WARNING.split("INFO:     Started")[0]  # the same lines with nothing after them
    assert explain_text(cut).exit_code("error") == 1


def test_the_record_logged_above_a_traceback_is_quoted_with_the_failure():
    head = "(APIServer pid=53846) ERROR 05-04 03:28:45 [api_router.py:72] "
    text = "".join(head + line + "\n" for line in (
        'Error in create_messages: Grammar error: Unimplemented keys: ["propertyNames"]',
        "Traceback (most recent call last):",
        '  File "/x/vllm/v1/structured_output/backend_xgrammar.py", line 308, in validate_xgrammar_grammar',
        "    raise ValueError(",
        "ValueError: The provided JSON schema contains features not supported by xgrammar."))
    report = explain_text(text)
    assert report.extra.get("family") == "structured_output_schema"
    assert any("propertyNames" in line for line in report.findings[0].evidence)
