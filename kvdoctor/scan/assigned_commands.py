"""`ID=$(docker run -d ... IMAGE ARGS)`: a command whose output a script assigns still runs; its words are read as
one of the script's own commands (bash(1), "Command Substitution": the command runs in a subshell)."""

from __future__ import annotations

import re

ASSIGNED_SUBSTITUTION = re.compile(
    r"(?:^|(?<=[;&|({\s]))(?:(?:local|export|readonly|declare(?:\s+-[a-zA-Z]+)*)\s+)?"
    r"[A-Za-z_][A-Za-z0-9_]*=(\"?)\$\((?!\()"
)
"""`NAME=$(`, `NAME="$(`, `local NAME=$(` at a word's start; `$((` is arithmetic, not a command."""
WORD_ENDS = {"", " ", "\t", "\n", ";", "&", "|", ")"}
"""What may follow a substitution that is a whole value (`ID=$(...)` then a space, `;`, a newline or the end)."""


def unwrapped_assignments(script: str) -> str:
    """The script with each `NAME=$(` ... `)` of an assignment whose whole value it is blanked (spaces, newlines
    kept), so that the command inside reads as a command of the script at its own offsets and lines."""
    chars = list(script)
    for found in ASSIGNED_SUBSTITUTION.finditer(script):
        close = _closing_parenthesis(script, found.end())
        after = close + 1 + bool(found.group(1)) if close is not None else None
        if close is None or (found.group(1) and script[close + 1 : close + 2] != '"') \
                or script[after : after + 1] not in WORD_ENDS:
            continue  # `DIR="$(dirname "$0")/.."`: the substitution is part of a word, its command a helper's
        ends = [close, close + 1] if found.group(1) else [close]  # NAME="$(...)": its closing quote too
        for at in [*range(found.start(), found.end()), *ends]:
            chars[at] = " "
    return "".join(chars)


def _closing_parenthesis(script: str, start: int) -> int | None:
    """The offset of the `)` that closes a `$(` whose body starts at `start`: parentheses counted outside quotes,
    a backslash escaping the next character; None when the script ends first."""
    depth, quote, at = 1, None, start
    while at < len(script):
        char = script[at]
        if char == "\\" and quote != "'":
            at += 2
            continue
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return at
        at += 1
    return None
