"""Normalising real-world log lines, and refusing inputs that are not logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvdoctor.base.errors import LogInputError
from kvdoctor.explain import log_lines
from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.log_lines import normalise, read_log, strip_prefixes

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"


@pytest.mark.parametrize(
    "raw",
    [
        "(Worker_TP1 pid=302) ERROR 05-20 14:02:44 [multiproc_executor.py:871] ValueError: boom",
        "2025-04-09T02:12:05.902020301Z (Worker_TP1 pid=302) ERROR 05-20 14:02:44 [multiproc_executor.py:871] ValueError: boom",
        "Aug 19 18:00:10 vllm vllm[7048]: (Worker_TP1 pid=302) ERROR 05-20 14:02:44 [multiproc_executor.py:871] ValueError: boom",
        "vllm-1  | (Worker_TP1 pid=302) ERROR 05-20 14:02:44 [multiproc_executor.py:871] ValueError: boom",
        "\x1b[1;36m(Worker_TP1 pid=302)\x1b[0;0m \x1b[31mERROR\x1b[0m 05-20 14:02:44 [multiproc_executor.py:871] ValueError: boom",
    ],
)
def test_prefixes_and_colours_are_removed(raw):
    assert strip_prefixes(raw) == ("Worker_TP1 pid=302", "ERROR", "multiproc_executor.py:871", "ValueError: boom")


def test_old_record_header_and_rank_tag():
    assert strip_prefixes("[rank0]: RuntimeError: CUDA error") == ("rank0", None, None, "RuntimeError: CUDA error")
    assert strip_prefixes("INFO 11-04 10:12:51 arg_utils.py:1019] hello")[1:] == ("INFO", "arg_utils.py:1019", "hello")


def _same_diagnosis(text: str, reference: str) -> None:
    got, want = explain_text(text), explain_text(reference)
    assert got.extra["primary"]["rule_id"] == want.extra["primary"]["rule_id"]
    assert got.extra["primary"]["where"] == want.extra["primary"]["where"]
    assert got.facts == want.facts


def test_windows_line_endings_ansi_and_kubectl_timestamps_do_not_change_the_diagnosis():
    reference = (LOGS / "founding_triton_full.log").read_text()
    crlf = reference.replace("\n", "\r\n")
    coloured = "\n".join(
        f"2026-05-14T09:12:{i % 60:02d}.123456789Z \x1b[32m{line}\x1b[0m" for i, line in enumerate(reference.splitlines())
    )
    _same_diagnosis(crlf, reference)
    _same_diagnosis(coloured, reference)


def test_truncated_traceback_still_finds_the_failure():
    lines = (LOGS / "founding_interleaved.log").read_text().splitlines()
    cut = [line[:150] for line in lines]  # log shippers cut long lines
    report = explain_text("\n".join(cut))
    assert report.extra["primary"]["rule_id"] == "KVD101"


def test_utf16_log_from_powershell(tmp_path):
    path = tmp_path / "vllm.log"
    path.write_bytes((LOGS / "bf16_t4_1157.log").read_text().encode("utf-16"))
    assert "Bfloat16 is only supported" in read_log(str(path))


def test_input_errors(tmp_path, monkeypatch):
    with pytest.raises(LogInputError, match="not found"):
        read_log(str(tmp_path / "missing.log"))
    with pytest.raises(LogInputError, match="directory"):
        read_log(str(tmp_path))
    empty = tmp_path / "empty.log"
    empty.write_text("  \n\n")
    with pytest.raises(LogInputError, match="empty"):
        read_log(str(empty))
    binary = tmp_path / "core.dump"
    binary.write_bytes(bytes(range(256)) * 200)
    with pytest.raises(LogInputError, match="binary"):
        read_log(str(binary))
    big = tmp_path / "big.log"
    big.write_text("INFO x\n" * 100)
    monkeypatch.setattr(log_lines, "MAX_LOG_BYTES", 200)
    with pytest.raises(LogInputError, match="over"):
        read_log(str(big))


def test_a_few_bad_bytes_are_tolerated(tmp_path):
    path = tmp_path / "vllm.log"
    path.write_bytes(b"INFO garbage \x80\xff\xfe\n" + (LOGS / "bf16_t4_1157.log").read_bytes())
    assert explain_text(read_log(str(path))).extra["primary"]["rule_id"] == "KVD121"


def test_normalise_numbers_lines_from_one_as_an_editor_does():
    """A CR alone redraws the line (a progress bar): the line number stays the file's, its text what a terminal last
    showed (round 16: `grep -n` and the report agree)."""
    lines = normalise("a\r\nb\rc\n")
    assert [(l.number, l.text) for l in lines] == [(1, "a"), (2, "c")]


def test_nested_process_tags_keep_the_record_and_the_innermost_process():
    """A Ray worker's line relayed by the engine core carries two tags; the record under them is still read."""
    line = ("(EngineCore_DP0 pid=26283) (RayWorkerWrapper pid=4711, ip=10.0.0.2) INFO 11-06 10:51:48 "
            "[kv_cache_utils.py:1229] GPU KV cache size: 75,840 tokens\n")
    parsed = normalise(line)[0]
    assert (parsed.level, parsed.stream) == ("INFO", "RayWorkerWrapper pid=4711")
    assert parsed.text == "GPU KV cache size: 75,840 tokens"


