"""Read a log (plain or gzip-compressed) and normalise each line: container/journald/timestamp prefixes, ANSI
colours, CRLF, JSON records (Docker's json-file `{"log": ...}`, structured loggers' `{"level": ..., "message": ...}`),
and vLLM's own `(Worker_TP1 pid=...)` process tags and `ERROR 05-02 10:22:18 [core.py:396]` record headers; and pick
the lines worth matching in a long log (`signal_lines`)."""

from __future__ import annotations

import json
import re
import sys
import zlib
from pathlib import Path
from typing import NamedTuple

from kvdoctor.base.errors import LogInputError
from kvdoctor.explain.hard_wraps import rejoin_wrapped_frames, rejoin_wrapped_lines

MAX_LOG_BYTES = 200 * 1024 * 1024
"""The most log text explain reads, uncompressed (a .gz log is measured after decompression)."""
BINARY_SAMPLE = 64 * 1024
GZIP_MAGIC = b"\x1f\x8b"
CHATTER_REPEATS = 50
"""INFO/DEBUG lines one logger call site may print before the rest of its lines count as chatter."""

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
# One outer prefix per pattern; applied repeatedly because they stack (kubectl timestamps + docker).
_OUTER_PREFIXES = (
    # kubectl logs --timestamps / docker logs -t: RFC 3339 timestamp
    re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)? "),
    # CI / buildkite: [2025-03-10T15:07:20Z]
    re.compile(r"^\[\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?Z?\] ?"),
    # journald short format: "Aug 19 17:59:52 host unit[pid]: "
    re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [\w.@/-]+(?:\[\d+\])?: "),
    # docker compose: "vllm-1  | " ; CI log viewers: "  | " (not loguru's level column: "| ERROR    | ")
    re.compile(r"^(?!(?:ERROR|CRITICAL|WARNING|INFO|DEBUG|TRACE|SUCCESS)\s)(?:[\w.-]+\s+)?\|\s"),
    # pytest's failure report quotes the output as "E       <line>"
    re.compile(r"^E {3,}"),
    # the container runtime's log file (CRI, /var/log/pods): "<RFC 3339 timestamp> stderr F <line>"
    re.compile(r"^(?:stdout|stderr) [FP] "),
    # kubectl logs --prefix: "[pod/vllm-7d9f/vllm] "
    re.compile(r"^\[(?:pod|deployment|job|statefulset)/[^\]\s]+\] "),
    # plain ISO timestamp some log shippers add: "2024-06-28 06:11:52,685 "
    re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? "),
)
_OUTER = re.compile("|".join(f"(?:{p.pattern[1:]})" for p in _OUTER_PREFIXES).join(("^(?:", ")")))
_LOST_ESC = re.compile(r"\[\d{1,3}(?:;\d{1,3})*m")
# "(Worker_TP1 pid=123)", Ray's "(RayWorkerWrapper pid=123, ip=10.0.0.1)" and, for an unnamed task, "(pid=123)"
_PROCESS_TAG = re.compile(r"^\((?:([A-Za-z_][\w.\- =,]*?)\s*)?pid=(\d+)[^()]*\)\s?")
# torch's '[rank0]:', torchrun --tee's '[default0]:', Open MPI --tag-output's '[1,0]<stderr>:': one rank's line
_RANK_TAG = re.compile(r"^\[(?:rank|default|\d+,)(\d+)\](?:<std(?:out|err)>)?:\s?")
# vLLM's logger: "ERROR 05-02 10:22:18 [core.py:396] " (0.8+) or "INFO 11-04 10:12:40 arg_utils.py:1019] "
_RECORD = re.compile(
    # the time may be cut off by the one who pasted it ('INFO [deep_gemm.py:116] ...'): the bracket then stays
    r"^(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) (?:\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?|\[)([\w./\-]+:\d+)\] ?"
)
# the two above in one (the general path below reads the same line the same way, in three steps)
_TAGGED_RECORD = re.compile(_PROCESS_TAG.pattern + _RECORD.pattern[1:])


