"""Execute a parsed template as Go's text/template does with Helm's options (missingkey=zero): dot and variables,
field chains, pipelines, if/with/range (lists, maps in key order, ints), define/template/include, and the
functions of `functions.py`. Each written piece of text keeps the template line it came from."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

from kvdoctor.scan.gotemplate import parse as p
from kvdoctor.scan.gotemplate.functions import MAX_GENERATED, FunctionFailed, builtin_functions
from kvdoctor.scan.gotemplate.sourced import Origin, SourcedStr, origin_of
from kvdoctor.scan.gotemplate.values import GoObject, go_text, truth, type_name

MAX_INCLUDE_DEPTH = 1000  # Helm's own limit on nested include/tpl calls


class TemplateError(Exception):
    """Executing a template failed as it would in Helm (a nil field chain, `required`, `fail`), or it uses a
    function or construct this engine does not have (`unknown` names it)."""

    def __init__(self, message: str, line: int | None = None, unknown: str | None = None):
        super().__init__(message)
        self.line = line
        self.unknown = unknown


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class Output:
    """Rendered text in pieces, each with the template (file, line) that wrote it."""

    def __init__(self) -> None:
        self.pieces: list[tuple[str, str, int, bool, Origin | None]] = []
        """(text, template file, line, literal, source): a literal piece is the template's own text, line for
        line; `source` is where a printed value was written (a values file's line), when known."""

    def write(self, text: str, template: str, line: int, literal: bool = False, source: Origin | None = None) -> None:
        if text:
            self.pieces.append((text, template, line, literal, source))

    def text(self) -> str:
        return "".join(piece[0] for piece in self.pieces)

    def value_sources(self) -> dict[int, list[tuple[Origin, str]]]:
        """1-based output line -> (origin, text) of each value printed there that remembers its origin."""
        found: dict[int, list[tuple[Origin, str]]] = {}
        line = 1
        for text, _, _, _, source in self.pieces:
            if source is not None:
                found.setdefault(line, []).append((source, text))
            line += text.count("\n")
        return found

    def line_origins(self) -> list[tuple[str, int]]:
        """For each line of text(), the (template file, line) that wrote its first character (an action's
        output, however many lines, is the action's line)."""
        origins: list[tuple[str, int]] = []
        at_line_start = True
        for text, template, line, literal, _ in self.pieces:
            for offset, part in enumerate(text.split("\n")):
                if offset:
                    at_line_start = True
                if at_line_start and (part or offset < text.count("\n")):
                    origins.append((template, line + offset if literal else line))
                    at_line_start = False
        return origins


class Renderer:
    """Templates by name (each file's body and every {{define}}), rendered over data with the given functions."""

    def __init__(self, functions: dict[str, Callable[..., Any]] | None = None):

        self.templates: dict[str, tuple[tuple[p.Node, ...], str]] = {}
        self.functions = builtin_functions(self)
        self.functions.update(functions or {})
        self.depth = 0

    def add(self, name: str, text: str) -> None:
        """Parse one file: its body is template `name`, its {{define}}s are added by their own names (a later
        file's define replaces an earlier one, as in Helm). Raises ParseError."""
        parsed = _parsed(text)
        self.templates[name] = (parsed.body, name)
        for defined, body in parsed.defines.items():
            self.templates[defined] = (body, name)

    def render(self, name: str, dot: Any) -> Output:
        """Execute template `name` with dot; raises TemplateError."""
        if name not in self.templates:
            raise TemplateError(f'no template "{name}" associated with template')
        self.depth += 1
        try:
            if self.depth > MAX_INCLUDE_DEPTH:
                raise TemplateError("rendering template has a nested reference name too deep")
            body, file = self.templates[name]
            out = Output()
            _State(self, file, out, {"$": dot}).walk(body, dot)
            return out
        finally:
            self.depth -= 1

    def render_text(self, source: str, dot: Any, name: str) -> str:
        """`tpl`: parse a string as a template (it sees every define) and execute it."""
        parsed = _parsed(source)
        saved = dict(self.templates)
        try:
            for defined, body in parsed.defines.items():
                self.templates[defined] = (body, name)
            self.templates[name] = (parsed.body, name)
            return self.render(name, dot).text()
        finally:
            self.templates = saved


@lru_cache(maxsize=1024)
def _parsed(text: str) -> p.Parsed:
    """A template's tree, parsed once per text (a chart is rendered once per values file; trees are not changed)."""
    return p.parse(text)


class _State:
    def __init__(self, renderer: Renderer, file: str, out: Output, variables: dict[str, Any]):
        self.renderer = renderer
        self.file = file
        self.out = out
        self.scopes: list[dict[str, Any]] = [variables]
        self.line = 0

    def walk(self, nodes: tuple[p.Node, ...], dot: Any) -> None:
        for node in nodes:
            self.line = node.line
            if isinstance(node, p.Text):
                self.out.write(node.text, self.file, node.line, literal=True)
            elif isinstance(node, p.Action):
                value = self.pipeline(node.pipe, dot)
                if not node.pipe.declare:
                    self.out.write(go_text(value), self.file, node.line, source=origin_of(value))
            elif isinstance(node, p.Branch):
                self.branch(node, dot)
            elif isinstance(node, p.Call):
                data = self.pipeline(node.pipe, dot) if node.pipe is not None else None
                inner = self.renderer.render(node.name, data)
                self.out.pieces += inner.pieces
            elif isinstance(node, p.LoopControl):
                raise _Break() if node.keyword == "break" else _Continue()

    def branch(self, node: p.Branch, dot: Any) -> None:
        self.scopes.append({})
        try:
            if node.keyword == "range":
                self.range(node, dot)
                return
            value = self.pipeline(node.pipe, dot)
            if truth(value):
                self.walk(node.body, value if node.keyword == "with" else dot)
            else:
                self.walk(node.orelse, dot)
        finally:
            self.scopes.pop()

    def range(self, node: p.Branch, dot: Any) -> None:
        pipe = node.pipe
        value = self.pipeline(p.Pipeline(pipe.commands), dot)
        if isinstance(value, GoObject) and value.type_name == "files":
            value = value.fields  # Helm's Files is map[string][]byte: .Files.Glob ranges over path and content
        if isinstance(value, dict):
            pairs = [(k, value[k]) for k in sorted(value, key=str)]
        elif isinstance(value, (list, tuple)):
            pairs = list(enumerate(value))
        elif isinstance(value, int) and not isinstance(value, bool):
            if value > MAX_GENERATED:
                raise TemplateError(f"range over {value}: more than kvdoctor generates", node.line)
            pairs = [(i, i) for i in range(value)]
        elif value is None:
            pairs = []
        else:
            raise TemplateError(f"range can't iterate over {go_text(value)}", node.line)
        if not pairs:
            self.walk(node.orelse, dot)
            return
        for key, item in pairs:
            if len(pipe.declare) == 1:
                self.scopes[-1][pipe.declare[0]] = item
            elif len(pipe.declare) == 2:
                self.scopes[-1][pipe.declare[0]] = key
                self.scopes[-1][pipe.declare[1]] = item
            try:
                self.walk(node.body, item)
            except _Break:
                break
            except _Continue:
                continue

    def pipeline(self, pipe: p.Pipeline, dot: Any) -> Any:
        value: Any = _NOTHING
        for command in pipe.commands:
            value = self.command(command, dot, value)
        if pipe.declare and not pipe.assign:
            self.scopes[-1][pipe.declare[0]] = value
        elif pipe.declare:
            scope = next((s for s in reversed(self.scopes) if pipe.declare[0] in s), None)
            if scope is None:
                raise TemplateError(f"undefined variable: {pipe.declare[0]}", self.line)
            scope[pipe.declare[0]] = value
        return value

    def command(self, command: p.Command, dot: Any, final: Any) -> Any:
        first = command.args[0]
        if isinstance(first, p.Function):
            return self.call(first.name, command.args[1:], dot, final)
        if len(command.args) > 1 or final is not _NOTHING:
            if isinstance(first, p.Field) and first.names:
                args = [self.operand(a, dot) for a in command.args[1:]] + ([] if final is _NOTHING else [final])
                return self.field(first, dot, args)
            if isinstance(first, p.Variable) and first.names:
                args = [self.operand(a, dot) for a in command.args[1:]] + ([] if final is _NOTHING else [final])
                return self.chain(self.variable(first.name), first.names, args)
            raise TemplateError(f"can't give argument to non-function {_describe(first)}", self.line)
        return self.operand(first, dot)

    def call(self, name: str, arg_nodes: tuple, dot: Any, final: Any) -> Any:
        if name in ("and", "or"):  # short-circuit: the first operand that decides, as Go 1.18+ does
            values = [lambda n=n: self.operand(n, dot) for n in arg_nodes] + \
                     ([] if final is _NOTHING else [lambda: final])  # fmt: skip
            if not values:
                raise TemplateError(f"wrong number of args for {name}: want at least 1 got 0", self.line)
            value = None
            for get in values:
                value = get()
                if truth(value) != (name == "and"):
                    return value
            return value
        function = self.renderer.functions.get(name)
        if function is None:
            raise TemplateError(f'function "{name}" not defined', self.line, unknown=f"function {name}")
        args = [self.operand(n, dot) for n in arg_nodes] + ([] if final is _NOTHING else [final])
        try:
            return _traced(function(*args), args)
        except FunctionFailed as exc:
            raise TemplateError(f"error calling {name}: {exc}", self.line) from None
        except TemplateError as exc:
            if exc.line is None:
                exc.line = self.line
            raise
        except (TypeError, ValueError, KeyError, IndexError, ZeroDivisionError, OverflowError, AttributeError) as exc:
            raise TemplateError(f"error calling {name}: {exc}", self.line) from None

    def operand(self, node: Any, dot: Any) -> Any:
        if isinstance(node, p.Literal):
            return node.value
        if isinstance(node, p.Field):
            return self.field(node, dot, [])
        if isinstance(node, p.Variable):
            return self.chain(self.variable(node.name), node.names, [], nil_safe=True)
        if isinstance(node, p.Pipeline):
            return self.pipeline(node, dot)
        if isinstance(node, p.Function):
            return self.call(node.name, (), dot, _NOTHING)
        raise TemplateError(f"can't evaluate {node!r}", self.line)

    def field(self, node: p.Field, dot: Any, args: list[Any]) -> Any:
        base = dot if node.base is None else self.operand(node.base, dot)
        return self.chain(base, node.names, args, nil_safe=node.base is not None)

    def variable(self, name: str) -> Any:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        raise TemplateError(f"undefined variable: {name}", self.line)

    def chain(self, value: Any, names: tuple[str, ...], args: list[Any], nil_safe: bool = False) -> Any:
        """Fields in turn. A nil from a variable or a (pipeline) is Go's invalid value, whose fields are nil: Helm's
        `((.Values.grafana).sidecar).label` idiom; a missing key inside one chain (.Values.a.b) is a nil pointer."""
        if value is None and nil_safe and names:
            return None
        for at, name in enumerate(names):
            last = at == len(names) - 1
            value = self.one_field(value, name, args if last else [])
        return value

    def one_field(self, receiver: Any, name: str, args: list[Any]) -> Any:
        if isinstance(receiver, GoObject):
            if name in receiver.methods:
                return receiver.methods[name](*args)
            if name in receiver.fields:
                if args:
                    raise TemplateError(f"{name} has arguments but cannot be invoked as function", self.line)
                return receiver.fields[name]
            raise TemplateError(f"can't evaluate field {name} in type {receiver.type_name}", self.line)
        if args:
            raise TemplateError(f"{name} is not a method but has arguments", self.line)
        if isinstance(receiver, dict):
            return receiver.get(name)  # missingkey=zero: a missing key is nil
        if receiver is None:
            raise TemplateError(f"nil pointer evaluating interface {{}}.{name}", self.line)
        raise TemplateError(f"can't evaluate field {name} in type {type_name(receiver)}", self.line)


def _traced(result: Any, args: list[Any]) -> Any:
    """A string a function made from a value that remembers its origin (quote, default, printf) remembers it too."""
    if not isinstance(result, str) or origin_of(result) is not None:
        return result
    for arg in args:
        origin = origin_of(arg)
        if origin is not None and (text := go_text(arg)) and text in result:
            return SourcedStr(result, origin)
    return result


class _Nothing:
    pass


_NOTHING = _Nothing()


def _describe(node: Any) -> str:
    if isinstance(node, p.Literal):
        return repr(node.value)
    if isinstance(node, p.Variable):
        return node.name
    if isinstance(node, p.Field):
        return "." + ".".join(node.names)
    return "pipeline"
