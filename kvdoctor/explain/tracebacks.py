"""Python tracebacks in a normalised log: frames, exception, chained causes, Triton compile excerpts, and
the worker errors that vLLM's executor re-wraps as `Worker failed with error '...'`."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, replace

from kvdoctor.explain.hard_wraps import MAX_FRAME_WRAP
from kvdoctor.explain.log_lines import LogLine

TRACEBACK_START = "Traceback (most recent call last):"
CAUSE = "The above exception was the direct cause of the following exception:"
CONTEXT = "During handling of the above exception, another exception occurred:"
MAX_MESSAGE_LINES = 80

_FRAME = re.compile(r'^\s+File "(.+?)", line (\d+)(?:, in (.+))?$')
# A frame as a pasted excerpt may show it: not indented, or without its line number ('File "x.py", in f').
_FRAME_IN = re.compile(r'(?:^|\s)File "([^"]+)", line (?:(\d+)|\.\.\.|\u2026)(?:, in ([\w<>.]+))?')
_LOOSE_FRAME = re.compile(r'^\s*File "(.+?)"(?:, line (?:(\d+)|\.\.\.|\u2026))?(?:, in (.+))?$')  # 'line ...': elided
# Ray re-raises a task's error as `ray.exceptions.RayTaskError(ValueError): ray::f() ...`: the class in brackets
_EXCEPTION = re.compile(r"^([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*)(?:\([\w.]+\))?(?::(?: (.*)|$)|$)")
# A bare exception line outside a traceback must look like one: a dotted name ending in Error/Exception (a private
# class too: torch._C._LinAlgError; or Triton's OutOfResources), or Python's own `Exception: message` (raise Exception(...)).
_BARE_EXCEPTION = re.compile(
    r"^((?:[a-z_][\w]*\.)*(?:_?[A-Z]\w*(?:Error|Exception|Interrupt|Failure|Failed)|\w*ExceptionGroup"
    r"|OutOfResources)|Exception(?=: \S))(?:\([\w.]+\))?"
    r"(?:: (.*)|:?$)"
)
# Markdown prose quoting an exception line in inline code: "we hit `GatedRepoError: 401 Client Error. ...`"
_INLINE_EXCEPTION = re.compile(r"`((?:[a-z_]\w*\.)*_?[A-Z]\w*(?:Error|Exception))(?:: ([^`]+))?`")
# ... but not one it names as an example ('fd limit errors like `OSError: [Errno 24] Too many open files`')
_EXAMPLE_WORDS = re.compile(r"(?i)\b(?:like|such as|e\.g\.,?|for example,?|for instance,?|i\.e\.,?)\s*$")


def _inline_exception(text: str) -> re.Match[str] | None:
    """The exception a line of prose quotes in inline code as what happened, or None."""
    for found in _INLINE_EXCEPTION.finditer(text):
        if not _EXAMPLE_WORDS.search(text, 0, found.start()):
            return found
    return None
_COMPILE_AT = re.compile(r"^at (\d+):(\d+):")
# vLLM's executor re-raises a worker's error as this; the quoted payload is the worker's own error (which may be
# another wrapper: they nest). Logs cut it short, so the closing words are optional.
WORKER_WRAP = re.compile(
    r"Worker failed with error '(.*)'(?:, please check the stack trace above for the root cause|\s*$)", re.DOTALL
)
MAX_NESTING = 8
# a frame's file under site-packages (the prefix says nothing of the failure), and a file of Python's own library
INSTALLED_PREFIX = re.compile(r"^.*[/\\](?:site|dist)-packages[/\\]")
PYTHON_OWN = re.compile(r"[/\\]lib[/\\]python3(?:\.\d+)?[/\\](?!.*(?:site|dist)-packages)|^<frozen ")
# vLLM's V0 multiprocessing worker logs a method's failure as one record: its message (str(e), no type), then the
# traceback under it (executor/multiproc_worker_utils.py: "Exception in worker %s while processing method %s: %s, %s")
V0_WORKER_ERROR = re.compile(r"^Exception in worker (\S+) while processing method (\w+): (.+?),\s*"
                             r"Traceback \(most recent call last\):\s*$")
_REPR_EXCEPTION = re.compile(r"([A-Z]\w*(?:Error|Exception))\((['\"])(.*)\2\)\s*$", re.DOTALL)
_TYPED_MESSAGE = re.compile(r"^((?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)): (.*)$", re.DOTALL)


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str | None
    code: str | None


@dataclass(frozen=True)
class LoggedException:
    """One exception as the log shows it."""

    type: str
    message: str
    frames: tuple[Frame, ...]
    stream: str
    line: int
    """Line number of the 'Type: message' line (for a wrapped worker error: the wrapper's)."""
    wrapped: bool = False
    """True when recovered from inside another exception's message (`Worker failed with error '...'`)."""
    quoted_in: str | None = None
    """For one recovered from a message that is not vLLM's worker wrapper: the type of the exception that quoted it."""
    compile_excerpt: tuple[str, ...] = ()
    """For a Triton CompilationError: the kernel source lines it quotes, caret included."""

    @property
    def summary(self) -> str:
        first = self.message.strip().splitlines()[0] if self.message.strip() else ""
        return f"{self.type}: {first}" if first else self.type

    @property
    def joined(self) -> str:
        """The message on one line: a message that wraps over several log lines (a pasted traceback's hard wrap,
        an exception whose message holds newlines) with its continuation lines joined by a space."""
        if "\n" not in self.message:
            return self.message.strip()
        return " ".join(part.strip() for part in self.message.splitlines() if part.strip())

    @property
    def joined_summary(self) -> str:
        """'Type: message' with the whole message on one line."""
        joined = self.joined
        return f"{self.type}: {joined}" if joined else self.type

    @property
    def where(self) -> str | None:
        """'file:line in function' of the innermost frame, or None without frames."""
        if not self.frames:
            if self.quoted_in:
                return f"quoted in a {self.quoted_in}'s message (raised elsewhere)"
            return "a worker process (re-raised by the executor)" if self.wrapped else None
        frame = self.frames[-1]
        place = f"{frame.file}:{frame.line}" if frame.line else frame.file  # line 0: the excerpt did not show it
        return f"{place} in {frame.function}" if frame.function else place

    @property
    def vllm_where(self) -> str | None:
        """'file:line in function (`code`)' of the innermost frame in vLLM's own package when a frame below it (in
        torch, a kernel library) is the innermost one: the step of vLLM's start-up the failure happened in."""
        for frame in reversed(self.frames[:-1]):
            if _VLLM_FILE.search(frame.file):
                code = f" (`{frame.code}`)" if frame.code else ""
                return f"{frame.file}:{frame.line} in {frame.function}{code}" if frame.function else frame.file + code
        return None

    @property
    def constructing(self) -> tuple[str, Frame] | None:
        """The class whose constructor raised ('XPUFp8MoEMethod') and the frame that constructed it, when the innermost
        frames are __init__ (a super().__init__ chain included) under a frame whose code calls a CapWords name."""
        inits = 0
        for frame in reversed(self.frames):
            chained = inits and (frame.code or "").startswith("super(")  # super().__init__ of a subclass
            if frame.function == "__init__" and (inits == 0 or chained):
                inits += 1
                continue
            if not inits:
                return None
            called = _CONSTRUCTS.search(frame.code or "")
            return (called.group(1), frame) if called else None
        return None

    def searchable(self) -> str:
        """Text signatures are matched against: the exception, its frames and any compile excerpt."""
        parts = [f"{self.type}: {self.message}"]
        if "\n" in self.message and not self.compile_excerpt:
            parts.append(self.joined_summary)  # a pattern that stays on one line ([^\n]*) sees the message joined
        for frame in self.frames:
            parts.append(f'File "{frame.file}", line {frame.line}, in {frame.function}')
            if frame.code:
                parts.append(frame.code)
        parts.extend(self.compile_excerpt)
        return "\n".join(parts)


_VLLM_FILE = re.compile(r"(?:^|/)vllm/(?!.*site-packages)")  # vllm/..., not vllm_ascend/ or a venv under a vllm/ dir
_CONSTRUCTS = re.compile(r"(?<![\w.])(?:[a-z_]\w*\.)*([A-Z]\w*[a-z]\w*)\(")  # 'return mod.XPUFp8MoEMethod(' -> class


@dataclass(frozen=True)
class ExceptionChain:
    """Exceptions linked by 'direct cause' / 'during handling', innermost (first printed) first."""

    exceptions: tuple[LoggedException, ...]
    stream: str

    @property
    def innermost(self) -> LoggedException:
        return self.exceptions[0]

    @property
    def outermost(self) -> LoggedException:
        return self.exceptions[-1]


# torch's error from a scripted or traced module (torch.jit, Neuron's NxD models): its message quotes the scripted
# code's tracebacks and ends with the original exception, which the log shows as a frameless 'Type: message' line
TORCHSCRIPT_WRAP = "The following operation failed in the TorchScript interpreter"
MAX_TORCHSCRIPT_LINES = 200  # lines the scripted tracebacks may span between the wrapper and its original error


def with_torchscript_originals(chains: list[ExceptionChain]) -> list[ExceptionChain]:
    """The chains with each TorchScript interpreter error replaced by the original exception its message ends with
    (keeping the Python frames it was raised through); the original's own frameless chain is dropped."""
    if not any(e.message.startswith(TORCHSCRIPT_WRAP) for chain in chains for e in chain.exceptions):
        return chains
    folded: list[ExceptionChain] = []
    taken: set[int] = set()
    for index, chain in enumerate(chains):
        if index in taken:
            continue
        head = chain.innermost
        after = chains[index + 1] if index + 1 < len(chains) else None
        if (head.message.startswith(TORCHSCRIPT_WRAP) and after is not None and after.stream == chain.stream
                and not after.innermost.frames and 0 < after.innermost.line - head.line <= MAX_TORCHSCRIPT_LINES):
            original = replace(after.innermost, frames=head.frames)
            chain = ExceptionChain((original,) + chain.exceptions[1:], chain.stream)
            taken.add(index + 1)
        folded.append(chain)
    return folded


IGNORED = "Exception ignored in"  # Python's header for an exception it reports and drops (a __del__ at shutdown)
MAX_IGNORED_TRACEBACK = 80


def without_ignored(chains: list[ExceptionChain], lines: list[LogLine]) -> list[ExceptionChain]:
    """The chains less those Python reported under 'Exception ignored in ...' (raised in a destructor or at
    interpreter shutdown and dropped: they do not fail the run)."""
    ignored: set[int] = set()
    for index, line in enumerate(lines):
        if line.text.startswith(IGNORED):
            for later in lines[index + 1 : index + 1 + MAX_IGNORED_TRACEBACK]:
                if later.stream != line.stream or later.text[:1] in (" ", "\t", ""):
                    continue
                if _EXCEPTION.match(later.text):
                    ignored.add(later.number)
                    break
    if not ignored:
        return chains
    return [chain for chain in chains if not all(e.line in ignored for e in chain.exceptions)]


# Python's resource tracker (Lib/multiprocessing/resource_tracker.py, main) prints the exception of a message it could
# not handle and goes on (`except Exception: sys.excepthook(*sys.exc_info())`): an unregister of a name it never saw
# ("KeyError: '/psm_...'", the shared memory of vLLM's worker processes). The run does not fail on it.
_CARRIES_ON = ("multiprocessing/resource_tracker.py",)


def without_carried_on(lines: list[LogLine]) -> list[LogLine]:
    """The lines less each whole traceback (header, frames, exception line) whose every frame is in a loop of
    Python's own that prints the exception and carries on (_CARRIES_ON)."""
    if not any(name in line.text for line in lines for name in _CARRIES_ON):
        return lines
    dropped: set[int] = set()
    for index, line in enumerate(lines):
        if line.text.strip() != TRACEBACK_START:
            continue
        files, own, end = [], [index], index + 1
        while end < len(lines) and (lines[end].level is not None or lines[end].text[:1] in (" ", "\t")):
            if lines[end].level is None:  # (another process's records interleave: they have a level)
                own.append(end)
                frame = _FRAME.match(lines[end].text)
                if frame:
                    files.append(frame.group(1))
            end += 1
        if files and end < len(lines) and _EXCEPTION.match(lines[end].text) and all(
                file.endswith(_CARRIES_ON) for file in files):
            dropped.update(own + [end])
    return [line for index, line in enumerate(lines) if index not in dropped] if dropped else lines


def parse_chains(lines: list[LogLine]) -> list[ExceptionChain]:
    """Every exception chain in the log, in order of the line that ends it."""
    by_stream: dict[str, list[LogLine]] = defaultdict(list)
    for line in lines:
        by_stream[line.stream].append(line)
    chains = []
    for stream, stream_lines in by_stream.items():
        chains.extend(_parse_stream(stream, stream_lines))
    chains.sort(key=lambda c: c.outermost.line)
    return [_unwrap_workers(chain) for chain in chains]


def _parse_stream(stream: str, lines: list[LogLine]) -> list[ExceptionChain]:
    chains: list[ExceptionChain] = []
    current: list[LoggedException] = []
    linked = False
    i = 0
    n = len(lines)
    while i < n:
        text = lines[i].text
        stripped = text.strip()
        if stripped == TRACEBACK_START:
            start = i
            exception, i = _parse_traceback(stream, lines, i + 1)
            if exception is None and current and not current[-1].frames and not linked \
                    and lines[start].number - current[-1].line <= MAX_MESSAGE_GAP:
                # the error logged first, its traceback after it and cut before its exception line (vLLM's engine
                # logs `ERROR ... ValueError: ...` and then prints the traceback): those are its frames
                frames = _cut_frames(lines[start + 1:i])
                if frames:
                    current[-1] = replace(current[-1], frames=frames)
                continue
            if exception is not None:
                if not linked and current:
                    chains.append(ExceptionChain(tuple(current), stream))
                    current = []
                current.append(exception)
            linked = False
            continue
        if (stripped.startswith('File "')
                and (text[0] in " \t" and _FRAME.match(text) or i == 0 and _LOOSE_FRAME.match(text))
                and (i == 0 or not _in_traceback(lines[i - 1].text) and "most recent call last" not in lines[i - 1].text)):
            # a traceback pasted (or logged) without its header: its frames read as one, from here (the log's first
            # line may be a frame the paste cut at its start, its indent and record prefix gone)
            start = i
            exception, i = _parse_traceback(stream, lines, i)
            level = lines[start].level if lines[start].level is not None or start + 1 >= n else lines[start + 1].level
            if exception is not None and lines[min(i, n) - 1].level != level:
                exception, i = None, start + 1  # an exception of another record: these frames are not its
            if exception is not None:  # a chain of its own, unless a 'During handling...' line linked it
                if not linked and current:
                    chains.append(ExceptionChain(tuple(current), stream))
                    current = []
                current.append(exception)
            linked = False
            continue
        if stripped.startswith("Exception in worker ") and (worker := V0_WORKER_ERROR.match(stripped)):
            frames, j = _frames_below(lines, i + 1)
            if current and not linked:
                chains.append(ExceptionChain(tuple(current), stream))
                current = []
            current.append(LoggedException(_raised_type(worker.group(3)), worker.group(3), frames, stream,
                                           lines[i].number))
            i, linked = max(j, i + 1), False
            continue
        if stripped in (CAUSE, CONTEXT):
            linked = bool(current)
            i += 1
            continue
        if stripped and not linked and text[0] not in " \t" and _BARE_EXCEPTION.match(text):
            exception, i = _parse_exception(stream, lines, i, frames_above(lines, i))
            if current:
                chains.append(ExceptionChain(tuple(current), stream))
            current = [exception]
            continue
        if stripped and not linked and "`" in text and (quoted := _inline_exception(text)):
            # prose that quotes the failure in inline code (a lab note, an issue's summary): the quoted line
            if current:
                chains.append(ExceptionChain(tuple(current), stream))
            current = [LoggedException(quoted.group(1), quoted.group(2) or "", (), stream, lines[i].number)]
            i += 1
            continue
        if stripped and not linked and "Worker failed with error '" in text and WORKER_WRAP.search(text):
            # a wrapper printed without an exception type in front: its payload is still the worker's error
            if current:
                chains.append(ExceptionChain(tuple(current), stream))
            current = [LoggedException(lines[i].level or "Wrapper", stripped, (), stream, lines[i].number)]
            i += 1
            continue
        i += 1
    if current:
        chains.append(ExceptionChain(tuple(current), stream))
    return chains


MAX_FRAMES_ABOVE = 12


# IPython / Jupyter print a frame as 'File ~/x/vllm/y.py:64, in Class.f(args)' (in a notebook's HTML export
# '[~/x/vllm/y.py:64](http://...), in ...') over numbered code lines ('     61 code', '---> 64 code')
_IPYTHON_FRAME = re.compile(r"^File \[?([^\s\[\]()]+?\.py):(\d+)(?:\]\([^)\s]*\))?, in (?:[\w.<>]*\.)?([\w<>]+)")
_IPYTHON_CODE = re.compile(r"^(?:-+>)?\s*\d+ ")
MAX_IPYTHON_LINES = 400


def _ipython_frames_above(lines: list[LogLine], i: int) -> tuple[Frame, ...]:
    """The frames of an IPython traceback above a bare exception line, outermost first (blank lines between frames,
    numbered code lines under each; the '--->' line is the frame's code)."""
    frames: list[Frame] = []
    code: str | None = None
    for line in reversed(lines[max(0, i - MAX_IPYTHON_LINES): i]):
        text = line.text
        if line.level is not None:
            break
        match = _IPYTHON_FRAME.match(text) if text[:5] == "File " else None
        if match:
            frames.insert(0, Frame(match.group(1), int(match.group(2) or 0), match.group(3), code))
            code = None
        elif _IPYTHON_CODE.match(text):
            if text.lstrip().startswith("-"):
                code = text.split(None, 2)[-1].strip() if len(text.split(None, 2)) == 3 else None
        elif text.strip() and not text.lstrip().startswith(("Cell In", "---", "Input In")):
            break
    return tuple(frames)


def frames_above(lines: list[LogLine], i: int) -> tuple[Frame, ...]:
    """The frames printed just above a bare exception line (an excerpt of a traceback whose 'Traceback' line was
    not pasted: `File "vllm/x.py", in f` and its code line, or IPython's `File path:N, in f` frames), outermost
    first; none when the line above is not one."""
    above = next((line for line in reversed(lines[max(0, i - 3): i]) if line.text.strip()), None)
    if above is not None and above.level is None and (_IPYTHON_CODE.match(above.text)
                                                        or _IPYTHON_FRAME.match(above.text)):
        return _ipython_frames_above(lines, i)
    frames: list[Frame] = []
    code: str | None = None
    level = lines[i].level  # a logger that prints each line of a traceback as a record (vLLM's) gives each its header
    if level is None and i and lines[i - 1].level is not None and _in_traceback(lines[i - 1].text):
        level = lines[i - 1].level  # the exception line pasted apart from its records (an issue's title): theirs
    j = i - 1
    while j >= 0 and i - j <= 2 * MAX_FRAMES_ABOVE:
        line = lines[j]
        text = line.text
        if j == i - 1 and not text.strip() and level is not None and line.level == level:
            j -= 1  # the blank record a C++ check's message ends in (TVM_FFI_ICHECK ... << "..."; then the error)
            continue
        if _ELISION.match(text):
            code = None  # the paster cut frames here ('...'): a code line below it belonged to a frame not shown
            j -= 1
            continue
        # next to each other in the log (a frame or code line a hard wrap split counts as one: hard_wraps), under
        # no record header or under the exception line's own
        if (line.level is not None and line.level != level) or not text.strip() or (
                lines[j + 1].number - line.number > 1 + MAX_FRAME_WRAP):
            break
        match = _LOOSE_FRAME.match(text) if "File \"" in text else None
        if match:
            frames.insert(0, Frame(match.group(1), int(match.group(2) or 0), match.group(3), code))
            code = None
        elif code is None and not set(text.strip()) <= set("^~ ") and (text[0] in " \t" or _frame_line(lines, j - 1, level)
                                                                              or (j and _ELISION.match(lines[j - 1].text))):
            code = text.strip()  # the code line under the frame above (a paste that lost its indent: still under one)
        elif not set(text.strip()) <= set("^~ "):  # a caret line (its indent lost in a paste too)
            break
        j -= 1
    return tuple(frames)


# a line a paster put where they cut a traceback
_ELISION = re.compile(r"^\s*(?:\.{3,}|…|\[\.\.\.\]|\(\.\.\.\)|<snip(?:ped)?>|\[(?:truncated|snip)\])\s*$", re.IGNORECASE)


def _in_traceback(text: str) -> bool:
    """A traceback's frame, code or caret line."""
    stripped = text.strip()
    return bool(stripped) and ('File "' in text or text[0] in " \t" or set(stripped) <= set("^~ "))


def _frame_line(lines: list[LogLine], j: int, level: str | None) -> bool:
    return j >= 0 and lines[j].level == level and _LOOSE_FRAME.match(lines[j].text) is not None


# the code line of a traceback's innermost frame that raises with a literal message: raise ValueError("...")
_RAISE_LITERAL = re.compile(r"""^raise ((?:[A-Za-z_]\w*\.)*[A-Z]\w*)\(f?(["'])(.+?)\2\)$""")


def _raised_at_cut(stream: str, frames: list[Frame], number: int) -> LoggedException | None:
    """A traceback cut before its exception line whose innermost frame raises a literal message or asserts (with no
    message of its own): that exception (the statement ran; only the line Python prints for it is missing)."""
    code = frames[-1].code if frames else None
    if code and code.startswith("assert ") and "," not in code:
        return LoggedException("AssertionError", "", tuple(frames), stream, number)  # a failed assert prints none
    found = _RAISE_LITERAL.match(code) if code and code.startswith("raise ") else None
    if found is None:
        return None
    return LoggedException(found.group(1).rpartition(".")[2], found.group(3), tuple(frames), stream, number)


MAX_MESSAGE_GAP = 3
"""Lines between an error logged without frames and the traceback printed after it."""


def _cut_frames(lines: list[LogLine]) -> tuple[Frame, ...]:
    """The frames of a traceback's lines (after its 'Traceback' line), their code lines attached."""
    frames: list[Frame] = []
    for line in lines:
        text = line.text
        match = _FRAME.match(text) or (_LOOSE_FRAME.match(text) if 'File "' in text else None)
        if match:
            frames.append(Frame(match.group(1), int(match.group(2) or 0), match.group(3), None))
        elif frames and frames[-1].code is None and text[:1] in " \t" and not set(text.strip()) <= set("^~ "):
            frames[-1] = replace(frames[-1], code=text.strip())
    return tuple(frames)


def trailing_cut_frames(lines: list[LogLine], chains: list[ExceptionChain]) -> tuple[Frame, ...]:
    """The frames of the log's last traceback when the log ends before its exception line (no exception of any chain
    is shown after its 'Traceback' line): where the failure was, though not what it was."""
    start = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].text.strip() == TRACEBACK_START), None)
    if start is None:  # an excerpt that begins inside the traceback: the run of frame lines it ends in
        start = len(lines)
        while start > 0 and (_in_traceback(lines[start - 1].text) or not lines[start - 1].text.strip()):
            start -= 1
        start -= 1
    if start + 1 >= len(lines) or any(e.line >= lines[start + 1].number for chain in chains for e in chain.exceptions):
        return ()
    return _cut_frames(lines[start + 1:])


