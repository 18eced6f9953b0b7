"""Go text/template's grammar: text and {{ actions }} (trim markers, comments, pipelines, variables, control
structures, define/template/block) parsed into a tree whose every node keeps its line in the template."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Union


class ParseError(ValueError):
    """A template Go's parser would refuse too (or a construct this one does not know), with its line."""

    def __init__(self, message: str, line: int):
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.problem = message


@dataclass(frozen=True)
class Field:
    """`.A.B` on dot (`.` alone: no names), or on a variable / parenthesised pipeline when `base` is set."""

    names: tuple[str, ...]
    base: "Operand | None" = None


@dataclass(frozen=True)
class Variable:
    name: str
    """'$' or '$x'."""
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Function:
    name: str


@dataclass(frozen=True)
class Literal:
    value: object


@dataclass(frozen=True)
class Command:
    args: tuple["Operand", ...]


@dataclass(frozen=True)
class Pipeline:
    commands: tuple[Command, ...]
    declare: tuple[str, ...] = ()
    """Variables set by `$x := pipeline` (or `$i, $v := ` in a range)."""
    assign: bool = False
    """`$x = pipeline`: sets an existing variable instead of declaring one."""


Operand = Union[Field, Variable, Function, Literal, Pipeline]


@dataclass(frozen=True)
class Text:
    text: str
    line: int


@dataclass(frozen=True)
class Action:
    pipe: Pipeline
    line: int


@dataclass(frozen=True)
class Branch:
    """if / range / with: `body` when the pipeline is true (non-empty), `orelse` otherwise."""

    keyword: str
    pipe: Pipeline
    body: tuple["Node", ...]
    orelse: tuple["Node", ...]
    line: int


@dataclass(frozen=True)
class Call:
    """{{ template "name" pipeline }}."""

    name: str
    pipe: Pipeline | None
    line: int


@dataclass(frozen=True)
class LoopControl:
    keyword: str
    """'break' or 'continue'."""
    line: int


Node = Union[Text, Action, Branch, Call, LoopControl]


@dataclass
class Parsed:
    body: tuple[Node, ...]
    defines: dict[str, tuple[Node, ...]] = field(default_factory=dict)


TOKEN = re.compile(
    r"""(?P<space>\s+)
    |(?P<string>"(?:[^"\\\n]|\\.)*")
    |(?P<raw>`[^`]*`)
    |(?P<char>'(?:[^'\\]|\\.)+')
    |(?P<number>[-+]?(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|(?:\d[\d_]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
        (?![A-Za-z_]))
    |(?P<declare>:=)
    |(?P<assign>=)
    |(?P<variable>\$[A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
    |(?P<field>(?:\.[A-Za-z_][A-Za-z0-9_]*)+)
    |(?P<dot>\.)
    |(?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<punct>[()|,])""",
    re.VERBOSE,
)
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "a": "\a", "b": "\b", "f": "\f",
           "v": "\v", "0": "\0"}  # fmt: skip
KEYWORDS = {"if", "else", "end", "range", "with", "define", "template", "block", "break", "continue"}


def parse(text: str, first_line: int = 1) -> Parsed:
    """The template's tree and the templates it defines; ParseError for what Go's parser refuses."""
    items = _split(text, first_line)
    parsed = Parsed(())
    body, stop = _nodes(items, 0, parsed, ())
    if stop < len(items):
        raise ParseError(f"unexpected {{{{{items[stop][1][0][1]}}}}}", items[stop][2])
    parsed.body = body
    return parsed


def _split(text: str, line: int) -> list[tuple[str, object, int]]:
    """('text', str, line) and ('action', tokens, line) in order; comments dropped; trim markers applied."""
    out: list[tuple[str, object, int]] = []
    at = 0
    trim_next = False
    while True:
        start = text.find("{{", at)
        chunk = text[at:] if start < 0 else text[at:start]
        if trim_next:
            chunk, skipped = chunk.lstrip(" \t\r\n"), len(chunk) - len(chunk.lstrip(" \t\r\n"))
            line += text.count("\n", at, at + skipped)
            at += skipped
        if start < 0:
            if chunk:
                out.append(("text", chunk, line))
            return out
        trim_left = text.startswith("{{-", start) and start + 3 < len(text) and text[start + 3] in " \t\r\n"
        if trim_left:
            chunk = chunk.rstrip(" \t\r\n")
        if chunk:
            out.append(("text", chunk, line))
        line += text.count("\n", at, start)
        inner = start + (3 if trim_left else 2)
        tokens, end, trim_next = _lex_action(text, inner, line)
        if tokens:
            out.append(("action", tokens, line))
        line += text.count("\n", start, end)
        at = end


