"""Message templates from Python source: every `raise X(<message>)` and logger/warnings call whose message is a
string, an f-string, a %-format, a `.format` call or a concatenation of those, as literal parts and WILD
placeholders (a message held in a local variable is followed to its assignment). No code is kept.
"""

from __future__ import annotations

import ast
import re

LOG_METHODS = {"error": "error", "exception": "error", "critical": "critical", "fatal": "critical",
               "warning": "warning", "warn": "warning", "error_once": "error", "warning_once": "warning"}
MIN_LITERAL = 12  # alphanumeric characters of literal text a template needs to be worth matching
WILD = None  # a placeholder in a template's parts list
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
                parts.append(WILD)
        return parts
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = template_of(node.left, local, depth + 1)
        right = template_of(node.right, local, depth + 1)
        if left is None and right is None:
            return None
        return (left or [WILD]) + (right or [WILD])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left = template_of(node.left, local, depth + 1)
        return _split_literals(left, _PERCENT) if left else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        base = template_of(node.func.value, local, depth + 1)
        return _split_literals(base, _FORMAT_FIELD, braces=True) if base else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join":
        return [WILD]
    if isinstance(node, ast.Name) and node.id in local:
        return template_of(local[node.id], {}, depth + 1)
    return None


def _split_literals(parts: list, pattern: re.Pattern[str], braces: bool = False) -> list:
    out: list = []
    for part in parts:
        if part is WILD:
            out.append(WILD)
            continue
        last = 0
        for match in pattern.finditer(part):
            text = match.group(0)
            if text in ("%%", "{{", "}}"):
                continue
            out.append(part[last:match.start()])
            out.append(WILD)
            last = match.end()
        out.append(part[last:])
    if braces:
        out = [p.replace("{{", "{").replace("}}", "}") if p is not WILD else p for p in out]
    else:
        out = [p.replace("%%", "%") if p is not WILD else p for p in out]
    return out


def normalise_parts(parts: list) -> list | None:
    """Merge neighbours, keep the first line of a multi-line message, drop templates with too little literal text."""
    merged: list = []
    for part in parts:
        if part is WILD:
            if not merged or merged[-1] is not WILD:
                merged.append(WILD)
        elif part:
            if merged and merged[-1] is not WILD:
                merged[-1] += part
            else:
                merged.append(part)
    # A log line holds one line of the message: cut at the first newline that leaves enough text.
    cut: list = []
    for part in merged:
        if part is not WILD and "\n" in part:
            head = part.split("\n", 1)[0]
            if head:
                cut.append(head)
            if _literal_size(cut) >= MIN_LITERAL:
                break
            cut = [WILD] if not cut else cut + [WILD]
            tail = part.rsplit("\n", 1)[1]
            if tail:
                cut.append(tail)
            continue
        cut.append(part)
    while cut and cut[-1] is not WILD and not cut[-1].strip():
        cut.pop()
    if _literal_size(cut) < MIN_LITERAL:
        return None
    # Leading/trailing whitespace of the literals is unreliable once a logger formats the line.
    if cut and cut[0] is not WILD:
        cut[0] = cut[0].lstrip()
    if cut and cut[-1] is not WILD:
        cut[-1] = cut[-1].rstrip()
    return cut


def _literal_size(parts: list) -> int:
    return sum(sum(ch.isalnum() for ch in p) for p in parts if p is not WILD)


# ------------------------------------------------------------------ walking one source file

class _Collector(ast.NodeVisitor):
    def __init__(self, path: str):
        self.path = path
        self.scope: list[str] = []
        self.locals: list[dict[str, ast.AST]] = [{}]
        self.found: list[tuple] = []
        self.guards: list[str | None] = []
        """The condition under which the code being visited runs: the innermost `if` around it, as source text."""

    def _function(self, node):
        self.scope.append(node.name)
        assigned: dict[str, ast.AST] = {}
        for child in ast.walk(node):
            if isinstance(child, ast.Assign) and len(child.targets) == 1 and isinstance(child.targets[0], ast.Name):
                if template_of(child.value, {}) is not None:
                    assigned.setdefault(child.targets[0].id, child.value)
            elif isinstance(child, ast.AugAssign) and isinstance(child.target, ast.Name):
                pass
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

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node):
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    def visit_Raise(self, node):
        exc = node.exc
        if isinstance(exc, ast.Call):
            name = _callee(exc.func)
            if name and exc.args:
                guard = self.guards[-1] if self.guards else None
                if guard and len(guard) > MAX_CONDITION:
                    guard = guard[: MAX_CONDITION - 3] + "..."
                self._add("raise", name, exc.args[0], condition=guard)
        self.generic_visit(node)

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in LOG_METHODS and node.args:
            owner = _callee(func.value) or ""
            if "log" in owner.lower():
                # logger.error("... %s ...", value): the logger fills the %-placeholders
                self._add(LOG_METHODS[func.attr], None, node.args[0], percent=len(node.args) > 1)
            elif owner == "warnings":
                self._add("warning", None, node.args[0])
        self.generic_visit(node)

    def _add(self, kind: str, exc_type: str | None, message: ast.AST, percent: bool = False,
             condition: str | None = None):
        parts = template_of(message, self.locals[-1])
        if parts is None:
            return
        if percent:
            parts = _split_literals(parts, _PERCENT)
        parts = normalise_parts(parts)
        if parts is None:
            return
        function = self.scope[-1] if self.scope else "<module>"
        self.found.append((kind, exc_type, tuple(parts), self.path, function, condition))


def _callee(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def templates_in_source(source: bytes, path: str) -> list[tuple]:
    """(kind, exception type, parts, path, function, condition) of every message in one file's source (condition:
    the `if` a raise is under, as source text, else None); [] if it does not parse."""
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError):
        return []
    collector = _Collector(path)
    collector.visit(tree)
    return collector.found
