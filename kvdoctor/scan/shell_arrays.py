"""Bash arrays in a script: `ARGS=( --model M --tensor-parallel-size 2 )`, `ARGS+=(--enforce-eager)`, then
`vllm serve "${ARGS[@]}"` (or `gcloud "${deploy_args[@]}"`): the reference stands for the array's words, each on the
line it is written on. Appends are taken wherever they are written (an append under an `if` included: the script's
author wrote it as one of the command's options), except on the lines a caller says do not run (an `if` whose test the
script's known values decide against it); an array whose body kvdoctor cannot split is left alone."""

from __future__ import annotations

import re
import shlex

from kvdoctor.scan.workload import Token

ARRAY_ASSIGNMENT = re.compile(r"^\s*(?:(?:declare|local|typeset|readonly)\s+-a\s+|export\s+)?([A-Za-z_]\w*)(\+?)=\(")
ARRAY_REFERENCE = re.compile(r"^\$\{([A-Za-z_]\w*)\[[@*]\]\}$")
MAX_ARRAY_LINES = 200  # a body not closed within these lines is not an array kvdoctor reads


def script_arrays(script: str, first_line: int, skipped: frozenset[int] = frozenset()) -> dict[str, list[Token]]:
    """Each array the script assigns (NAME=(...), NAME+=(...), declare -a NAME=(...)) and its words in order; an
    assignment on a line index in ``skipped`` is not taken."""
    lines = script.splitlines()
    arrays: dict[str, list[Token]] = {}
    index = 0
    while index < len(lines):
        found = ARRAY_ASSIGNMENT.match(lines[index])
        if found is None:
            index += 1
            continue
        body = _body(lines, index, found.end())
        if body is None:
            index += 1
            continue
        words, last = body
        if index in skipped:
            index = last + 1
            continue
        name = found.group(1)
        # bash expands an array named inside the body at assignment: `ARGS=(--rm "${MOUNTS[@]}" IMAGE)`
        placed = expand_arrays([Token(text, first_line + number) for number, text in words], arrays)
        arrays[name] = arrays.get(name, []) + placed if found.group(2) else placed
        index = last + 1
    return arrays


def _body(lines: list[str], start: int, column: int) -> tuple[list[tuple[int, str]], int] | None:
    """The words between `(` (at `column` of line `start`) and its closing `)`, each with its line's index, and the
    index of the line that closes it; None when it does not close or does not split (an unmatched quote)."""
    words: list[tuple[int, str]] = []
    quote: str | None = None
    for number in range(start, min(start + MAX_ARRAY_LINES, len(lines))):
        text = lines[number][column:] if number == start else lines[number]
        end = None
        for at, char in enumerate(text):
            if quote:
                quote = None if char == quote else quote
            elif char in "'\"":
                quote = char
            elif char == "#" and (at == 0 or text[at - 1] in " \t"):
                break  # a comment to the line's end
            elif char == ")":
                end = at
                break
        if quote:
            return None  # a quoted word over several lines: not read
        try:
            split = shlex.split(text if end is None else text[:end], comments=True)
        except ValueError:
            return None
        words += [(number, word) for word in split]
        if end is not None:
            return words, number
    return None


def expand_arrays(words: list[Token], arrays: dict[str, list[Token]]) -> list[Token]:
    """The command's words with each `${NAME[@]}` / `${NAME[*]}` of a known array replaced by its words."""
    if not arrays:
        return words
    out: list[Token] = []
    for token in words:
        found = ARRAY_REFERENCE.match(token.text)
        out += arrays[found.group(1)] if found and found.group(1) in arrays else [token]
    return out