def _lex_action(text: str, at: int, line: int) -> tuple[list[tuple[str, str]], int, bool]:
    """The tokens of one action from `at`, the offset after its `}}` and whether it trims what follows."""
    stripped = text[at:].lstrip(" \t\r\n")
    if stripped.startswith("/*"):
        close = text.find("*/", at)
        if close < 0:
            raise ParseError("unclosed comment", line)
        rest = text[close + 2 :]
        if rest.startswith("}}"):
            return [], close + 4, False
        if rest.startswith(" -}}"):
            return [], close + 6, True
        raise ParseError("comment ends before closing delimiter", line)
    tokens: list[tuple[str, str]] = []
    pos = at
    while True:
        if text.startswith("}}", pos):
            return tokens, pos + 2, False
        if text.startswith("-}}", pos) and pos > at and text[pos - 1] in " \t\r\n":
            return tokens, pos + 3, True
        match = TOKEN.match(text, pos)
        if match is None:
            if pos >= len(text):
                raise ParseError("unclosed action", line)
            raise ParseError(f"unexpected {text[pos]!r} in action", line + text.count("\n", at, pos))
        kind = match.lastgroup or ""
        if kind == "field" and tokens and tokens[-1] == ("punct", ")") and match.start() == pos and \
                text[pos - 1] == ")":
            kind = "chained"  # (pipeline).Field: a field of the parenthesised value, written right after it
        if kind != "space":
            tokens.append((kind, match.group(0)))
        pos = match.end()


def _nodes(items, at: int, parsed: Parsed, ends: tuple[str, ...]) -> tuple[tuple[Node, ...], int]:
    """Nodes from items[at] up to an action whose keyword is in `ends` (its index returned, not consumed)."""
    out: list[Node] = []
    while at < len(items):
        kind, value, line = items[at]
        if kind == "text":
            out.append(Text(value, line))
            at += 1
            continue
        tokens = value
        keyword = tokens[0][1] if tokens[0][0] == "ident" and tokens[0][1] in KEYWORDS else None
        if keyword in ends:
            return tuple(out), at
        if keyword in ("end", "else"):
            raise ParseError(f"unexpected {{{{{keyword}}}}}", line)
        if keyword in ("if", "range", "with"):
            node, at = _branch(items, at, parsed, keyword, tokens[1:], line)
            out.append(node)
            continue
        if keyword in ("define", "block"):
            name, pipe_tokens = _template_name(tokens[1:], line)
            body, at = _nodes(items, at + 1, parsed, ("end",))
            _expect_end(items, at, line)
            parsed.defines[name] = body
            if keyword == "block":
                out.append(Call(name, _pipeline(pipe_tokens, line) if pipe_tokens else None, line))
            at += 1
            continue
        if keyword == "template":
            name, pipe_tokens = _template_name(tokens[1:], line)
            out.append(Call(name, _pipeline(pipe_tokens, line) if pipe_tokens else None, line))
        elif keyword in ("break", "continue"):
            out.append(LoopControl(keyword, line))
        else:
            out.append(Action(_pipeline(tokens, line, declarations=True), line))
        at += 1
    if ends:
        raise ParseError("unexpected EOF: {{end}} missing", items[-1][2] if items else 1)
    return tuple(out), at


def _branch(items, at: int, parsed: Parsed, keyword: str, tokens, line: int) -> tuple[Branch, int]:
    pipe = _pipeline(tokens, line, declarations=True)
    body, at = _nodes(items, at + 1, parsed, ("end", "else"))
    _expect_end(items, at, line)
    orelse: tuple[Node, ...] = ()
    else_tokens = items[at][1]
    if else_tokens[0][1] == "else":
        if len(else_tokens) > 1:  # {{else if ...}} / {{else with ...}}: a nested branch sharing this {{end}}
            inner_keyword = else_tokens[1][1]
            if inner_keyword not in ("if", "with"):
                raise ParseError(f"unexpected {inner_keyword!r} after else", items[at][2])
            inner, at = _branch(items, at, parsed, inner_keyword, else_tokens[2:], items[at][2])
            return Branch(keyword, pipe, body, (inner,), line), at
        orelse, at = _nodes(items, at + 1, parsed, ("end",))
        _expect_end(items, at, line)
        if items[at][1][0][1] != "end":
            raise ParseError("expected {{end}}", items[at][2])
    return Branch(keyword, pipe, body, orelse, line), at + 1