def _parse_traceback(stream: str, lines: list[LogLine], i: int) -> tuple[LoggedException | None, int]:
    frames: list[Frame] = []
    n = len(lines)
    while i < n:
        text = lines[i].text
        if not text.strip():
            i += 1
            continue
        match = _FRAME.match(text) or (_LOOSE_FRAME.match(text) if "File \"" in text else None)
        if match:
            frames.append(Frame(match.group(1), int(match.group(2) or 0), match.group(3), None))
            i += 1
            continue
        if text[0] in " \t":
            code = text.strip()
            if frames and frames[-1].code is None and not set(code) <= set("^~ "):
                frames[-1] = replace(frames[-1], code=code)
            i += 1
            continue
        if text.strip() == TRACEBACK_START:  # truncated traceback: a new one starts
            return _raised_at_cut(stream, frames, lines[i - 1].number), i
        if (exception := _EXCEPTION.match(text)) and (exception.group(2) is not None or ":" in text
                                                      or _BARE_EXCEPTION.match(text) or "." in exception.group(1)):
            return _parse_exception(stream, lines, i, tuple(frames))
        # something else interrupted it (a cut log; a line cut inside its first word, `ERR`, names no exception)
        return _raised_at_cut(stream, frames, lines[i - 1].number), i
    return _raised_at_cut(stream, frames, lines[n - 1].number) if n else None, i


