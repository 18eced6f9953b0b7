"""Read a log and normalise each line: container/journald/timestamp prefixes, ANSI colours, CRLF, and
vLLM's own `(Worker_TP1 pid=...)` process tags and `ERROR 05-02 10:22:18 [core.py:396]` record headers."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from kvdoctor.base.errors import LogInputError

MAX_LOG_BYTES = 200 * 1024 * 1024
BINARY_SAMPLE = 64 * 1024

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
# One outer prefix per pattern; applied repeatedly because they stack (kubectl timestamps + docker).
_OUTER_PREFIXES = (
    # kubectl logs --timestamps / docker logs -t: RFC 3339 timestamp
    re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)? "),
    # CI / buildkite: [2025-03-10T15:07:20Z]
    re.compile(r"^\[\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?Z?\] ?"),
    # journald short format: "Aug 19 17:59:52 host unit[pid]: "
    re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [\w.@/-]+(?:\[\d+\])?: "),
    # docker compose: "vllm-1  | " ; CI log viewers: "  | "
    re.compile(r"^(?:[\w.-]+\s+)?\|\s"),
    # pytest's failure report quotes the output as "E       <line>"
    re.compile(r"^E {3,}"),
    # plain ISO timestamp some log shippers add: "2024-06-28 06:11:52,685 "
    re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? "),
)
_OUTER = re.compile("|".join(f"(?:{p.pattern[1:]})" for p in _OUTER_PREFIXES).join(("^(?:", ")")))
_PROCESS_TAG = re.compile(r"^\(([A-Za-z_][\w.\- =,]*?)\s*pid=(\d+)[^()]*\)\s?")
_RANK_TAG = re.compile(r"^\[rank(\d+)\]:\s?")
# vLLM's logger: "ERROR 05-02 10:22:18 [core.py:396] " (0.8+) or "INFO 11-04 10:12:40 arg_utils.py:1019] "
_RECORD = re.compile(
    r"^(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?([\w./\-]+:\d+)\] ?"
)


@dataclass(frozen=True, slots=True)
class LogLine:
    """One line after normalisation."""

    number: int
    """1-based line number in the input."""
    stream: str
    """The process that wrote it: 'Worker_TP1 pid=123', 'rank0', or '' when untagged."""
    level: str | None
    """vLLM logger level when the line is a log record, else None."""
    source: str | None
    """vLLM logger 'file.py:line' when the line is a log record, else None."""
    text: str
    """What the process printed, prefixes removed."""


def read_log(path: str) -> str:
    """The log's text; '-' reads stdin. Raises LogInputError for anything that is not a readable text log."""
    if path == "-":
        data = sys.stdin.buffer.read(MAX_LOG_BYTES + 1)
        where = "stdin"
    else:
        file = Path(path)
        where = str(file)
        if not file.exists():
            raise LogInputError(f"log not found: {file}", "pass a vLLM log file, or - to read stdin")
        if file.is_dir():
            raise LogInputError(f"log path is a directory: {file}", "pass a log file")
        try:
            if file.stat().st_size > MAX_LOG_BYTES:
                raise LogInputError(
                    f"log {file} is over {MAX_LOG_BYTES // (1024 * 1024)} MB",
                    "pass the last part of it, e.g. tail -c 50M",
                )
            data = file.read_bytes()
        except OSError as exc:
            raise LogInputError(f"cannot read log {file}: {exc.strerror or exc}") from None
    if len(data) > MAX_LOG_BYTES:
        raise LogInputError(f"log on {where} is over {MAX_LOG_BYTES // (1024 * 1024)} MB", "pipe the last part of it")
    return decode_log(data, where)


def decode_log(data: bytes, where: str) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):  # PowerShell redirects write UTF-16
        text = data.decode("utf-16", errors="replace")
    else:
        text = data.decode("utf-8", errors="replace")
    if not text.strip():
        raise LogInputError(f"log on {where} is empty", "pass the log of a vLLM start-up")
    sample = text[:BINARY_SAMPLE]
    unreadable = sum(1 for ch in sample if ch == "\ufffd" or (ch < " " and ch not in "\t\n\r\x1b\x0c\x08"))
    if unreadable > len(sample) * 0.3:
        raise LogInputError(f"{where} does not look like a text log (mostly binary)", "pass the text log of vLLM")
    return text


def strip_prefixes(raw: str) -> tuple[str, str, str | None, str | None]:
    """(stream, level, source, text) for one raw line."""
    line = _ANSI.sub("", raw) if "\x1b" in raw else raw
    line = line.rstrip()
    for _ in range(4):
        match = _OUTER.match(line)
        if not match or not match.end():
            break
        line = line[match.end():]
    stream = ""
    match = _PROCESS_TAG.match(line) if line[:1] == "(" else None
    if match:
        stream = f"{match.group(1).strip()} pid={match.group(2)}"
        line = line[match.end():]
    else:
        match = _RANK_TAG.match(line) if line[:5] == "[rank" else None
        if match:
            stream = f"rank{match.group(1)}"
            line = line[match.end():]
    level = source = None
    if line[:1] in "DIWEC":
        match = _RECORD.match(line)
        if match:
            level, source = match.group(1), match.group(2)
            line = line[match.end():]
    return stream, level, source, line


def normalise(text: str) -> list[LogLine]:
    """Every line of the log, normalised. Handles CRLF, lone CR (progress bars) and truncated lines."""
    lines = []
    for number, raw in enumerate(text.splitlines(), 1):
        stream, level, source, content = strip_prefixes(raw)
        lines.append(LogLine(number, stream, level, source, content))
    return lines
