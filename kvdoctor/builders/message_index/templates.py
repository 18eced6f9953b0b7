"""Message templates from Python source: every `raise X(<message>)`, `assert cond, <message>` and logger/warnings
call whose message is a string, an f-string, a %-format, a `.format` call or a concatenation of those, as literal
parts and placeholders (a message held in a local variable is followed to its assignment). Of the code only three
short facts about a raise site are kept: the condition it is raised under (the innermost `if`, the `except` clause
or the assert's test), its enclosing class and function, and the names of the expressions its message interpolates.
"""

from __future__ import annotations

import ast
import re

LOG_METHODS = {"error": "error", "exception": "error", "critical": "critical", "fatal": "critical",
               "warning": "warning", "warn": "warning", "error_once": "error", "warning_once": "warning"}
MIN_LITERAL = 12  # alphanumeric characters of literal text a template needs to be worth matching
WILD = None  # a placeholder in a stored template's parts list
MAX_NAME = 60  # characters of an interpolated expression kept as its name


class Hole:
    """A placeholder while a template is built: where the message interpolates an expression, and its source text."""

    __slots__ = ("name",)

    def __init__(self, name: str | None = None):
        self.name = name if name is None or len(name) <= MAX_NAME else None

    def __repr__(self) -> str:
        return f"Hole({self.name!r})"


def _hole(node: ast.AST | None) -> Hole:
    return Hole(ast.unparse(node) if node is not None else None)


def is_hole(part) -> bool:
    return part is WILD or isinstance(part, Hole)
_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?[diouxXeEfFgGcrsa%]")
_FORMAT_FIELD = re.compile(r"\{\{|\}\}|\{[^{}]*\}")
MAX_CONDITION = 200  # characters of a raise's guard kept as source text


def template_of(node: ast.AST, local: dict[str, ast.AST], depth: int = 0) -> list | None:
    """The message expression as a list of literal strings and WILD placeholders, or None if not a message."""
    if depth > 6:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        parts: list = []
        for value in node.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                parts.append(value.value)
            else:
                parts.append(_hole(value.value if isinstance(value, ast.FormattedValue) else None))
        return parts
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = template_of(node.left, local, depth + 1)
        right = template_of(node.right, local, depth + 1)
        if left is None and right is None:
            return None
        return (left or [_hole(node.left)]) + (right or [_hole(node.right)])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left = template_of(node.left, local, depth + 1)
        return _split_literals(left, _PERCENT, percent_names(node.right)) if left else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        base = template_of(node.func.value, local, depth + 1)
        return _split_literals(base, _FORMAT_FIELD, format_names(node), braces=True) if base else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join":
        return [Hole()]
    if isinstance(node, ast.Name) and node.id in local:
        return template_of(local[node.id], {}, depth + 1)
    return None


def percent_names(node: ast.AST) -> list | dict:
    """The expressions a %-format fills its placeholders with, in order (a dict for %(key)s formats)."""
    if isinstance(node, ast.Tuple):
        return list(node.elts)
    if isinstance(node, ast.Dict):
        return {k.value: v for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant)}
    return [node]


def format_names(call: ast.Call) -> dict:
    """The expressions a `.format` call fills its fields with: by position (0, 1, ...) and by keyword."""
    names: dict = {i: arg for i, arg in enumerate(call.args)}
    names.update({kw.arg: kw.value for kw in call.keywords if kw.arg})
    return names


def _field_value(field: str, filled: list | dict, position: int) -> ast.AST | None:
    """The expression that fills one %- or {}-field (its key, its number, or its position among the fields)."""
    if isinstance(filled, list):
        return filled[position] if position < len(filled) else None
    key = field.strip("{}%()").split("!")[0].split(":")[0].split(".")[0].split("[")[0]
    if field.startswith("%("):
        key = field[2:field.index(")")]
    if key.isdigit():
        return filled.get(int(key))
    return filled.get(key) if key else filled.get(position)


def _split_literals(parts: list, pattern: re.Pattern[str], filled: list | dict | None = None,
                    braces: bool = False) -> list:
    out: list = []
    position = 0
    for part in parts:
        if is_hole(part):
            out.append(part)
            continue
        last = 0
        for match in pattern.finditer(part):
            text = match.group(0)
            if text in ("%%", "{{", "}}"):
                continue
            out.append(part[last:match.start()])
            value = _field_value(text, filled, position) if filled is not None else None
            out.append(_hole(value))
            position += 1
            last = match.end()
        out.append(part[last:])
    if braces:
        out = [p.replace("{{", "{").replace("}}", "}") if not is_hole(p) else p for p in out]
    else:
        out = [p.replace("%%", "%") if not is_hole(p) else p for p in out]
    return out