def _raised_type(message: str) -> str:
    """The exception type vLLM raises a message with (the message index's raise sites agree on one), else 'Error':
    V0's worker record prints the message without it."""
    from kvdoctor.explain.message_index import load_index

    index = load_index()
    located = index.locate(message) if index is not None else None
    types = {loc.type for loc in located.locations if loc.type} if located is not None else set()
    return types.pop() if len(types) == 1 else "Error"


def _frames_below(lines: list[LogLine], j: int) -> tuple[tuple[Frame, ...], int]:
    """The frames pasted under an exception line (its traceback below it, outermost first, as Python prints them),
    and the index after them."""
    frames: list[Frame] = []
    while j < len(lines) and len(frames) < MAX_FRAMES_ABOVE:
        text = lines[j].text
        match = _FRAME_IN.search(text)
        if match:
            frames.append(Frame(match.group(1), int(match.group(2) or 0), match.group(3), None))
        elif text[:1] in (" ", "\t") and text.strip() and frames:
            if frames[-1].code is None and not set(text.strip()) <= set("^~ "):
                frames[-1] = replace(frames[-1], code=text.strip())
        else:
            break
        j += 1
    return tuple(frames), j


def _parse_exception(
    stream: str, lines: list[LogLine], i: int, frames: tuple[Frame, ...]
) -> tuple[LoggedException, int]:
    head = lines[i]
    match = _EXCEPTION.match(head.text) or _BARE_EXCEPTION.match(head.text)
    type_name, first = match.group(1), (match.group(2) or "")
    message = [first]
    record = (head.level, head.source)
    compile_error = bool(_COMPILE_AT.match(first))
    # a type printed without a colon carries no message (`raise AssertionError`, a bare `assert`): the next line is
    # the next output ('EngineCore failed to start.'), not its rest
    bare = match.group(2) is None and ":" not in head.text[match.end(1):]
    j = i + 1
    n = len(lines)
    while j < n and len(message) < MAX_MESSAGE_LINES and not bare:
        line = lines[j]
        stripped = line.text.strip()
        if (line.level, line.source) != record and line.level is not None:
            break
        if record[0] is None and line.level is not None:
            break
        if stripped in (TRACEBACK_START, CAUSE, CONTEXT):
            break
        if not stripped:
            if not compile_error or _next_is_boundary(lines, j):
                break
        elif not compile_error and (_looks_like_new_output(line.text) or _FRAME_IN.search(stripped)):
            break  # a frame ends the message: the traceback pasted below its exception line (or a cut tag before it)
        elif not compile_error and line.text[:1] not in " \t" and _NEXT_EXCEPTION.match(line.text):
            break  # the next exception line (a wrapper's re-raise printed right under it), not this message's rest
        message.append(line.text)
        j += 1
    while message and not message[-1].strip():
        message.pop()
    if not frames and j < n and _FRAME_IN.search(lines[j].text):
        frames, j = _frames_below(lines, j)
    excerpt = tuple(message[1:]) if compile_error else ()
    return (
        LoggedException(type_name, "\n".join(message), frames, stream, head.number, compile_excerpt=excerpt),
        j,
    )


