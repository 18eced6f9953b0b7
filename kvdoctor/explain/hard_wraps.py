"""A traceback's lines that a terminal or a paste hard-wrapped, rejoined before the log is read.

    File "/venv/lib/python3.10/site-          ->  File "/venv/lib/python3.10/site-packages/x.py", line 7, in f
packages/x.py", line 7, in f
    return f(a, b, c, d, e, f, g, h, i, j,    ->  return f(a, b, c, d, e, f, g, h, i, j, k)
k)

A frame line split this way hides its function (where vLLM raised, a request-time frame), and the unindented rest of
a code line ends the traceback before its exception line. Other messages keep their wraps: the exception parser
and tracebacks.continued join those.
"""

from __future__ import annotations

import re

FRAME_START = 'File "'
_WHOLE_FRAME = re.compile(r'File "[^"]+", line \d+, in [\w<>.]+\s*$')
# an exception line ('ValueError: x', 'KeyError', 'RayTaskError(ValueError): x') or a record's ('ERROR: x')
_EXCEPTION_LIKE = re.compile(r"^[A-Za-z_][\w.]*(?:\([\w.]*\))?(?::|$)")
_RECORD_START = re.compile(r"^(?:[(\[]|(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\b|\d)")  # a tag, a header, a time
MAX_FRAME_WRAP = 2  # lines a wrap may add to one frame line (a long site-packages path, then ', in f')
LONG_CODE = 60  # a code line at least this long may have been wrapped (terminals wrap at 80 columns and wider)


def rejoin_wrapped_frames(raw_lines: list[str]) -> list[str | None]:
    """The lines with each wrapped frame line and code line whole on its first line; None in place of the lines
    joined onto it (so every line keeps its number). A log with no frame line costs one substring test a line."""
    out: list[str | None] = list(raw_lines)
    after_frame = False  # the line before was a frame line (the next indented one is its code)
    i = 0
    while i < len(raw_lines):
        raw = raw_lines[i]
        at = raw.find(FRAME_START)
        if at >= 0:
            extra = 0 if _WHOLE_FRAME.match(raw, at) else _frame_rest(raw_lines, i, at, out)
            after_frame = True
            i += 1 + extra
            continue
        if after_frame and raw[:1] in (" ", "\t") and len(raw) >= LONG_CODE:
            i += 1 + _code_rest(raw_lines, i, out)
        else:
            i += 1
        after_frame = False
    return out


def _frame_rest(raw_lines: list[str], i: int, at: int, out: list[str | None]) -> int:
    """Joins the lines that complete the frame line at i onto it; how many it took (0 when none complete it)."""
    for extra in range(1, MAX_FRAME_WRAP + 1):
        rest = raw_lines[i + 1 : i + 1 + extra]
        if len(rest) < extra or not _may_be_rest(rest[-1]):
            return 0
        # a cut at the column joins as is; a wrap that dropped the space it broke at needs one back
        for joined in (raw_lines[i] + "".join(rest), " ".join([raw_lines[i].rstrip()] + [r.strip() for r in rest])):
            if _WHOLE_FRAME.match(joined, at):
                out[i] = joined
                out[i + 1 : i + 1 + extra] = [None] * extra
                return extra
    return 0


def _code_rest(raw_lines: list[str], i: int, out: list[str | None]) -> int:
    """Joins the rest of a long code line at i onto it (one line, indented less than the code, not an exception line
    or a record); 1 or 0."""
    if i + 1 >= len(raw_lines):
        return 0
    code, rest = raw_lines[i], raw_lines[i + 1]
    if not _may_be_rest(rest) or _indent(rest) >= _indent(code) or _EXCEPTION_LIKE.match(rest) \
            or _RECORD_START.match(rest):
        return 0
    out[i] = code + rest
    out[i + 1] = None
    return 1


def _may_be_rest(raw: str) -> bool:
    stripped = raw.strip()
    return bool(stripped) and FRAME_START not in raw and not stripped.startswith(
        ("Traceback", "During handling", "The above exception", "^", "~"))


def _indent(raw: str) -> int:
    return len(raw) - len(raw.lstrip(" \t"))