def _expect_end(items, at: int, line: int) -> None:
    if at >= len(items):
        raise ParseError("unexpected EOF: {{end}} missing", line)


def _template_name(tokens, line: int) -> tuple[str, list]:
    if not tokens or tokens[0][0] not in ("string", "raw"):
        raise ParseError("template name must be a string", line)
    return _string(tokens[0]), tokens[1:]


def _pipeline(tokens, line: int, declarations: bool = False) -> Pipeline:
    """`[$x[, $y] := | =] command | command ...`."""
    declare: tuple[str, ...] = ()
    assign = False
    kinds = [k for k, _ in tokens]
    if declarations and ("declare" in kinds[:4] or "assign" in kinds[:4]):
        split = next(i for i, k in enumerate(kinds) if k in ("declare", "assign"))
        names = [v for k, v in tokens[:split] if k == "variable"]
        if not names or any(k not in ("variable", "punct") for k in kinds[:split]):
            raise ParseError("bad variable declaration", line)
        declare, assign = tuple(names), kinds[split] == "assign"
        tokens = tokens[split + 1 :]
    commands: list[Command] = []
    current: list[Operand] = []
    index = 0
    while index < len(tokens):
        kind, value = tokens[index]
        if kind == "punct" and value == "|":
            if not current:
                raise ParseError("missing command before |", line)
            commands.append(Command(tuple(current)))
            current = []
            index += 1
            continue
        operand, index = _operand(tokens, index, line)
        current.append(operand)
    if current:
        commands.append(Command(tuple(current)))
    if not commands:
        raise ParseError("missing value for command", line)
    return Pipeline(tuple(commands), declare, assign)


def _operand(tokens, index: int, line: int) -> tuple[Operand, int]:
    kind, value = tokens[index]
    index += 1
    if kind == "punct" and value == "(":
        depth, end = 1, index
        while end < len(tokens) and depth:
            if tokens[end] == ("punct", "("):
                depth += 1
            elif tokens[end] == ("punct", ")"):
                depth -= 1
            end += 1
        if depth:
            raise ParseError("unclosed left paren", line)
        operand: Operand = _pipeline(tokens[index : end - 1], line)
        index = end
        if index < len(tokens) and tokens[index][0] == "chained":
            operand = Field(_names(tokens[index][1]), operand)
            index += 1
        return operand, index
    if kind == "field":
        return Field(_names(value)), index
    if kind == "dot":
        return Field(()), index
    if kind == "variable":
        name, _, chain = value.partition(".")
        return Variable(name, tuple(chain.split(".")) if chain else ()), index
    if kind in ("string", "raw"):
        return Literal(_string((kind, value))), index
    if kind == "char":
        return Literal(ord(_string(("string", '"' + value[1:-1] + '"')))), index
    if kind == "number":
        return Literal(_number(value, line)), index
    if kind == "ident":
        if value in ("true", "false"):
            return Literal(value == "true"), index
        if value == "nil":
            return Literal(None), index
        if value in KEYWORDS:
            raise ParseError(f"unexpected keyword {value!r} in command", line)
        return Function(value), index
    raise ParseError(f"unexpected {value!r} in command", line)


def _names(text: str) -> tuple[str, ...]:
    return tuple(text.split(".")[1:])


def _string(token: tuple[str, str]) -> str:
    kind, value = token
    if kind == "raw":
        return value[1:-1]
    return re.sub(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)",
                  lambda m: chr(int(m.group(1)[1:], 16)) if len(m.group(1)) > 1 else ESCAPES.get(m.group(1),
                                                                                                 m.group(1)),
                  value[1:-1])  # fmt: skip


def _number(text: str, line: int) -> int | float:
    clean = text.replace("_", "")
    try:
        if re.fullmatch(r"[-+]?0[xXbBoO].*", clean):
            return int(clean, 0)
        if re.fullmatch(r"[-+]?\d+", clean):
            return int(clean, 10)
        return float(clean)
    except ValueError:
        raise ParseError(f"bad number syntax: {text}", line) from None