# an exception line of its own at column 0: 'RuntimeError: Engine core initialization failed ...' under a worker's error
_NEXT_EXCEPTION = re.compile(r"(?:[a-z_]\w*\.)*_?[A-Z]\w*(?:Error|Exception)(?:\([\w.]+\))?: \S")
MAX_CONTINUATION = 4


def continued(lines: list[LogLine], index: int) -> str | None:
    """The line at ``index`` with the lines that continue its message joined on (a message that a terminal or a
    paste wrapped, a logger call whose message holds newlines: vLLM prints each of its lines under the same record
    header), or None when the next line does not continue it. A continuation is the next line of the same process,
    with no record header or the same one, that is not a frame, a traceback's header, a new exception or other
    output."""
    parts = continued_parts(lines, index)
    return " ".join(parts) if len(parts) > 1 else None


def continued_parts(lines: list[LogLine], index: int) -> list[str]:
    """The line at ``index`` and the lines that continue its message (see continued), stripped, one per line."""
    head = lines[index]
    parts = [head.text.strip()]
    for line in lines[index + 1 : index + 1 + MAX_CONTINUATION]:
        previous = lines[index + len(parts) - 1]
        if line.number not in (previous.number, previous.number + 1) or line.stream != head.stream:
            break  # the lines of one JSON record's message share its number
        if line.level is not None and (line.level, line.source) != (head.level, head.source):
            break
        text = line.text
        stripped = text.strip()
        if (not stripped or stripped.startswith(('File "', "Traceback", "^", "~")) or stripped in (CAUSE, CONTEXT)
                or _BARE_EXCEPTION.match(stripped) or _looks_like_new_output(text)):
            break
        parts.append(stripped)
    return parts


