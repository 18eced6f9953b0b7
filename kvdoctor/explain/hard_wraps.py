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
from collections.abc import Callable

FRAME_START = 'File "'
_WHOLE_FRAME = re.compile(r'File "[^"]+", line \d+, in [\w<>.]+\s*$')
# an exception line ('ValueError: x', 'KeyError', 'RayTaskError(ValueError): x') or a record's ('ERROR: x')
_EXCEPTION_LIKE = re.compile(r"^[A-Za-z_][\w.]*(?:\([\w.]*\))?(?::|$)")
_NAME_TAIL = re.compile(r"[\w<>.]+")  # the rest of a function's name a wrap moved to the next line
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


# A line that opens something of its own, never the wrapped rest of the line above: a process or rank tag, a record
# header or timestamp, a traceback's parts, an exception line ('torch.OutOfMemoryError: ...'), a list or shell line,
# a paste's elision ('...').
_HEADER_OR_TAG = re.compile(r"^(?:\((?:[\w.\- =,]*?\s*)?pid=\d|\[|(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\b"
                            r"|\d{2,}[-:/ T])")
_OPENS_LINE = re.compile(
    r"^(?:\((?:[\w.\- =,]*?\s*)?pid=\d|\[|(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\b|\d{2,}[-:/ T]"
    r"|[A-Z][a-z]{2} [ \d]\d |Traceback|File \"|During handling|The above exception|\.\.\.|\u2026"
    r"|[\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b[:(]?|[$#>+*-] )")
# a line that is only a record's header: the wrap put its whole message, whatever it looks like, on the next line
_BARE_HEADER = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
                          r"\[?[\w./-]+:\d+\]\s*$")
WRAP_NARROWEST = 60  # a log whose widest line is narrower was not wrapped
WRAP_WIDEST = 400  # nor one with a line wider than this (a terminal or mail client wraps well before it)
WRAP_SLACK = 12  # a word wrap leaves a line at most about a word short of its width
WRAP_MIN_CUTS = 2  # lines that go on in the next (cut where their next word would pass the widest) in a wrapped log
WRAP_SHARE = 0.6  # ... and the share of lines at (or a word short of) the widest that go on
WRAP_SAMPLE = 200  # lines at the widest asked, at most


def wrap_width(raw_lines: list[str], outer: Callable[[str], str] = str) -> int | None:
    """The column a terminal or a paste hard-wrapped the whole log at, or None when it was not wrapped: no line is
    wider, and most lines that reach it (or come a word short of it) go on in the next line, several times (an
    unwrapped log's long lines differ in length and are followed by lines of their own)."""
    lengths = [len(raw.rstrip()) for raw in raw_lines]  # a screen's lines padded with spaces end where the padding starts
    widest = max(lengths, default=0)
    if not WRAP_NARROWEST <= widest <= WRAP_WIDEST:
        return None
    at_width = [i for i, length in enumerate(lengths[:-1]) if length >= widest - WRAP_SLACK or (
        raw_lines[i][length - 1:length] == "]" and _BARE_HEADER.search(raw_lines[i]))][:WRAP_SAMPLE]  # the first ones
    went_on = sum(_continues(raw_lines[i], raw_lines[i + 1], widest, outer) for i in at_width)
    if not went_on or went_on < WRAP_SHARE * len(at_width):
        return None
    wrapped = sum(_continues(raw, following, widest, outer) for raw, following in zip(raw_lines, raw_lines[1:]))
    return widest if wrapped >= WRAP_MIN_CUTS else None


def rejoin_wrapped_lines(physical: list[str], lines: list[str | None], outer: Callable[[str], str] = str
                         ) -> list[str | None]:
    """``lines`` (``physical`` after rejoin_wrapped_frames) with, in a log hard-wrapped at one width, each line that
    goes on from a line cut at that width joined onto it (None in its place, so every line keeps its number). A log
    whose every cut line fills the width was cut at the column and joins as is; a word wrap that dropped the space it
    broke at gets one back. A log that was not wrapped is returned as it is. ``outer`` takes a line's outer prefixes
    off (a container's name, a timestamp): a line that has one is a line of its own, never a wrapped rest."""
    width = wrap_width(physical, outer)
    if width is None:
        return lines
    rests = {i for i in range(1, len(lines)) if lines[i] is not None and lines[i - 1] is not None
             and _continues(physical[i - 1], lines[i], width, outer)}
    at_column = all(len(physical[i - 1]) == width for i in rests)
    out = list(lines)
    head = 0  # index of the line the current wrapped line started on
    for i in range(len(lines)):
        if i not in rests:
            head = i
            continue
        if _WHOLE_FRAME.search(out[head]) and not _name_cut(physical[i - 1], lines[i], width):
            head = i
            continue
        previous, rest = physical[i - 1], lines[i]
        kept_space = previous[-1:] in (" ", "\t", "-") or rest[:1] in (" ", "\t")  # or it broke after a hyphen
        out[head] = out[head] + ("" if kept_space or at_column else " ") + rest
        out[i] = None
    return out


def _name_cut(previous: str, rest: str, width: int) -> bool:
    """A frame line cut at the column inside its function's name ('..., line 305, in _initialize_k' then
    'v_caches'): it reads whole, but its rest is only the name's tail."""
    return len(previous.rstrip()) == width and _NAME_TAIL.fullmatch(rest.strip()) is not None


def _continues(previous: str, raw: str, width: int, outer: Callable[[str], str]) -> bool:
    """Whether ``raw`` is the wrapped rest of the physical line before it: that line was only a record's header
    (the wrap moved its whole message, whatever it looks like), or it was cut at the width (``raw``'s first word
    would have taken it past it: a cut at the column, or a long path or URL moved whole) and ``raw`` opens nothing
    of its own."""
    stripped = raw.lstrip()
    if not stripped or previous.endswith("  ") or outer(stripped) != stripped or stripped == previous.strip():
        return False  # padded with spaces: it ended there; a container's prefix: a line of its own; a repeat
    if _BARE_HEADER.search(previous):
        return not _HEADER_OR_TAG.match(stripped)
    if _OPENS_LINE.match(stripped):
        return False
    length = len(previous.rstrip())
    first = stripped.split(None, 1)[0]
    return length + 1 + len(first) > width