class LogLine(NamedTuple):
    """One line after normalisation (a named tuple: a long log makes 100k of them, and a tuple is built ~5x faster
    than a frozen dataclass)."""

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
    """The log's text; '-' reads stdin; gzip-compressed data (a .gz file, or piped) is decompressed. Raises
    LogInputError for anything that is not a readable text log, or whose text is over MAX_LOG_BYTES."""
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
    if data.startswith(GZIP_MAGIC):
        data = gunzip_log(data, where)
    if len(data) > MAX_LOG_BYTES:
        raise LogInputError(f"log on {where} is over {MAX_LOG_BYTES // (1024 * 1024)} MB", "pipe the last part of it")
    return decode_log(data, where)


def gunzip_log(data: bytes, where: str) -> bytes:
    """A gzip-compressed log's bytes (every member), refused once its text passes MAX_LOG_BYTES: a small file
    that inflates without bound (a gzip bomb) costs at most that much memory."""
    out: list[bytes] = []
    size = 0
    while data:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            chunk = inflater.decompress(data, MAX_LOG_BYTES + 1 - size)
        except zlib.error as exc:
            raise LogInputError(f"{where} is not a readable gzip file ({exc})", "pass the log as it was written") from None
        size += len(chunk)
        out.append(chunk)
        if size > MAX_LOG_BYTES or inflater.unconsumed_tail:
            raise LogInputError(
                f"log on {where} is over {MAX_LOG_BYTES // (1024 * 1024)} MB once decompressed",
                "decompress it and pass the last part of it, e.g. zcat LOG.gz | tail -c 50M | kvdoctor explain -",
            )
        if not inflater.eof:
            raise LogInputError(f"{where} is a gzip file cut short", "pass the whole file, or zcat what is there")
        data = inflater.unused_data.lstrip(b"\0")  # concatenated members; some writers pad with zeros
    return b"".join(out)


def decode_log(data: bytes, where: str) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):  # PowerShell redirects write UTF-16
        text = data.decode("utf-16", errors="replace")
    else:
        text = data.decode("utf-8", errors="replace")
    if "\0" in text:  # a log file truncated under a process still writing at its old offset: a hole of NUL bytes
        text = text.replace("\0", "")
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
    if line[:1] == "[" and _LOST_ESC.match(line):  # colours whose ESC was lost (a log copied from a web page)
        line = _LOST_ESC.sub("", line)
    first = line[:1]
    if first in "DIWEC":  # most lines of a long log: a bare vLLM record, which no prefix or tag precedes
        match = _RECORD.match(line)
        if match:
            return "", match.group(1), match.group(2), line[match.end():]
    elif first == "(":  # most lines of a multi-process log (0.8+): one process's record, tagged once
        match = _TAGGED_RECORD.match(line)
        if match:
            stream = f"{(match.group(1) or '').strip()} pid={match.group(2)}".lstrip()
            return stream, match.group(3), match.group(4), line[match.end():]
    line = _strip_outer(line)
    stream = ""
    match = _PROCESS_TAG.match(line) if line[:1] == "(" else None
    if match:
        stream = f"{(match.group(1) or '').strip()} pid={match.group(2)}".lstrip()
        line = line[match.end():]
        # nested tags ('(EngineCore_DP0 pid=1) (RayWorkerWrapper pid=2, ip=...) INFO ...': a Ray worker's line
        # relayed by the engine core): the innermost process is the one that printed it; a line relayed from a
        # container or a logger of its own keeps that prefix behind the tag ('(pid=2) vllm-1  | (APIServer pid=1) ...')
        for _ in range(2):
            line = _strip_outer(line)
            inner = _PROCESS_TAG.match(line) if line[:1] == "(" else None
            if inner is None:
                break
            stream = f"{(inner.group(1) or '').strip()} pid={inner.group(2)}".lstrip()
            line = line[inner.end():]
    # a rank's tag, alone or behind the process that relayed the rank's output ('(TaskRunner pid=1) [rank0]: ...')
    match = _RANK_TAG.match(line) if line[:5] == "[rank" or line[:8] == "[default" or line[1:2].isdigit() else None
    if match:
        stream = f"{stream} rank{match.group(1)}".lstrip()
        line = line[match.end():]
    level = source = None
    if line[:1] in "DIWEC":
        match = _RECORD.match(line)
        if match:
            level, source = match.group(1), match.group(2)
            line = line[match.end():]
    if level is None and line[:1] == "[" and ">> " in line[:120]:
        match = _BRACKET_RECORD.match(line)
        if match:  # LLaMA-Factory's "[%(levelname)s|%(asctime)s] %(name)s:%(lineno)s >> %(message)s"
            return stream, match.group(1), match.group(2), line[match.end():]
    if level is None and " - " in line[:80]:
        match = _PY_RECORD.match(line)
        if match:  # Python logging's "%(asctime)s - %(name)s - %(levelname)s - %(message)s" (asctime stripped above)
            return stream, match.group(2), match.group(1), line[match.end():]
    if level is None and " | " in line[:60]:
        match = _PIPE_RECORD.match(line)
        if match:  # FastChat's "%(asctime)s | %(levelname)s | %(name)s | %(message)s" (asctime stripped above); its
            # `stderr` logger relays whatever the process printed there at ERROR: that level is no record's own
            relayed = match.group(2) in _RELAYED_STREAMS
            return stream, None if relayed else match.group(1), None, line[match.end():]
    if level is None and any(word in line[:LATE_RECORD_WITHIN + 40] for word in _LEVEL_WORDS):
        # a record header behind a prefix no pattern knows (a log shipper's host and unit names): still the record
        match = _LATE_RECORD.search(line[:LATE_RECORD_WITHIN + 80])
        if match and match.start() <= LATE_RECORD_WITHIN:
            if match.group(1):
                stream = f"{match.group(1).strip()} pid={match.group(2)}"
            return stream, match.group(3), match.group(4), line[match.end():]
    return stream, level, source, line