def _next_is_boundary(lines: list[LogLine], j: int) -> bool:
    for line in lines[j + 1 : j + 4]:
        stripped = line.text.strip()
        if stripped:
            return stripped in (TRACEBACK_START, CAUSE, CONTEXT) or line.level is not None
    return True


def _looks_like_new_output(text: str) -> bool:
    """Lines that end a message in untagged stderr: process banners, interpreter warnings and the records of other
    logging formats (loguru's 'WARNING  | ...', '[ERROR] ...', 'ERROR - ...', left after their time prefix)."""
    return text.startswith(("Process ", "Exception in thread", "/usr/", "[rank", "INFO:", "WARNING:")) or (
        "Warning" in text and _PY_WARNING.match(text) is not None) or (
        text.startswith(_LEVEL_WORDS) and _OTHER_RECORD.match(text) is not None)


_LEVEL_WORDS = ("DEBUG", "INFO", "WARN", "ERROR", "CRITICAL", "SUCCESS", "TRACE", "[")
_OTHER_RECORD = re.compile(r"\[?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|SUCCESS|TRACE)\]?\s*(?:\||-\s|\])")


_PY_WARNING = re.compile(r"^\S+\.py:\d+: \w+Warning")


def _unwrap_workers(chain: ExceptionChain) -> ExceptionChain:
    """Put the worker's own error (recovered from `Worker failed with error '...'`, recursively: wrappers nest)
    in front of its wrapper."""
    exceptions: list[LoggedException] = []
    for exception in chain.exceptions:
        exceptions.extend(payloads(exception))
        exceptions.append(exception)
    return ExceptionChain(tuple(exceptions), chain.stream)


