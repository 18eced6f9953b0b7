"""Logs as explain meets them in real life: gzip-compressed (read as they are, a gzip bomb refused on one line),
and long (a server's request chatter is not matched line by line, the failure at the end still is)."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import pytest

from kvdoctor.base.errors import LogInputError
from kvdoctor.explain import log_lines
from kvdoctor.explain.explain import explain_log, explain_text
from kvdoctor.explain.log_lines import CHATTER_REPEATS, normalise, read_log, signal_lines

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"
CHATTER = ("(APIServer pid=1) INFO 05-20 14:02:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: {n}.0 "
           "tokens/s, Avg generation throughput: 12.{s} tokens/s, Running: 1 reqs, Waiting: 0 reqs\n"
           'INFO:     10.0.0.{s}:4711 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n')


def test_a_gz_log_reads_as_its_text(tmp_path):
    text = (LOGS / "bf16_t4_1157.log").read_text()
    path = tmp_path / "vllm.log.gz"
    path.write_bytes(gzip.compress(text.encode()))
    assert read_log(str(path)) == text
    assert explain_log(str(path)).extra["primary"]["rule_id"] == "KVD121"


def test_concatenated_gzip_members_are_one_log(tmp_path):
    """`gzip -c a >> log.gz; gzip -c b >> log.gz` (log rotation) gives one log of both parts."""
    path = tmp_path / "rotated.gz"
    path.write_bytes(gzip.compress(b"INFO first part\n") + gzip.compress(b"ERROR second part\n"))
    assert read_log(str(path)) == "INFO first part\nERROR second part\n"


def test_the_size_cap_applies_to_the_uncompressed_text(tmp_path, monkeypatch):
    monkeypatch.setattr(log_lines, "MAX_LOG_BYTES", 100_000)
    path = tmp_path / "bomb.gz"
    path.write_bytes(gzip.compress(b"INFO x\n" * 20_000))  # 140 kB of text in a ~1 kB file
    assert path.stat().st_size < 2_000
    with pytest.raises(LogInputError, match="once decompressed"):
        read_log(str(path))


@pytest.mark.parametrize("data, message", [
    (gzip.compress(b"INFO a line\n" * 1000)[:-40], "cut short"),
    (b"\x1f\x8b\x08\x00garbage that is not deflate data", "not a readable gzip"),
])
def test_a_broken_gzip_file_is_refused(tmp_path, data, message):
    path = tmp_path / "broken.gz"
    path.write_bytes(data)
    with pytest.raises(LogInputError, match=message):
        read_log(str(path))


def test_a_gzip_bomb_exits_2_on_one_line(run_cli, tmp_path):
    """A 200 KB file that inflates past the 200 MB cap: refused after reading the cap, never a traceback."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = b"INFO 05-20 14:02:00 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s\n" * 12_000
    parts = [deflate.compress(chunk) for _ in range(log_lines.MAX_LOG_BYTES // len(chunk) + 2)]
    path = tmp_path / "bomb.log.gz"
    path.write_bytes(b"".join(parts) + deflate.flush())
    assert path.stat().st_size < 2_000_000
    result = run_cli("explain", str(path))
    assert result.code == 2
    assert result.stderr.startswith("kvdoctor: error:") and result.stderr.count("\n") == 1
    assert "once decompressed" in result.stderr and "Traceback" not in result.stderr


def test_a_gz_log_on_stdin(run_cli):
    import subprocess
    import sys

    data = gzip.compress((LOGS / "bf16_t4_1157.log").read_bytes())
    proc = subprocess.run([sys.executable, "-m", "kvdoctor", "explain", "-", "--format", "json"], input=data,
                          capture_output=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert b"KVD121" in proc.stdout


def test_request_chatter_past_the_first_lines_of_a_call_site_is_not_matched():
    lines = normalise("".join(CHATTER.format(s=i % 60, n=i) for i in range(5_000)))
    kept = signal_lines(lines)
    assert len(kept) == 2 * CHATTER_REPEATS  # the first lines of the logger call site and of uvicorn's access log


def test_no_failure_line_is_chatter():
    text = "".join(CHATTER.format(s=i % 60, n=i) for i in range(200))
    text += "(EngineCore pid=2) WARNING 05-20 14:02:00 [x.py:1] something\n" * 200
    text += "(EngineCore pid=2) ERROR 05-20 14:02:00 [core.py:1] EngineCore failed to start.\n"
    kept = signal_lines(normalise(text))
    assert sum(line.level == "WARNING" for line in kept) == 200 and kept[-1].level == "ERROR"


def test_a_failure_after_100k_lines_of_chatter_is_found():
    failure = (LOGS / "founding_interleaved.log").read_text()
    text = "".join(CHATTER.format(s=i % 60, n=i) for i in range(50_000)) + failure
    assert text.count("\n") > 100_000
    report = explain_text(text)
    assert report.extra["primary"]["rule_id"] == "KVD101"
    assert report.exit_code("error") == 1


def test_a_log_with_a_hole_of_nul_bytes_is_read(tmp_path):
    """A log file truncated while its writer kept its offset has a hole of NUL bytes (here 1 MB after the failure, as
    a real vLLM server log had): read as the text around it, not refused as binary."""
    from kvdoctor.explain.explain import explain_log

    log = tmp_path / "vllm.log"
    log.write_bytes(b"(APIServer pid=1) INFO 01-12 01:42:14 [api_server.py:1351] vLLM API server version 0.13.0\n"
                    b"(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. "
                    b"Failed core proc(s): {}\n" + b"\0" * 1_000_000)
    assert explain_log(str(log)).exit_code("error") == 1


def test_long_lines_without_a_failure_are_read_in_moments():
    """A real 851-line start-up log whose lines run to 2,500 characters took 18 s (message-index templates that open
    with a placeholder backtracked over every start of each long joined line) and a 1.2 MB one 4 s (a signature
    opening with 160 characters of any text): a template is tried only when all its literals are in the line, such a
    signature only where the rest of it matches. Bounds generous for a slow machine (1.5 s and 2.3 s here)."""
    import time

    real = Path(__file__).parents[1] / "fixtures" / "logs_real"
    for name, bound in (("healthy_other__tritonexample_vllm.log", 6.0),
                        ("prompt_exceeds_max_model_len__foamstandards_vllmserver.log", 8.0)):
        started = time.perf_counter()
        explain_log(str(real / name))
        assert time.perf_counter() - started < bound, name