def normalise_parts(parts: list) -> list | None:
    """Merge neighbours, keep the first line of a multi-line message, drop templates with too little literal text.
    Placeholders stay Hole objects (two neighbours merge into one without a name)."""
    merged: list = []
    for part in parts:
        if is_hole(part):
            part = part if isinstance(part, Hole) else Hole()
            if not merged or not is_hole(merged[-1]):
                merged.append(part)
            else:
                merged[-1] = Hole()
        elif part:
            if merged and not is_hole(merged[-1]):
                merged[-1] += part
            else:
                merged.append(part)
    # A log line holds one line of the message: cut at the first newline that leaves enough text.
    cut: list = []
    for part in merged:
        if not is_hole(part) and "\n" in part:
            head = part.split("\n", 1)[0]
            if head:
                cut.append(head)
            if _literal_size(cut) >= MIN_LITERAL:
                break
            cut = [Hole()] if not cut else cut + [Hole()]
            tail = part.rsplit("\n", 1)[1]
            if tail:
                cut.append(tail)
            continue
        cut.append(part)
    while cut and not is_hole(cut[-1]) and not cut[-1].strip():
        cut.pop()
    if _literal_size(cut) < MIN_LITERAL:
        return None
    # Leading/trailing whitespace of the literals is unreliable once a logger formats the line.
    if cut and not is_hole(cut[0]):
        cut[0] = cut[0].lstrip()
    if cut and not is_hole(cut[-1]):
        cut[-1] = cut[-1].rstrip()
    return cut


def stored(parts: list) -> tuple[tuple, tuple]:
    """(parts with None for each placeholder, the placeholders' names) as the index stores them."""
    return (tuple(None if is_hole(p) else p for p in parts),
            tuple(p.name if isinstance(p, Hole) else None for p in parts if is_hole(p)))


def _literal_size(parts: list) -> int:
    return sum(sum(ch.isalnum() for ch in p) for p in parts if not is_hole(p))


# ------------------------------------------------------------------ walking one source file

def _short(condition: str) -> str:
    return condition if len(condition) <= MAX_CONDITION else condition[: MAX_CONDITION - 3] + "..."


class _Collector(ast.NodeVisitor):
    def __init__(self, path: str):
        self.path = path
        self.scope: list[tuple[str, str]] = []
        """('class' | 'def', name) of the definitions around the code being visited, outermost first."""
        self.locals: list[dict[str, ast.AST]] = [{}]
        self.found: list[tuple] = []
        self.guards: list[str | None] = []
        """The condition under which the code being visited runs: the innermost `if` around it, as source text."""

    def _function(self, node):
        self.scope.append(("def", node.name))
        assigned: dict[str, ast.AST] = {}
        for child in ast.walk(node):
            if isinstance(child, ast.Assign) and len(child.targets) == 1 and isinstance(child.targets[0], ast.Name):
                if template_of(child.value, {}) is not None:
                    assigned.setdefault(child.targets[0].id, child.value)
        self.locals.append(assigned)
        self.guards.append(None)  # a function's body runs under its caller's conditions, not its definer's
        self.generic_visit(node)
        self.guards.pop()
        self.locals.pop()
        self.scope.pop()

    def visit_If(self, node):
        self.visit(node.test)
        condition = ast.unparse(node.test)
        for branch, guard in ((node.body, condition), (node.orelse, f"not ({condition})")):
            self.guards.append(guard)
            for child in branch:
                self.visit(child)
            self.guards.pop()

    def visit_ExceptHandler(self, node):
        # a raise in an except clause is raised when that exception was: the clause is its condition
        caught = ast.unparse(node.type) if node.type is not None else "any exception"
        self.guards.append(f"except {caught}")
        for child in node.body:
            self.visit(child)
        self.guards.pop()

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node):
        self.scope.append(("class", node.name))
        self.generic_visit(node)
        self.scope.pop()

    def visit_Raise(self, node):
        exc = node.exc
        if isinstance(exc, ast.Call):
            name = _callee(exc.func)
            if name and exc.args:
                guard = self.guards[-1] if self.guards else None
                self._add("raise", name, exc.args[0], condition=_short(guard) if guard else None)
        self.generic_visit(node)

    def visit_Assert(self, node):
        # `assert test, "message"` raises AssertionError with the message when the test is false
        if node.msg is not None:
            self._add("raise", "AssertionError", node.msg, condition=_short(f"not ({ast.unparse(node.test)})"))
        self.generic_visit(node)

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in LOG_METHODS and node.args:
            owner = _callee(func.value) or ""
            if "log" in owner.lower():
                # logger.error("... %s ...", value): the logger fills the %-placeholders
                self._add(LOG_METHODS[func.attr], None, node.args[0],
                          percent=list(node.args[1:]) if len(node.args) > 1 else None)
            elif owner == "warnings":
                self._add("warning", None, node.args[0])
        self.generic_visit(node)

    def _add(self, kind: str, exc_type: str | None, message: ast.AST, percent: list | None = None,
             condition: str | None = None):
        parts = template_of(message, self.locals[-1])
        if parts is None:
            return
        if percent is not None:
            parts = _split_literals(parts, _PERCENT, percent)
        parts = normalise_parts(parts)
        if parts is None:
            return
        literal_parts, names = stored(parts)
        function = next((name for what, name in reversed(self.scope) if what == "def"), "<module>")
        owner = next((name for what, name in reversed(self.scope) if what == "class"), None)
        self.found.append((kind, exc_type, literal_parts, self.path, function, condition, owner,
                           names if any(names) else ()))


def _callee(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def templates_in_source(source: bytes, path: str) -> list[tuple]:
    """(kind, exception type, parts, path, function, condition, class, names) of every message in one file's source:
    condition is the `if` a raise is under, the `except` clause it is in or an assert's negated test, as source text
    (else None); class is the class around the function (else None); names are the source text of the expressions
    the message interpolates, one per placeholder (None where unknown; () when none is known). [] if it does not
    parse."""
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError):
        return []
    collector = _Collector(path)
    collector.visit(tree)
    return collector.found
