"""`ID=$(docker run -d ... IMAGE ARGS)`: a command whose output a script assigns still runs; its words are read as
one of the script's own commands (bash(1), "Command Substitution": the command runs in a subshell)."""

from __future__ import annotations

import re

ASSIGNED_SUBSTITUTION = re.compile(
    r"(?:^|(?<=[;&|({\s]))(?:(?:local|export|readonly|declare(?:\s+-[a-zA-Z]+)*)\s+)?"
    r"[A-Za-z_][A-Za-z0-9_]*=(\"?)\$\((?!\()"
)
"""`NAME=$(`, `NAME="$(`, `local NAME=$(` at a word's start; `$((` is arithmetic, not a command."""


def unwrapped_assignments(script: str) -> str:
    """The script with each `NAME=$(` ... `)` of an assignment blanked (spaces, newlines kept), so that the command
    inside reads as a command of the script at its own offsets and lines."""
    chars = list(script)
    for found in ASSIGNED_SUBSTITUTION.finditer(script):
        close = _closing_parenthesis(script, found.end())
        if close is None:
            continue
        ends = [close]
        if found.group(1) and close + 1 < len(script) and script[close + 1] == '"':
            ends.append(close + 1)  # NAME="$(...)": its closing quote
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
