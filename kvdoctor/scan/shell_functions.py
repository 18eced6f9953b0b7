"""Shell functions a script calls (`start_vllm "$MODEL" 8000`), its own or a sourced file's (`source slurm/vllm.sh`):
the function's body read with the call's arguments as its positional parameters ($1, ${2}) and its `local NAME=value`
assignments, as the shell runs it. HPC job scripts keep `vllm serve` in such a helper."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

FUNCTION_START = re.compile(
    r"^\s*(?:function\s+([A-Za-z_][\w-]*)\s*(?:\(\s*\))?|([A-Za-z_][\w-]*)\s*\(\s*\))\s*\{\s*$")
SOURCE = re.compile(r"^\s*(?:source|\.)\s+(['\"]?)([^\s'\";&|]+)\1\s*$")
LOCAL = re.compile(r"^(\s*)(?:local|declare|typeset|readonly)\s+(?:-\w+\s+)*(.*)$")
POSITIONAL = re.compile(r"\$\{([1-9])\}|\$([1-9])\b")
MAX_SOURCED_BYTES = 256 * 1024
UP = 2
"""A sourced path is looked for beside the script, then up to two folders above (a job submitted from the repository
root sources `slurm/vllm.sh` while the script lies in slurm/)."""


@dataclass(frozen=True)
class ShellFunction:
    name: str
    body: tuple[str, ...]
    first: int
    """The 0-based index, in its file's text, of the body's first line."""
    source: str | None = None
    """The sourced file it is defined in; None for the script's own."""


def functions_in(text: str, source: str | None = None) -> dict[str, ShellFunction]:
    """The functions the text defines (`name() {` or `function name {` on its own line, up to the `}` that closes it)."""
    lines = text.split("\n")
    found: dict[str, ShellFunction] = {}
    index = 0
    while index < len(lines):
        start = FUNCTION_START.match(lines[index])
        if start is None:
            index += 1
            continue
        depth, end = 1, index + 1
        while end < len(lines) and depth > 0:
            depth += lines[end].count("{") - lines[end].count("}")
            end += 1
        name = start.group(1) or start.group(2)
        found[name] = ShellFunction(name, tuple(lines[index + 1 : end - 1]), index + 1, source)
        index = end
    return found


def sourced_functions(text: str, script: str) -> dict[str, ShellFunction]:
    """The functions of the files the script sources, found beside it or up to UP folders above."""
    if not Path(script).is_file():
        return {}
    found: dict[str, ShellFunction] = {}
    for line in text.split("\n"):
        sourced = SOURCE.match(line)
        if sourced is None or "$" in sourced.group(2):
            continue
        for folder in [Path(script).parent, *Path(script).parent.parents][: UP + 1]:
            path = folder / sourced.group(2)
            if path.is_file() and path.stat().st_size <= MAX_SOURCED_BYTES:
                try:
                    found |= functions_in(path.read_text(encoding="utf-8", errors="replace"), str(path))
                except OSError:
                    pass
                break
    return found


def with_arguments(text: str, arguments: list[str]) -> str:
    """The text with $1.. (${1}..) the call's arguments, quoted for the shell; one past them empty."""
    def positional(match: re.Match[str]) -> str:
        number = int(match.group(1) or match.group(2))
        return shlex.quote(arguments[number - 1]) if number <= len(arguments) else ""

    return POSITIONAL.sub(positional, text)


def called_body(function: ShellFunction, arguments: list[str]) -> tuple[str, dict[str, str]]:
    """The function's body as the call runs it: $1.. the call's arguments, each `local NAME=value` an assignment of
    the returned values (its line left blank, so lines keep their numbers)."""
    values: dict[str, str] = {}
    lines = []
    for line in function.body:
        line = with_arguments(line, arguments)
        local = LOCAL.match(line)
        if local is not None:
            try:
                words = shlex.split(local.group(2), comments=True)
            except ValueError:
                words = []
            values.update(word.split("=", 1) for word in words if "=" in word)
            line = ""
        lines.append(line)
    return "\n".join(lines), values


def without_bodies(text: str, functions: dict[str, ShellFunction], names: set[str]) -> str:
    """The text with the bodies of the named functions (the script's own) blank: they run where they are called."""
    lines = text.split("\n")
    for name in names:
        function = functions.get(name)
        if function is not None and function.source is None:
            for index in range(function.first, function.first + len(function.body)):
                lines[index] = ""
    return "\n".join(lines)