_BRACKET_RECORD = re.compile(r"^\[(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\|[^\]]{0,40}\] ([\w.-]+:\d+) >> ")
def _strip_outer(line: str) -> str:
    """The line less its outer prefixes (_OUTER: timestamps, container and shipper prefixes; they stack)."""
    first = line[:1]
    # only lines that can start with an outer prefix try _OUTER (most lines of a long log cannot)
    if not (first in "0123456789[ |" or "|" in line[:80] or line.startswith("E   ")
            or (line[3:4] == " " and first.isupper() and line[1:3].islower())):
        return line
    for _ in range(4):
        match = _OUTER.match(line)
        if not match or not match.end():
            break
        line = line[match.end():]
    return line


_PIPE_RECORD = re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL) +\| ([\w.-]+) \| ?")
_RELAYED_STREAMS = ("stderr", "stdout")
_PY_RECORD = re.compile(r"^(?:- )?([\w.]+) - (DEBUG|INFO|WARNING|ERROR|CRITICAL) - ")
LATE_RECORD_WITHIN = 120
"""How far into a line a vLLM record header may start behind an unknown prefix."""
_LEVEL_WORDS = (" ERROR ", " INFO ", " WARNING ", " DEBUG ", " CRITICAL ", " WARN ")
_LATE_RECORD = re.compile(
    r"(?<=[\s\]|:>])(?:\(([A-Za-z_][\w.\- =,]*?)\s*pid=(\d+)[^()]*\)\s?)?"
    r"(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?([\w./\-]+:\d+)\] ?"
)


# A log copied out of a web page's source or an HTML report keeps its entities; a paste through a chat or a word
# processor turns straight quotes into typographic ones, and a CJK input method types full-width punctuation around
# what it pastes ('【BUG】：RuntimeError: ...'). All are undone before any line is read.
_HTML_ENTITIES = ("&quot;", "&#39;", "&#x27;", "&#34;", "&lt;", "&gt;")
_JSON_ESCAPED_QUOTE = re.compile(r'(?<!\\)\\"')
"""`\\"` not itself escaped: JSON's escaped quote (`{"message": "\\"auto\\" tool choice requires ..."}`)."""
_SMART_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
# the spaces a web page or a word processor puts for ' ' (no-break, narrow, thin, ideographic)
_ODD_SPACES = str.maketrans({"\u00a0": " ", "\u202f": " ", "\u2009": " ", "\u2007": " ", "\u3000": " "})
_FULL_WIDTH = str.maketrans({"\uff1a": ": ", "\uff08": "(", "\uff09": ")", "\uff0c": ", ", "\uff1b": "; ",
                             "\u3010": "[", "\u3011": "]"})


