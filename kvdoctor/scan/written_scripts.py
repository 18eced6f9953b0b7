"""Scripts a Dockerfile writes into its image at build time and then runs: `RUN echo '#!/bin/bash\\n... vllm serve ...'
> /app/start.sh`, `RUN printf '...' > /start.sh`, `RUN cat <<'EOF' > /start.sh` (a here-document) and BuildKit's
`COPY <<EOF /start.sh`. The text is what the shell writes (echo and printf under /bin/sh turn `\\n` into newlines)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

# echo / printf of one quoted string redirected to a file (`>` or `>>`), the string possibly spanning joined lines
_ECHOED = re.compile(r"""\b(?:echo(?:\s+-[neE]+)*|printf)\s+(['"])(?P<text>.*?)(?<!\\)\1\s*>>?\s*(?P<path>[^\s;&|]+)""",
                     re.DOTALL)
# `cat <<EOF > PATH`, `cat > PATH <<'EOF'`, `tee PATH <<EOF`: the here-document's body is the file
_HEREDOC_TO = re.compile(r"""\b(?:cat\s*(?:<<-?\s*['"]?\w+['"]?\s*)?>>?\s*(?P<cat>[^\s;&|<]+)|tee\s+(?:-a\s+)?(?P<tee>[^\s;&|<>]+))""")
_COPY_HEREDOC = re.compile(r"""^(?:--\S+\s+)*<<-?\s*['"]?\w+['"]?\s+(?P<path>\S+)\s*$""")
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", "'": "'", '"': '"'}


@dataclass(frozen=True)
class WrittenScript:
    """A file the build writes: its path in the image, its text, and the Dockerfile line its first line is on."""

    path: str
    text: str
    line: int


def written_by(keyword: str, value: str, body: str | None, line: int, workdir: str) -> list[WrittenScript]:
    """The files one RUN or COPY instruction writes (its value with continuation lines joined; `body` is the
    here-document it opens, which starts on the line after `line`)."""
    found: list[WrittenScript] = []
    if keyword == "COPY" and body is not None:
        target = _COPY_HEREDOC.match(value.split("\n", 1)[0].strip())
        if target:
            found.append(WrittenScript(_in(workdir, target.group("path")), body, line + 1))
        return found
    if keyword != "RUN":
        return found
    head = value.split("\n", 1)[0] if body is not None else value
    if body is not None:
        target = _HEREDOC_TO.search(head)
        if target and "<<" in head:
            found.append(WrittenScript(_in(workdir, target.group("cat") or target.group("tee")), body, line + 1))
    for echoed in _ECHOED.finditer(head):
        found.append(WrittenScript(_in(workdir, echoed.group("path")), _unescaped(echoed.group("text")), line))
    return found


def script_run(word: str, written: dict[str, WrittenScript], workdir: str) -> WrittenScript | None:
    """The written script a command's word runs (`/app/start.sh`, `./start.sh`, `bash start.sh`'s argument)."""
    return written.get(_in(workdir, word.split()[0])) if word.strip() else None


def _in(workdir: str, path: str) -> str:
    return str(PurePosixPath(workdir) / path.strip("'\""))


def _unescaped(text: str) -> str:
    """The text `echo` (dash's, Docker's /bin/sh on Debian and Ubuntu) or `printf` writes: backslash escapes
    turned into their characters, so the script's lines are its lines."""
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), "\\" + m.group(1)), text)
