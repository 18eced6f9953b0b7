"""A reader of the Nix language subset NixOS modules write their containers in: attribute sets (dotted keys, `rec`,
`inherit`), lists, strings with `${...}`, `let ... in`, `with`, `if`, functions and their application, `++`, `+`, `//`.
Values are evaluated lazily without Nixpkgs: `lib` / `builtins` functions a container definition uses (toString,
mkDefault, mkIf, mkMerge, optional(s), concatStringsSep, escapeShellArgs) are modelled; anything else is Unknown, shown
as `${expression}` as an unset shell variable is. `config.X` reads the module's own `options.X` defaults (mkOption).

No Nix library for Python is kept up to date (tree-sitter-nix needs a compiled grammar), so this reader is small and
hand-written; it never runs the Nix evaluator and never reads a file the expression imports."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

MAX_DEPTH = 200


class NixError(ValueError):
    """Text this reader cannot parse; the message names the line."""


@dataclass(frozen=True)
class Unknown:
    """A value not known here (an argument, a function of Nixpkgs, an import): its source text."""

    text: str


@dataclass(frozen=True)
class Located:
    """A string, number or bool with the 1-based line of the expression it came from."""

    value: Any
    line: int


TOKEN = re.compile(r"""
    (?P<space>\s+|\#[^\n]*|/\*.*?\*/)
  | (?P<indented>'')
  | (?P<string>")
  | (?P<interp>\$\{)
  | (?P<uri>[a-zA-Z][a-zA-Z0-9+.-]*://[^\s;]+)
  | (?P<path>(?:\.{0,2}|~)(?:/[\w.+-]+)+/?|<[\w./+-]+>)
  | (?P<number>\d+(?:\.\d+)?(?![\w'-]))
  | (?P<ident>[A-Za-z_][\w'-]*)
  | (?P<op>\.\.\.|\+\+|//|==|!=|<=|>=|&&|\|\||->|[{}\[\]();:=.,@?!<>+*/-])
""", re.VERBOSE | re.DOTALL)  # fmt: skip
KEYWORDS = {"let", "in", "rec", "with", "inherit", "if", "then", "else", "assert", "or"}


@dataclass
class Tok:
    kind: str
    text: str
    line: int
    parts: list = field(default_factory=list)
    """For a string: its pieces, each a str or a parsed ${...} expression."""


def tokens(text: str) -> list[Tok]:
    out: list[Tok] = []
    at, line = 0, 1
    while at < len(text):
        match = TOKEN.match(text, at)
        if match is None:
            raise NixError(f"line {line}: unexpected {text[at]!r}")
        kind = match.lastgroup
        if kind in ("string", "indented"):
            parts, end = _string(text, match.end(), kind == "indented", line)
            out.append(Tok("str", text[at:end], line, parts))
            line += text.count("\n", at, end)
            at = end
            continue
        if kind != "space":
            out.append(Tok(kind, match.group(), line))
        line += match.group().count("\n")
        at = match.end()
    out.append(Tok("end", "", line))
    return out


def _string(text: str, at: int, indented: bool, line: int) -> tuple[list, int]:
    """The pieces of a string whose opening quote ends at `at` (on `line`), and the offset after its closing
    quote."""
    start = at
    parts: list = []
    buffer: list[str] = []
    while at < len(text):
        if indented and text.startswith("''", at):
            if text.startswith("'''", at):
                buffer.append("''")
                at += 3
                continue
            if text.startswith("''$", at) or text.startswith("''\\", at):
                buffer.append(text[at + 2] if text[at + 2] == "$" else _escape(text[at + 3]))
                at += 3 + (text[at + 2] == "\\")
                continue
            parts.append("".join(buffer))
            return _dedented(parts), at + 2
        if not indented and text[at] == '"':
            parts.append("".join(buffer))
            return parts, at + 1
        if not indented and text[at] == "\\":
            buffer.append(_escape(text[at + 1]))
            at += 2
            continue
        if text.startswith("${", at):
            end = _closing_brace(text, at + 2, line)
            parts += ["".join(buffer), Parser(tokens(text[at + 2 : end]), line + text.count("\n", start, at)).expr()]
            buffer = []
            at = end + 1
            continue
        buffer.append(text[at])
        at += 1
    raise NixError(f"line {line}: a string is not closed")


def _escape(char: str) -> str:
    return {"n": "\n", "t": "\t", "r": "\r"}.get(char, char)


def _closing_brace(text: str, at: int, line: int) -> int:
    depth = 1
    while at < len(text):
        char = text[at]
        if char == '"':  # a string inside the interpolation
            at = _string(text, at + 1, False, line)[1]
            continue
        depth += char == "{"
        depth -= char == "}"
        if depth == 0:
            return at
        at += 1
    raise NixError(f"line {line}: ${{ is not closed")


def _dedented(parts: list) -> list:
    """An indented string's pieces without the common indentation of its lines and its first empty line."""
    literal = "".join(p if isinstance(p, str) else "x" for p in parts)
    lines = [ln for ln in literal.split("\n") if ln.strip()]
    indent = min((len(ln) - len(ln.lstrip(" ")) for ln in lines), default=0)
    out = []
    for piece in parts:
        if isinstance(piece, str):
            piece = re.sub(r"\n {0,%d}" % indent, "\n", piece)
        out.append(piece)
    if out and isinstance(out[0], str):
        out[0] = re.sub(r"^ *\n", "", out[0]) if "\n" in out[0] else out[0][indent:]
    return out


# -- syntax: tuples ("kind", line, ...) ------------------------------------------------------------------------------


class Parser:
    def __init__(self, toks: list[Tok], first_line: int = 1):
        """``first_line``: the file's line the text starts on (a ${...} inside a string)."""
        self.toks, self.at = toks, 0
        for tok in toks:
            tok.line += first_line - 1

    def peek(self, ahead: int = 0) -> Tok:
        return self.toks[min(self.at + ahead, len(self.toks) - 1)]

    def take(self, text: str | None = None) -> Tok:
        tok = self.peek()
        if text is not None and tok.text != text:
            raise NixError(f"line {tok.line}: expected {text!r}, found {tok.text!r}")
        self.at += 1
        return tok

    def expr(self, depth: int = 0):
        if depth > MAX_DEPTH:
            raise NixError(f"line {self.peek().line}: nested too deeply")
        tok = self.peek()
        if tok.text == "let" and self.peek(1).text != "{":
            self.take()
            bindings = self.bindings("in", depth)
            self.take("in")
            return ("let", tok.line, bindings, self.expr(depth + 1))
        if tok.text == "with":
            self.take()
            scope = self.expr(depth + 1)
            self.take(";")
            return ("with", tok.line, scope, self.expr(depth + 1))
        if tok.text == "assert":
            self.take()
            self.expr(depth + 1)
            self.take(";")
            return self.expr(depth + 1)
        if tok.text == "if":
            self.take()
            condition = self.expr(depth + 1)
            self.take("then")
            then = self.expr(depth + 1)
            self.take("else")
            return ("if", tok.line, condition, then, self.expr(depth + 1))
        if tok.kind == "ident" and tok.text not in KEYWORDS and self.peek(1).text in (":", "@"):
            self.take()
            if self.peek().text == "@":
                self.take()
                self.formals(depth)
            self.take(":")
            return ("lambda", tok.line, [tok.text], self.expr(depth + 1))
        if tok.text == "{" and self._formals_ahead():
            names = self.formals(depth)
            if self.peek().text == "@":
                self.take()
                names.append(self.take().text)
            self.take(":")
            return ("lambda", tok.line, names, self.expr(depth + 1))
        return self.operators(depth)

    def _formals_ahead(self) -> bool:
        """Whether the `{` at hand opens a function's formals (`{ config, lib, ... }:`), not an attribute set."""
        depth, ahead = 0, 0
        while True:
            tok = self.peek(ahead)
            if tok.kind == "end":
                return False
            depth += tok.text == "{"
            depth -= tok.text == "}"
            if depth == 0:
                return self.peek(ahead + 1).text in (":", "@")
            if depth == 1 and tok.text in ("=", ";") and ahead > 0:
                return False
            ahead += 1

    def formals(self, depth: int) -> list[str]:
        self.take("{")
        names = []
        while self.peek().text != "}":
            tok = self.take()
            if tok.kind == "ident":
                names.append(tok.text)
                if self.peek().text == "?":
                    self.take()
                    self.expr(depth + 1)
            if self.peek().text == ",":
                self.take()
        self.take("}")
        return names

    def operators(self, depth: int):
        operands = [self.application(depth)]
        ops: list[str] = []
        while self.peek().kind == "op" and self.peek().text in ("++", "+", "//", "-", "*", "/", "==", "!=", "&&", "||",
                                                                 "->", "<", ">", "<=", ">=", "?"):  # fmt: skip
            op = self.take().text
            if op == "?":  # `attrs ? name`: a has-attribute test
                operands[-1] = ("has", operands[-1][1], operands[-1], self.attrpath(depth))
                continue
            ops.append(op)
            operands.append(self.application(depth))
        if not ops:
            return operands[0]
        return ("ops", operands[0][1], operands, ops)

    def application(self, depth: int):
        if self.peek().text == "!":
            tok = self.take()
            return ("not", tok.line, self.application(depth))
        if self.peek().text == "-" and self.peek(1).kind == "number":
            self.take()
            tok = self.take()
            return ("lit", tok.line, -float(tok.text) if "." in tok.text else -int(tok.text))
        node = self.select(depth)
        while self._starts_operand():
            node = ("apply", node[1], node, self.select(depth))
        return node

    def _starts_operand(self) -> bool:
        tok = self.peek()
        return (tok.kind in ("str", "number", "path", "uri") or tok.text in ("(", "[", "{", "rec")
                or (tok.kind == "ident" and tok.text not in KEYWORDS - {"rec"}))  # fmt: skip

    def select(self, depth: int):
        node = self.primary(depth)
        if self.peek().text == "." and self.peek(1).text != ".":
            self.take()
            path = self.attrpath(depth)
            fallback = None
            if self.peek().text == "or":
                self.take()
                fallback = self.select(depth)
            node = ("select", node[1], node, path, fallback)
        return node

    def attrpath(self, depth: int) -> list:
        path = [self.attrname(depth)]
        while self.peek().text == ".":
            self.take()
            path.append(self.attrname(depth))
        return path

    def attrname(self, depth: int):
        tok = self.take()
        if tok.kind == "ident":
            return tok.text
        if tok.kind == "str":
            return ("str", tok.line, tok.parts)
        if tok.kind == "interp":
            inner = self.expr(depth + 1)
            self.take("}")
            return inner
        raise NixError(f"line {tok.line}: expected an attribute name, found {tok.text!r}")

    def primary(self, depth: int):
        tok = self.take()
        if tok.kind == "str":
            return ("str", tok.line, tok.parts)
        if tok.kind == "number":
            return ("lit", tok.line, float(tok.text) if "." in tok.text else int(tok.text))
        if tok.kind in ("path", "uri"):
            return ("lit", tok.line, tok.text)
        if tok.text == "(":
            inner = self.expr(depth + 1)
            self.take(")")
            return inner
        if tok.text == "[":
            items = []
            while self.peek().text != "]":
                if self.peek().kind == "end":
                    raise NixError(f"line {tok.line}: a list is not closed")
                items.append(self.select(depth + 1))
            self.take("]")
            return ("list", tok.line, items)
        if tok.text == "rec" or tok.text == "{" or (tok.text == "let" and self.peek().text == "{"):
            if tok.text != "{":
                self.take("{")
            bindings = self.bindings("}", depth)
            self.take("}")
            return ("attrs", tok.line, bindings, tok.text == "rec")
        if tok.kind == "ident":
            return ("var", tok.line, tok.text)
        raise NixError(f"line {tok.line}: unexpected {tok.text!r}")

    def bindings(self, closing: str, depth: int) -> list:
        out = []
        while self.peek().text != closing:
            if self.peek().kind == "end":
                raise NixError(f"line {self.peek().line}: expected {closing!r}")
            if self.peek().text == "inherit":
                line = self.take().line
                source = None
                if self.peek().text == "(":
                    self.take()
                    source = self.expr(depth + 1)
                    self.take(")")
                while self.peek().text != ";":
                    name = self.attrname(depth)
                    out.append(("inherit", line, name, source))
                self.take(";")
                continue
            path = self.attrpath(depth)
            self.take("=")
            out.append(("bind", self.peek().line, path, self.expr(depth + 1)))
            self.take(";")
        return out


def parse(text: str):
    parser = Parser(tokens(text))
    node = parser.expr()
    if parser.peek().kind != "end":
        raise NixError(f"line {parser.peek().line}: unexpected {parser.peek().text!r}")
    return node


# -- evaluation -------------------------------------------------------------------------------------------------------


class Thunk:
    __slots__ = ("node", "env", "value", "busy")

    def __init__(self, node, env):
        self.node, self.env, self.value, self.busy = node, env, None, False

    def force(self, evaluator: "Evaluator"):
        if self.value is None:
            if self.busy:  # infinite recursion in the source: unknown here
                return Unknown("<recursion>")
            self.busy = True
            self.value = evaluator.eval(self.node, self.env)
            self.busy = False
        return self.value


@dataclass
class Lambda:
    names: list
    body: Any
    env: dict
    builtin: Any = None


class Evaluator:
    """Evaluates a parsed expression; `config` reads the option defaults the expression declares."""

    def __init__(self, root=None, settings: dict | None = None):
        self.steps = 0
        self.options: dict = {}
        if root is not None:
            self.options = _option_defaults(root)
        self.settings = settings or {}
        """What other modules of the configuration set (services.vllm.model = ...): over the option defaults."""

    def eval(self, node, env: dict, depth: int = 0):
        self.steps += 1
        if self.steps > 200_000 or depth > MAX_DEPTH:
            return Unknown("<too deep>")
        kind, line = node[0], node[1]
        if kind == "lit":
            return Located(node[2], line)
        if kind == "str":
            return self._string(node, env, depth)
        if kind == "list":
            return [Thunk(item, env) for item in node[2]]
        if kind == "attrs":
            return self._attrs(node[2], env, node[3])
        if kind == "var":
            return self._variable(node[2], env, line)
        if kind == "select":
            return self._select(node, env, depth)
        if kind == "let":
            scope = dict(env)
            scope.update(self._attrs(node[2], scope, True, into=scope))
            return self.eval(node[3], scope, depth + 1)
        if kind == "with":
            scope_value = self.eval(node[2], env, depth + 1)
            scope = dict(env)
            if isinstance(scope_value, dict):
                for name, value in scope_value.items():
                    scope.setdefault(name, value)
            return self.eval(node[3], scope, depth + 1)
        if kind == "if":
            condition = self.value(self.eval(node[2], env, depth + 1))
            if isinstance(condition, bool):
                return self.eval(node[3] if condition else node[4], env, depth + 1)
            return Unknown(f"if {_text(node[2])}")
        if kind == "lambda":
            return Lambda(node[2], node[3], env)
        if kind == "apply":
            return self._apply(self.eval(node[2], env, depth + 1), Thunk(node[3], env), node, depth)
        if kind == "ops":
            return self._operators(node, env, depth)
        if kind == "not":
            inner = self.value(self.eval(node[2], env, depth + 1))
            return Located(not inner, line) if isinstance(inner, bool) else Unknown("!" + _text(node[2]))
        if kind == "has":
            target = self.eval(node[2], env, depth + 1)
            return Located(isinstance(target, dict) and node[3][0] in target, line) if isinstance(node[3][0], str) \
                else Unknown("?")
        return Unknown(_text(node))

    def force(self, value):
        while isinstance(value, Thunk):
            value = value.force(self)
        return value

    def value(self, value):
        """The plain Python value (str, int, bool, list, dict) of a Located, or the value itself."""
        value = self.force(value)
        return value.value if isinstance(value, Located) else value

    def _string(self, node, env, depth):
        out = []
        for piece in node[2]:
            if isinstance(piece, str):
                out.append(piece)
                continue
            value = self.force(self.eval(piece, env, depth + 1))
            text = self.as_text(value)
            out.append(text if text is not None else "${" + _text(piece) + "}")
        return Located("".join(out), node[1])

    def as_text(self, value) -> str | None:
        value = self.force(value)
        if isinstance(value, Located):
            if isinstance(value.value, bool):
                return "1" if value.value else ""
            return str(value.value)
        return None

    def _attrs(self, bindings, env, recursive, into=None) -> dict:
        """The set's bindings as thunks; a `rec` set's (and a `let`'s, whose scope is ``into``) see each other."""
        out: dict = {}
        scope = into if into is not None else (dict(env) if recursive else env)
        for binding in bindings:
            if binding[0] == "inherit":
                name = binding[2] if isinstance(binding[2], str) else None
                if name is None:
                    continue
                if binding[3] is None:
                    out[name] = env.get(name, Unknown(name))
                else:
                    out[name] = Thunk(("select", binding[1], binding[3], [name], None), env)
                continue
            path = [p if isinstance(p, str) else self.as_text(self.eval(p, env)) for p in binding[2]]
            if None in path:
                continue
            _assign(out, path, Thunk(binding[3], scope), self)
        if recursive and into is None:
            scope.update(out)
        return out

    def _variable(self, name, env, line):
        if name in env:
            return self.force(env[name])
        if name in ("true", "false"):
            return Located(name == "true", line)
        if name == "null":
            return Located(None, line)
        if name in BUILTINS:
            return Lambda([], None, {}, builtin=name)
        if name in ("lib", "builtins", "pkgs", "config"):
            return Unknown(name)
        return Unknown(name)

    def _select(self, node, env, depth):
        base_node, path, fallback = node[2], node[3], node[4]
        target = self.eval(base_node, env, depth + 1)
        names = [p if isinstance(p, str) else self.as_text(self.eval(p, env)) for p in path]
        if isinstance(target, Unknown) and target.text in ("lib", "builtins", "lib.strings", "lib.lists") and names \
                and names[-1] in BUILTINS:
            return Lambda([], None, {}, builtin=names[-1])
        if isinstance(target, Unknown) and target.text == "config" and None not in names:
            found = self._configured(names)
            if found is not None:
                return found
        for name in names:
            target = self.force(target)
            if isinstance(target, dict) and name in target:
                target = target[name]
                continue
            if fallback is not None:
                return self.eval(fallback, env, depth + 1)
            return Unknown(_text(node))
        return self.force(target)

    def _configured(self, names: list[str]):
        """config.X: what another module sets over this module's option default, merged key by key for a set."""
        default, setting = _lookup(self.options, names), _lookup(self.settings, names)
        default = self.force(default) if default is not None else None
        setting = self.force(setting) if setting is not None else None
        if isinstance(default, dict) and isinstance(setting, dict):
            return {**default, **setting}
        return setting if setting is not None else default

    def _apply(self, function, argument: Thunk, node, depth):
        function = self.force(function)
        if isinstance(function, Lambda) and function.builtin is not None:
            return _builtin(self, function, argument, node)
        if isinstance(function, Lambda):
            scope = dict(function.env)
            if len(function.names) == 1:
                scope[function.names[0]] = argument
            else:  # `{ a, b, ... }:` applied to an attribute set
                given = self.force(argument)
                for name in function.names:
                    scope[name] = given.get(name, Unknown(name)) if isinstance(given, dict) else Unknown(name)
            return self.eval(function.body, scope, depth + 1)
        return Unknown(_text(node))

    def _operators(self, node, env, depth):
        values = [self.force(self.eval(operand, env, depth + 1)) for operand in node[2]]
        result = values[0]
        for op, right in zip(node[3], values[1:]):
            if op == "++" and (isinstance(result, list) or isinstance(right, list)):
                result = _as_list(result) + _as_list(right)  # an unknown part is one unknown item, the rest kept
            elif op == "//" and isinstance(result, dict) and isinstance(right, dict):
                result = {**result, **right}
            elif op == "+" and isinstance(result, Located) and isinstance(right, Located) \
                    and isinstance(result.value, str) and isinstance(right.value, str):
                result = Located(result.value + right.value, result.line)
            elif op == "+" and isinstance(result, Located) and isinstance(right, Located) \
                    and isinstance(result.value, (int, float)) and isinstance(right.value, (int, float)):
                result = Located(result.value + right.value, result.line)
            elif op in ("==", "!=") and isinstance(result, Located) and isinstance(right, Located):
                result = Located((result.value == right.value) == (op == "=="), result.line)
            elif op in ("&&", "||") and isinstance(result, Located) and isinstance(right, Located):
                result = Located(bool(result.value and right.value) if op == "&&" else bool(result.value or right.value),
                                 result.line)  # fmt: skip
            else:
                return Unknown(_text(node))
        return result


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def _assign(out: dict, path: list[str], thunk: Thunk, evaluator: Evaluator) -> None:
    """`a.b.c = v;`: nested sets, merged with the other bindings under `a` (a set written twice merges too)."""
    for name in path[:-1]:
        existing = out.get(name)
        if isinstance(existing, Thunk):
            existing = evaluator.force(existing)
        if not isinstance(existing, dict):
            existing = {}
        out[name] = existing = dict(existing)
        out = existing
    name = path[-1]
    if name in out:
        old, new = evaluator.force(out[name]), evaluator.force(thunk)
        if isinstance(old, dict) and isinstance(new, dict):
            out[name] = {**old, **new}
            return
    out[name] = thunk


def _lookup(tree: dict, names: list[str]):
    for name in names:
        if not isinstance(tree, dict) or name not in tree:
            return None
        tree = tree[name]
    return tree


BUILTINS = {"toString", "mkDefault", "mkForce", "mkOverride", "mkIf", "mkMerge", "optional", "optionals",
            "optionalString", "optionalAttrs", "concatStringsSep", "escapeShellArgs", "escapeShellArg", "mkOption",
            "mkEnableOption", "attrValues", "concatLists", "flatten", "mkBefore", "mkAfter", "map", "mapAttrsToList",
            "concatMap"}  # fmt: skip
ARITY = {"mkOverride": 2, "mkIf": 2, "optional": 2, "optionals": 2, "optionalString": 2, "optionalAttrs": 2,
         "concatStringsSep": 2, "map": 2, "mapAttrsToList": 2, "concatMap": 2}  # fmt: skip


def _builtin(evaluator: Evaluator, function: Lambda, argument: Thunk, node):
    """A modelled lib / builtins function applied to one more argument (curried)."""
    args = list(function.names) + [argument]
    name = function.builtin
    if len(args) < ARITY.get(name, 1):
        return Lambda(args, None, {}, builtin=name)
    last = evaluator.force(args[-1])
    if name in ("mkDefault", "mkForce", "mkOverride", "mkBefore", "mkAfter"):
        return last
    if name == "toString":
        text = evaluator.as_text(last)
        if text is None and isinstance(last, list):
            parts = [evaluator.as_text(item) for item in last]
            text = " ".join(parts) if None not in parts else None
        return Located(text, node[1]) if text is not None else Unknown(_text(node))
    if name in ("map", "concatMap", "mapAttrsToList"):
        mapped = _mapped(evaluator, evaluator.force(args[0]), last, name, node)
        if mapped is None:
            return Unknown(_text(node))
        return [inner for item in mapped for inner in _as_list(evaluator.force(item))] if name == "concatMap" else mapped
    if name in ("mkIf", "optional", "optionals", "optionalString", "optionalAttrs"):
        condition = evaluator.value(args[0])
        if not isinstance(condition, bool):
            return last if name == "mkIf" else Unknown(_text(node))  # mkIf: the module's own switch, read as set
        if name == "mkIf":
            return last if condition else {}
        if name == "optional":
            return [args[-1]] if condition else []
        if name == "optionalString":
            return last if condition else Located("", node[1])
        if name == "optionalAttrs":
            return last if condition else {}
        return last if condition else []
    if name == "mkMerge" and isinstance(last, list):
        merged: dict = {}
        for item in last:
            item = evaluator.force(item)
            if isinstance(item, dict):
                for key, value in item.items():
                    _assign(merged, [key], value if isinstance(value, Thunk) else _const(value), evaluator)
        return merged
    if name in ("concatStringsSep",) and isinstance(last, list):
        separator = evaluator.as_text(args[0])
        parts = [evaluator.as_text(item) for item in last]
        if separator is None or None in parts:
            return Unknown(_text(node))
        return Located(separator.join(parts), node[1])
    if name in ("escapeShellArgs",) and isinstance(last, list):
        import shlex

        parts = [evaluator.as_text(item) for item in last]
        return Located(" ".join(shlex.quote(p) for p in parts), node[1]) if None not in parts else Unknown(_text(node))
    if name == "escapeShellArg":
        text = evaluator.as_text(last)
        import shlex

        return Located(shlex.quote(text), node[1]) if text is not None else Unknown(_text(node))
    if name in ("concatLists", "flatten") and isinstance(last, list):
        return [inner for item in last for inner in (evaluator.force(item) if isinstance(evaluator.force(item), list)
                                                     else [item])]  # fmt: skip
    if name == "attrValues" and isinstance(last, dict):
        return [last[key] for key in sorted(last)]
    if name in ("mkOption", "mkEnableOption"):
        return Unknown("an option")
    return Unknown(_text(node))


def _mapped(evaluator: Evaluator, function, collection, name: str, node) -> list | None:
    """`map f list`, `concatMap f list`, `lib.mapAttrsToList (name: value: ...) attrs`, applied item by item."""
    if not isinstance(function, Lambda):
        return None
    if name == "mapAttrsToList":
        if not isinstance(collection, dict):
            return None
        out = []
        for key in sorted(collection):
            partial = evaluator._apply(function, _const(Located(key, node[1])), node, 1)
            out.append(evaluator._apply(partial, collection[key] if isinstance(collection[key], Thunk)
                                        else _const(collection[key]), node, 1))  # fmt: skip
        return out
    if not isinstance(collection, list):
        return None
    return [evaluator._apply(function, item if isinstance(item, Thunk) else _const(item), node, 1) for item in collection]


def _const(value):
    thunk = Thunk(("lit", 0, None), {})
    thunk.value = value
    return thunk


def _option_defaults(root) -> dict:
    """options.X.Y = mkOption { default = D; } anywhere in the expression -> {X: {Y: D-node thunk}} (evaluated
    lazily in an empty scope plus the module's let bindings where the option sits)."""
    found: dict = {}
    stack = [(root, {}, [])]
    while stack:
        node, lets, path = stack.pop()
        if not isinstance(node, tuple) or not node:
            continue
        kind = node[0]
        if kind == "let":
            stack.append((node[3], lets | {b[2][0]: b for b in node[2] if b[0] == "bind" and len(b[2]) == 1
                                             and isinstance(b[2][0], str)}, path))  # fmt: skip
            continue
        if kind == "attrs":
            for binding in node[2]:
                if binding[0] != "bind" or not all(isinstance(p, str) for p in binding[2]):
                    continue
                names = path + binding[2]
                if names[:1] == ["options"] or (path and path[0] == "options"):
                    default = _mkoption_default(binding[3])
                    if default is not None:
                        _put(found, names[1:], default)
                        continue
                stack.append((binding[3], lets, names))
            continue
        if kind == "lambda":  # a module function's body is a module: its options are at the top again
            stack.append((node[3], lets, []))
        elif kind in ("apply", "with"):
            stack.append((node[3], lets, path))
            stack.append((node[2], lets, path))
    return found


def _mkoption_default(node):
    """The `default` of `lib.mkOption { ... }` / `mkOption { ... }`, or None."""
    if not (isinstance(node, tuple) and node[0] == "apply"):
        return None
    function, argument = node[2], node[3]
    name = function[2] if function[0] == "var" else (function[3][-1] if function[0] == "select" else None)
    if name == "mkEnableOption":
        return _const(Unknown("enable"))  # the module's own switch: set by the host, so read as on
    if name != "mkOption" or argument[0] != "attrs":
        return None
    default = next((b[3] for b in argument[2] if b[0] == "bind" and b[2] == ["default"]), None)
    return Thunk(default, {}) if default is not None else None


def _put(tree: dict, names: list[str], value) -> None:
    for name in names[:-1]:
        tree = tree.setdefault(name, {})
        if not isinstance(tree, dict):
            return
    if names:
        tree[names[-1]] = value


def _text(node) -> str:
    """A short source-like text of an expression, for Unknown values."""
    if not isinstance(node, tuple):
        return str(node)
    kind = node[0]
    if kind == "var":
        return node[2]
    if kind == "select":
        return _text(node[2]) + "." + ".".join(p if isinstance(p, str) else "?" for p in node[3])
    if kind == "apply":
        return f"{_text(node[2])} {_text(node[3])}"
    if kind == "lit":
        return str(node[2])
    if kind == "str":
        return '"' + "".join(p if isinstance(p, str) else "${" + _text(p) + "}" for p in node[2]) + '"'
    return kind