def physical_lines(text: str) -> list[str]:
    """The log's lines as an editor and `grep -n` number them (split at newlines only). A progress bar redrawn with
    carriage returns is the state a terminal last showed: the last non-blank part of a line its CRs split."""
    lines = text.split("\n") if "\n" in text else text.split("\r")  # an old Mac's CR-only line ends
    if lines and lines[-1] == "":
        lines.pop()
    if "\r" not in text:
        return lines
    out = []
    for line in lines:
        if "\r" in line:
            parts = [part for part in line.split("\r") if part.strip()]
            line = parts[-1] if parts else ""
        out.append(line)
    return out


def _as_typed(text: str) -> str:
    """The log with HTML entities decoded (only when it holds one of the common ones, so a literal '&amp;' in an
    ordinary log stays), typographic quotes made straight, odd spaces plain and full-width punctuation made ASCII."""
    if "&" in text and any(entity in text for entity in _HTML_ENTITIES):
        import html  # only for such a log

        text = html.unescape(text)
    if any(quote in text for quote in "\u2018\u2019\u201c\u201d"):
        text = text.translate(_SMART_QUOTES)
    if '\\"' in text:  # a message quoted from inside a JSON string: its quotes as printed (a JSON record is parsed)
        text = "\n".join(line if line.lstrip().startswith("{") else _JSON_ESCAPED_QUOTE.sub('"', line)
                         for line in text.split("\n"))
    if text.isascii():
        return text
    if any(space in text for space in "\u00a0\u202f\u2009\u2007\u3000"):
        text = text.translate(_ODD_SPACES)
    if any(mark in text for mark in "\uff1a\uff08\uff09\uff0c\uff1b\u3010\u3011"):
        text = text.translate(_FULL_WIDTH)
    return text


WRAP_MIN = 76  # a line this long may have been hard-wrapped (terminals wrap at 80 columns and wider)
WRAP_NARROWEST = 60  # the narrowest wrap considered (a log whose widest line is shorter was not wrapped)


def _may_continue(raw: str) -> bool:
    """Whether an untagged line without a record header can be the wrapped rest of the line before it: not a
    process tag, a traceback's header or frame, or a blank line."""
    stripped = raw.strip()
    return bool(stripped) and raw[:1] != "(" and not stripped.startswith(("Traceback", 'File "', "During handling",
                                                                            "The above exception"))


def _wrapped_before(previous: int, raw: str, widest: int) -> bool:
    """Whether the line before (``previous`` characters) was cut where ``raw`` goes on: it is long, or the first word
    of ``raw`` would have taken it past the log's widest line (a wrap at a word boundary leaves lines short of it)."""
    if previous >= WRAP_MIN:
        return True
    first = raw.split(None, 1)[0] if raw.strip() else ""
    return widest >= WRAP_NARROWEST and previous + 1 + len(first) > widest


# VS Code's (debugpy's) exception pane: 'Exception has occurred: AttributeError' (a note may follow on the line), the
# message on the next line, then the frames, innermost first
_DEBUGGER_EXCEPTION = re.compile(r"^\s*Exception has occurred: ([A-Za-z_][\w.]*)\b")


def debugger_exceptions(raw_lines: list[str]) -> list[str]:
    """A debugger's exception header written as Python's exception line ('AttributeError: <the next line>'), so the
    exception is read as one; the message's own line is left blank (line numbers are the log's)."""
    if not any("Exception has occurred" in line for line in raw_lines):
        return raw_lines
    out = list(raw_lines)
    for index, line in enumerate(raw_lines[:-1]):
        header = _DEBUGGER_EXCEPTION.match(line)
        message = raw_lines[index + 1].strip()
        if header and message and not message.startswith(("File ", "Traceback")):
            out[index], out[index + 1] = f"{header.group(1)}: {message}", ""
    return out


