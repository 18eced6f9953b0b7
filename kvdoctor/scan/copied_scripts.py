"""A Dockerfile whose ENTRYPOINT / CMD runs a script it COPYs into the image (`COPY vllm/entrypoint.sh /srv/start.sh`,
`ENTRYPOINT ["/srv/start.sh"]`): the vLLM command is in that script of the build context, run with the image's ENV
(the Dockerfile reference: COPY <src> <dest>, a relative dest under WORKDIR, a dest ending in / a folder)."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from kvdoctor.scan.called_scripts import argv_in_script, script_word
from kvdoctor.scan.workload import Token

MAX_PARENTS = 3
"""How far above the Dockerfile its build context is looked for (a Dockerfile in vllm/ built from the repository)."""


@dataclass(frozen=True)
class Copy:
    sources: tuple[str, ...]
    destination: str
    """Absolute in the image (WORKDIR applied)."""


def copy_of(value: str, workdir: str) -> Copy | None:
    """A COPY / ADD instruction's sources and destination; None for one from another stage or image (--from)."""
    try:
        words = json.loads(value) if value.startswith("[") else shlex.split(value)
    except ValueError:
        return None
    if any(w.startswith("--from") for w in words):
        return None
    words = [w for w in words if not w.startswith("--")]
    if len(words) < 2:
        return None
    return Copy(tuple(words[:-1]), str(PurePosixPath(workdir) / words[-1]))


def copied_script(command: list[Token], copies: list[Copy], workdir: str, dockerfile: str) -> tuple[Path, Token] | None:
    """The build-context file the command runs (its first word, or a shell's script argument), and that word."""
    word = script_word(command)
    if word is None:
        return None
    path = str(PurePosixPath(workdir) / word.text.split()[0])  # sh -c "/srv/start.sh --x": its first word
    for copy in reversed(copies):  # the last COPY to a path is the file there
        for source in _sources_for(copy, path):
            found = _in_context(source, Path(dockerfile).parent)
            if found:
                return found, word
    return None


def _sources_for(copy: Copy, path: str) -> list[str]:
    """The build-context paths the COPY may have put at `path`: its one source copied to that name, a source file
    copied into the destination folder, or the file under a source folder whose contents were copied there
    (`COPY scripts/ /scripts/` puts scripts/start.sh at /scripts/start.sh)."""
    if copy.destination == path and len(copy.sources) == 1:
        return [copy.sources[0]]
    folder = copy.destination if copy.destination.endswith("/") else copy.destination + "/"
    named = [s for s in copy.sources if str(PurePosixPath(folder) / PurePosixPath(s).name) == path]
    inside = path[len(folder):] if path.startswith(folder) else None
    return named + ([str(PurePosixPath(s) / inside) for s in copy.sources] if inside else [])


def _in_context(source: str, folder: Path) -> Path | None:
    """The source file in the build context: the Dockerfile's folder or one above it."""
    if source.startswith(("/", "http://", "https://")) or "*" in source:
        return None
    for context in [folder, *list(folder.parents)[:MAX_PARENTS]]:
        if (context / source).is_file():
            return context / source
    return None


def script_command(path: Path, known: dict[str, str]) -> list[Token] | None:
    """The vLLM argv in the copied script (its own lines), expanded from the image's env and its assignments."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return argv_in_script(text, known)