def test_html_entities_and_typographic_quotes_are_undone():
    escaped = "ValueError: Unknown kv cache dtype: &#39;fp9&#39; (&quot;auto&quot; &lt;- default)\n"
    assert normalise(escaped)[0].text == "ValueError: Unknown kv cache dtype: 'fp9' (\"auto\" <- default)"
    smart = "ValueError: Unknown kv cache dtype: \u2018fp9\u2019 (\u201cauto\u201d)\n"
    assert normalise(smart)[0].text == "ValueError: Unknown kv cache dtype: 'fp9' (\"auto\")"
    # a literal '&amp;' in an ordinary log is left as it is
    assert normalise("INFO 05-02 10:22:18 [x.py:1] a &amp; b\n")[0].text == "a &amp; b"


def test_a_message_quoted_in_a_json_string_is_read_with_its_quotes_as_printed():
    # a client's paste of the message from an error response's body, its quotes escaped as JSON escapes them; the
    # whole body (a JSON record) is parsed as JSON
    for pasted in ('\\"auto\\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set\n',
                   '{"object": "error", "message": "\\"auto\\" tool choice requires --enable-auto-tool-choice '
                   'and --tool-call-parser to be set", "code": 400}\n'):
        report = explain_text(pasted)
        assert report.findings[0].rule_id == "KVD375" and report.findings[0].status == "fired"
        assert '"auto" tool choice' in report.findings[0].title
    assert normalise('path C:\\\\"x\n')[0].text.count('\\') == 2  # an escaped backslash before a quote stays


def test_a_hard_wrapped_tagged_line_keeps_its_process_on_the_wrapped_rest():
    log = ("(VllmWorker rank=1 pid=2978) ERROR 03-19 10:22:18 [multiproc_executor.py:1] torch.OutOfMemoryError: "
           "CUDA out of\n"
           "memory. Tried to allocate 1.74 GiB. GPU 1 has a total capacity of 23.57 GiB of which 605.88 MiB is free.\n"
           "Traceback (most recent call last):\n")
    lines = normalise(log)
    assert [line.stream for line in lines] == ["VllmWorker rank=1 pid=2978", "VllmWorker rank=1 pid=2978", ""]
    # a short tagged line is not taken for a wrapped one
    short = normalise("(VllmWorker pid=1) INFO 03-19 10:22:18 [x.py:1] ready\nplain output\n")
    assert short[1].stream == ""


def test_a_wrapped_exception_under_a_process_tag_is_explained_with_its_values():
    log = ("(VllmWorker rank=1 pid=2978) ERROR 03-19 10:22:18 [multiproc_executor.py:1] torch.OutOfMemoryError: "
           "CUDA out of\n"
           "memory. Tried to allocate 1.74 GiB. GPU 1 has a total capacity of 23.57 GiB of which 605.88 MiB is free.\n")
    from kvdoctor.explain.explain import explain_text
    from kvdoctor.report.check.text import render

    text = " ".join(render(explain_text(log)).split())
    assert "1.74 GiB" in text and "23.57 GiB" in text


@pytest.mark.parametrize("prefix", [lambda n: f"{n:>4}  ", lambda n: f"{n}: ", lambda n: f"{n} | ",
                                    lambda n: "10:22:18.123 ", lambda n: "- "])
def test_a_log_wide_prefix_is_stripped(prefix):
    lines = ["INFO 05-02 10:22:10 [api_server.py:1] vLLM API server version 0.30.0",
             "Traceback (most recent call last):",
             '  File "/x/vllm/config/cache.py", line 100, in _verify_cache_dtype',
             "ValueError: Unknown kv cache dtype: fp9"]
    parsed = normalise("".join(prefix(n) + line + "\n" for n, line in enumerate(lines, 7)))
    assert parsed[0].level == "INFO" and parsed[2].text.startswith('  File "')
    assert parsed[3].text == "ValueError: Unknown kv cache dtype: fp9"


def test_numbers_that_do_not_count_up_are_the_log_s_own():
    lines = ["3 validation errors for ModelConfig", "2 workers died", "1 GPU left", "0 blocks"]
    assert [line.text for line in normalise("\n".join(lines) + "\n")] == lines