def normalise(text: str) -> list[LogLine]:
    """Every line of the log, normalised. Handles CRLF, lone CR (progress bars) and truncated lines, a log
    indented as a whole (pasted into a Markdown code block or an e-mail quote: `dedent`), and JSON records, whose
    message (and a traceback it holds) becomes the line or lines, under the record's line number."""
    physical = debugger_exceptions(dedent(unquote(unprefix(physical_lines(_as_typed(text))))))
    raw_lines = rejoin_wrapped_lines(physical, rejoin_wrapped_frames(physical), _strip_outer)
    out = []
    wrapped_from, wrapped_len = "", 0  # the process of a tagged line (a hard wrap's next line continues it), its length
    widest = max(map(len, filter(None, raw_lines)), default=0)  # a hard-wrapped log has no line wider than its wrap
    for number, raw in enumerate(raw_lines, 1):
        if raw is None:  # joined onto the frame or code line above it (hard_wraps)
            continue
        record = json_record(raw) if raw[:1] == "{" else json_fields(raw)
        if record is None:
            stream, level, source, line = strip_prefixes(raw)
            if wrapped_from and not stream and level is None and _may_continue(raw) and _wrapped_before(
                    wrapped_len, raw, widest):
                stream = wrapped_from  # the rest of a tagged line a terminal or a paste wrapped
            wrapped_from, wrapped_len = stream, len(raw)
            out.append(LogLine(number, stream, level, source, line))
            continue
        wrapped_from = ""
        message, level = record
        for inner in message.splitlines() or [""]:
            stream, inner_level, source, line = strip_prefixes(inner)
            out.append(LogLine(number, stream, inner_level or level, source, line))
    return out


# A JSON record's message and level keys: Docker's json-file driver ("log"), Python's JSON formatters, structlog,
# Google Cloud's and journald's JSON exports; and fields a structured logger puts a traceback in.
_JSON_TEXT_KEYS = ("log", "message", "msg", "textPayload", "MESSAGE", "event", "text")
_JSON_LEVEL_KEYS = ("level", "levelname", "severity", "log_level", "lvl", "loglevel")
_JSON_TRACE_KEYS = ("exc_info", "exception", "stack_trace", "traceback", "exc_text")
_JSON_LEVELS = {"DEBUG": "DEBUG", "TRACE": "DEBUG", "INFO": "INFO", "NOTICE": "INFO", "WARNING": "WARNING",
                "WARN": "WARNING", "ERROR": "ERROR", "ERR": "ERROR", "CRITICAL": "CRITICAL", "FATAL": "CRITICAL",
                "ALERT": "CRITICAL", "EMERGENCY": "CRITICAL"}


def json_fields(raw: str) -> tuple[str, str | None] | None:
    """A JSON record's fields pasted without its braces ('"message":"...Error: ...",'), read as that record."""
    stripped = raw.strip()
    if not (stripped[:1] == '"' and '":' in stripped[:80]):
        return None
    return json_record("{" + stripped.rstrip(",") + "}")


def json_record(raw: str) -> tuple[str, str | None] | None:
    """(message, level) of a line that is one JSON record with a message field; None for any other line. The
    message keeps the record's traceback field after it; the level is one of LogLine's (None when it names none)."""
    stripped = raw.strip()
    if not stripped.endswith("}"):
        return None
    try:
        data = json.loads(stripped)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    message = next((data[key] for key in _JSON_TEXT_KEYS if isinstance(data.get(key), str)), None)
    if message is None and isinstance(data.get("error"), dict):  # OpenAI's error body: {"error": {"message": ...}}
        error = data["error"]
        message = next((error[k] for k in ("message", "msg") if isinstance(error.get(k), str)), None)
        kind = error.get("type")
        if message is not None and isinstance(kind, str) and re.fullmatch(r"[A-Z]\w*Error", kind):
            message = f"{kind}: {message}"  # as the client raises it: 'BadRequestError: ...'
    if message is None:
        return None
    trace = next((data[key] for key in _JSON_TRACE_KEYS if isinstance(data.get(key), str) and data[key].strip()), None)
    if trace:
        message = message.rstrip("\n") + "\n" + trace
    named = next((data[key] for key in _JSON_LEVEL_KEYS if isinstance(data.get(key), (str, int))), None)
    level = _JSON_LEVELS.get(str(named).upper()) if named is not None else None
    if level is None and (data.get("object") == "error" or isinstance(data.get("error"), dict)
                          or str(data.get("code", ""))[:1] == "5" and len(str(data.get("code"))) == 3):
        level = "ERROR"  # an OpenAI-compatible server's error body, or an internal error's status, as a client logs it
    return message.rstrip("\n"), level


MAX_COMMON_INDENT = 16
QUOTED_SHARE = 0.9
_QUOTE = re.compile(r"^ {0,3}>+ ?")


