"""JavaScript object literals read as data (PM2's ecosystem files, Pulumi programs): the text as tokens with their
lines, comments left out; an object, a list, a string, a number, true / false / null as Python values; a value the
literal computes (a call, `process.env.X`, a spread) is UNKNOWN, never guessed."""

from __future__ import annotations

import re

TOKEN = re.compile(r"""//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|`(?:\\.|[^`\\])*`|[{}\[\]:,()]"""
                   r"""|[\w$.+-]+|\S""", re.DOTALL)  # fmt: skip
UNKNOWN = object()
"""A value the literal computes (a call, process.env.X): left out."""
OPENERS = {"{": "}", "[": "]", "(": ")"}


def read_tokens(text: str) -> list[tuple[str, int]]:
    """(token, line) of the text, comments left out."""
    found, line, last = [], 1, 0
    for match in TOKEN.finditer(text):
        line += text.count("\n", last, match.start())
        last = match.start()
        if not match.group().startswith(("//", "/*")):
            found.append((match.group(), line))
    return found


def key_name(text: str) -> str:
    """An object key as written, quoted or not."""
    return text[1:-1] if text[:1] in "\"'`" and len(text) > 1 else text


def literal_value(tokens: list[tuple[str, int]], index: int) -> tuple[object, int]:
    """The literal at ``index`` as data (an object's values as (value, line)), and the index after it."""
    text, _ = tokens[index]
    if text == "{":
        items: dict[str, tuple[object, int]] = {}
        index += 1
        while index < len(tokens) and tokens[index][0] != "}":
            if index + 1 < len(tokens) and tokens[index + 1][0] == ":":
                key = key_name(tokens[index][0])
                line = tokens[index + 2][1] if index + 2 < len(tokens) else tokens[index][1]
                value, index = literal_value(tokens, index + 2)
                items[key] = (value, line)
            else:
                index = expression_end(tokens, index)  # a spread, a shorthand or a method: not data
            if index < len(tokens) and tokens[index][0] == ",":
                index += 1
        return items, index + 1
    if text == "[":
        elements: list[object] = []
        index += 1
        while index < len(tokens) and tokens[index][0] != "]":
            value, index = literal_value(tokens, index)
            elements.append(value)
            if index < len(tokens) and tokens[index][0] == ",":
                index += 1
        return elements, index + 1
    end = expression_end(tokens, index)
    if end == index + 1:
        return scalar(text), end
    return UNKNOWN, end


def expression_end(tokens: list[tuple[str, int]], index: int) -> int:
    """The index of the `,` or closing bracket that ends the expression at ``index``."""
    depth = 0
    while index < len(tokens):
        text = tokens[index][0]
        if text in OPENERS:
            depth += 1
        elif text in OPENERS.values():
            if depth == 0:
                return index
            depth -= 1
        elif text == "," and depth == 0:
            return index
        index += 1
    return index


def scalar(text: str) -> object:
    """A token's value: a string unquoted (a template string as written), a number as its text, true / false / null,
    else UNKNOWN."""
    if text[:1] in "\"'":
        return bytes(text[1:-1], "utf-8").decode("unicode_escape", errors="replace")
    if text[:1] == "`":
        return text[1:-1]  # a template's ${...} stays a variable of the shell line
    if re.fullmatch(r"-?\d+(?:\.\d+)?", text):
        return text
    return {"true": True, "false": False, "null": None}.get(text, UNKNOWN)