def payloads(wrapper: LoggedException) -> list[LoggedException]:
    """The errors quoted inside a wrapper's message, innermost first (empty when it quotes none): vLLM's worker
    wrapper's payload, or an exception another program quoted in its own message; recursively (wrappers nest)."""
    found: list[LoggedException] = []
    message = wrapper.message
    for _ in range(MAX_NESTING):
        match = WORKER_WRAP.search(message)
        if match:
            inner = _unescaped(match.group(1))
            if not inner.strip():
                break
            recovered = _recovered(inner, wrapper)
        else:
            recovered = _quoted(message, found[0] if found else wrapper)
            if recovered is None:
                break
        found.insert(0, recovered)
        message = recovered.message
    return found


# An exception a program quoted in its own message: typed after its words or inside a printed value ('... failed:
# ValueError: msg', '{"detail": "ValueError: msg"}'), or as a repr at its end ('... failed: ValueError("msg")').
_QUOTED = re.compile(r"(?:(?<=: )|(?<=[ '\"(\[{]))((?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception))"
                     r"(?:: (?=\S)|\((?=['\"].*['\"]\)\s*$))")
MAX_QUOTING_PREFIX = 400


def _quoted(message: str, wrapper: LoggedException) -> LoggedException | None:
    """The exception quoted on the first line of a wrapper's message, or None (a later line is not the wrapper's
    words: the next exception a log printed under it, a traceback's text)."""
    message = message.split("\n", 1)[0]
    head = message[:MAX_QUOTING_PREFIX]
    if "rror" not in head and "xception" not in head:
        return None
    found = _QUOTED.search(message, 1, MAX_QUOTING_PREFIX)
    if found is None:
        return None
    start = found.start()
    opener = message[start - 1]
    inner = message[found.end():]
    if message[found.end() - 1] == "(":  # a repr: its quoted argument
        inner = inner.strip()[1:].rstrip()[:-2]
    elif opener in "'\"" and opener in inner:
        inner = inner[:inner.rindex(opener)]  # inside a quoted value: up to its closing quote
    inner = _unescaped(inner).strip()
    if not inner:
        return None
    return LoggedException(found.group(1), inner, (), wrapper.stream, wrapper.line, wrapped=True,
                           quoted_in=wrapper.quoted_in or wrapper.type)


def _unescaped(payload: str) -> str:
    """A payload printed as a Python repr ('...\\n...', \\' inside) read as the text it stands for."""
    if "\\" not in payload:
        return payload
    return re.sub(r"\\([nt'\"\\])", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), payload)


def _recovered(inner: str, wrapper: LoggedException) -> LoggedException:
    inner = inner.strip()
    if inner.startswith(TRACEBACK_START):  # the worker's whole traceback as text: its last exception line
        last = [line for line in inner.splitlines() if _TYPED_MESSAGE.match(line)]
        inner = inner[inner.index(last[-1]):] if last else inner
    type_name = "WorkerError"
    typed = _TYPED_MESSAGE.match(inner)
    if typed:
        type_name, inner = typed.group(1), typed.group(2)
    else:
        as_repr = _REPR_EXCEPTION.search(inner)
        if as_repr:
            type_name = as_repr.group(1)
    excerpt = tuple(inner.splitlines()[1:]) if _COMPILE_AT.match(inner) else ()
    if excerpt and type_name == "WorkerError":
        type_name = "CompilationError"
    return LoggedException(type_name, inner, (), wrapper.stream, wrapper.line, wrapped=True, compile_excerpt=excerpt)