def unquote(raw_lines: list[str]) -> list[str]:
    """The lines less an e-mail or Markdown quote marker ('> ') when nearly every non-blank line has one (a log
    pasted as a quote would otherwise hide its record headers and exception lines)."""
    quoted = total = 0
    for raw in raw_lines[:2000]:
        if raw.strip():
            total += 1
            quoted += raw.lstrip(" ")[:1] == ">"
    if not total or quoted < QUOTED_SHARE * total:
        return raw_lines
    return [_QUOTE.sub("", raw, count=1) for raw in raw_lines]


# Prefixes a paste, a viewer or a launcher puts on every line: a line number ('  12  ', '12: ', '12 | '), a short time
# of day ('10:22:18.123 '), a task label ('0: '), a list dash ('- '). Stripped only when nearly every non-blank line has the same one (and line
# numbers only when they count up), so a log whose own lines start with a number keeps them.
_LOG_WIDE = (
    ("number", re.compile(r"^\s{0,6}(\d{1,7})(?::|\s*\|)?(?=\s|$)")),
    ("clock", re.compile(r"^\d\d:\d\d:\d\d(?:[.,]\d{1,6})? ")),
    # srun -l's task label ('0: '): the same few numbers on every line, so not line numbers
    ("task", re.compile(r"^\d{1,4}: ")),
    ("dash", re.compile(r"^- ")),
)


def unprefix(raw_lines: list[str]) -> list[str]:
    """The lines less a log-wide prefix (_LOG_WIDE) that nearly every non-blank line carries."""
    sample = [raw for raw in raw_lines[:2000] if raw.strip()]
    if len(sample) < 2:
        return raw_lines
    for kind, pattern in _LOG_WIDE:
        matches = [pattern.match(raw) for raw in sample]
        if sum(m is not None for m in matches) < QUOTED_SHARE * len(sample):
            continue
        if kind == "number":
            numbers = [int(m.group(1)) for m in matches if m is not None]
            rising = sum(b > a for a, b in zip(numbers, numbers[1:]))
            if rising < QUOTED_SHARE * (len(numbers) - 1):
                continue
            # the separator is the whitespace every numbered line has after its number; more is the line's own
            gap = min((len(raw[m.end():]) - len(raw[m.end():].lstrip()) for raw, m in zip(sample, matches)
                       if m is not None and raw[m.end():].strip()), default=1)
            number = re.compile(pattern.pattern + f"\\s{{0,{gap}}}")
            return [number.sub("", raw, count=1) for raw in raw_lines]
        return [pattern.sub("", raw, count=1) for raw in raw_lines]
    return raw_lines


def dedent(raw_lines: list[str]) -> list[str]:
    """The lines less the indentation every non-blank line shares (a whole log pasted indented would otherwise
    hide its exception lines, which a traceback's own frames are told from by not being indented)."""
    indent = None
    for raw in raw_lines:
        if not raw or raw[0] not in " \t":
            if raw.strip():
                return raw_lines  # most logs: a line that starts in column 0 ends the search at once
            continue
        stripped = raw.lstrip(" \t")
        if not stripped:
            continue
        width = len(raw) - len(stripped)
        prefix = raw[:width]
        indent = prefix if indent is None else _common(indent, prefix)
        if not indent:
            return raw_lines
    if not indent or len(indent) > MAX_COMMON_INDENT:
        return raw_lines
    cut = len(indent)
    return [raw[cut:] if raw.startswith(indent) else raw.lstrip(" \t") for raw in raw_lines]


def _common(a: str, b: str) -> str:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return a[:n]


def signal_lines(lines: list[LogLine]) -> list[LogLine]:
    """The lines worth matching against signatures and fact patterns: every line but the INFO/DEBUG chatter of a
    long log (past the first CHATTER_REPEATS lines of one logger call site: throughput stats, request logs,
    uvicorn's access lines). Failure lines are never chatter: they are not INFO or DEBUG."""
    return [line for line, noise in zip(lines, chatter(lines)) if not noise]


def chatter(lines: list[LogLine]) -> list[bool]:
    """For each line, whether it is chatter (signal_lines leaves it out)."""
    seen: dict[object, int] = {}
    out = []
    for line in lines:
        site: object = None
        if line.level in ("INFO", "DEBUG"):
            site = line.source
        elif line.level is None and line.text[:6] in ("INFO: ", "INFO:\t", "DEBUG:"):
            site = "uvicorn"
        count = 0
        if site is not None:
            count = seen.get(site, 0) + 1
            seen[site] = count
        out.append(count > CHATTER_REPEATS)
    return out
