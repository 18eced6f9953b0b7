"""A task's script that runs a script file of its working directory (SkyPilot's `run: bash scripts/serve.sh`, a dstack
command `./serve.sh`): the vLLM command is in that file, read with the task's environment, its words on the file's
own lines (SkyPilot syncs `workdir` and runs `run` in it; dstack runs `commands` in the repository's folder)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from kvdoctor.scan.command import SHELLS, expand_words, script_argv, script_assignments, script_commands
from kvdoctor.scan.workload import Token, Workload

RUNNERS = {"bash", "sh", "zsh", "source", "."}
"""`bash FILE`, `sh FILE`, `source FILE` / `. FILE` run FILE's commands; `./FILE` and `FILE.sh` run it directly."""


@dataclass(frozen=True)
class CalledScript:
    path: Path
    text: str
    word: Token
    """The caller's word that names it (for the note's line)."""


def called_script(script: str, first_line: int, folder: Path) -> CalledScript | None:
    """The first script file the task's script runs that is in `folder` (the task's workdir), else None."""
    for words in script_commands(script, first_line):
        named = _named_file(words)
        if named is None:
            continue
        path = folder / named.text
        try:
            if path.is_file():
                return CalledScript(path, path.read_text(encoding="utf-8"), named)
        except (OSError, UnicodeDecodeError):
            continue
    return None


def _named_file(words: list[Token]) -> Token | None:
    if not words:
        return None
    program = PurePosixPath(words[0].text).name
    if program in RUNNERS and len(words) > 1 and not words[1].text.startswith("-"):
        named = words[1]
    elif words[0].text.startswith("./") or program.endswith((".sh", ".bash")):
        named = words[0]
    else:
        return None
    return None if named.text.startswith("/") or "$" in named.text else named  # a path on the host, unknown here


def called_argv(called: CalledScript, known: dict[str, str]) -> list[Token] | None:
    """The vLLM argv in the called file (its lines), expanded from the task's environment and its own assignments."""
    return argv_in_script(called.text, known)


def argv_in_script(text: str, known: dict[str, str]) -> list[Token] | None:
    """The vLLM argv of a script file's text (its own lines), expanded from `known` and the script's assignments as
    the shell runs them: an unquoted $ARGS split into its words, a variable set to nothing no word at all."""
    argv = script_argv(text, 1)
    return None if argv is None else expand_words(argv, script_assignments(text, known))


def script_word(command: list[Token]) -> Token | None:
    """The word of a command that names the script it runs: its first word, or a shell's script argument
    (`sh -c "/srv/start.sh --x"`: the caller takes that word's first part)."""
    return next((word for word in command[:3] if PurePosixPath(word.text).name not in SHELLS
                 and not word.text.startswith("-") and word.text.strip()), None)


def placed_in(workload: Workload, called: CalledScript) -> Workload:
    """The workload with its argv on the called file's lines (its other values stay on the task file's), noted."""
    argv: list[Token] = []
    for token in workload.argv:
        workload, line = workload.line_in(str(called.path), token.line)
        argv.append(replace(token, line=line))
    note = (f"the vLLM command is in {called.word.text} (line {called.word.line} runs it), read from {called.path} with "
            "the task's environment")  # fmt: skip
    return replace(workload, argv=tuple(argv), command_line=argv[0].line if argv else workload.command_line,
                   notes=workload.notes + (note,), read_through=(str(called.path),))  # fmt: skip
