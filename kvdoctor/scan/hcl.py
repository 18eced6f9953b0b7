"""HCL (HashiCorp Configuration Language: Nomad job files, Terraform) -> YAML node trees that keep every value's
line, so that scan's readers walk them as they walk YAML (scan/nodes.py). Hand-written rather than python-hcl2: that
library gives no line for a value, and refuses the templated job files real repositories hold (`args = ${VLLM_ARGS}`,
filled in by a launcher), which this reader keeps as a value unknown here.

An attribute `name = value` is a mapping key; a block `type "label" ... { body }` is a key `type` whose value is the
body's mapping with its labels under LABELS (a block type may repeat). Strings, numbers, booleans, null, lists and
objects are literals; any other expression (`var.model`, `file("x")`, `a ? b : c`, a bare `${X}`) is the string
`${expression}`, a variable unknown here; `${...}` inside a string stays as written."""

from __future__ import annotations

import bisect
import re

import yaml

from kvdoctor.base.errors import KvdoctorError
from kvdoctor.scan import nodes

REFERENCE = re.compile(r"\$\{((?:var|local)\.[A-Za-z_][\w-]*)\}")
"""A Terraform `${var.x}` / `${local.x}` inside a string (the reference without `${}` is group 1)."""
BLOCK_TAG = "tag:hcl,block"
"""The tag of a block's body (an attribute's object literal is a plain YAML map): Terraform's list blocks differ."""
LABELS = "__labels__"
"""The key under which a block's labels (`task "vllm"` -> ["vllm"]) are kept in its body's mapping."""
STR, INT, FLOAT, BOOL, NULL = (f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null"))
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")
NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
HEREDOC = re.compile(r"<<(-?)([A-Za-z_][A-Za-z0-9_]*)[ \t]*\r?\n")
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}
MAX_DEPTH = 200
CLOSERS = {"(": ")", "[": "]", "{": "}"}
PASSING_FUNCTIONS = frozenset({"tostring", "tonumber", "tolist", "compact", "concat"})
"""Terraform functions whose value is their argument's (a type conversion, a list with its empty strings dropped) or
their lists joined: read through, so that `args = compact(["--model", var.model_id])` is still the container's args."""


class HclError(KvdoctorError):
    """HCL that cannot be read; the message names the line."""


PACK_TEMPLATE = re.compile(r"\[\[-?\s*(?:\.|template\b|range\b|if\b|end\b|with\b|define\b|include\b|\$)")
"""A Nomad Pack / Levant template action (`[[ .vllm.model ]]`, `[[ template "job_name" . ]]`): not HCL until rendered."""


def parse(text: str, name: str = "<hcl>") -> yaml.MappingNode:
    """The file's body as a mapping node; raises HclError with the line of the problem (a Nomad Pack or Levant
    template that does not parse is named as one, with how to render it)."""
    try:
        return _Parser(text, name).document()
    except HclError:
        action = PACK_TEMPLATE.search(text)
        if action is None:
            raise
        line = text.count("\n", 0, action.start()) + 1
        raise HclError(f"{name}:{line}: Nomad Pack / Levant template syntax ([[ ]]), not HCL yet",
                       "render it first: nomad-pack render PACK -o DIR (or levant render), then kvdoctor scan DIR") from None


def blocks(body: yaml.Node | None, block_type: str) -> list[tuple[list[str], yaml.Node]]:
    """Each block of a type in a body: (its labels, its body)."""
    return [([nodes.text(label) or "" for label in nodes.items(nodes.get(value, LABELS))], value)
            for key, _, value in nodes.pairs(body) if key == block_type and nodes.is_map(value)]  # fmt: skip


def is_block(node: yaml.Node | None) -> bool:
    return nodes.is_map(node) and node.tag == BLOCK_TAG


def is_unknown(value: str | None) -> bool:
    """An expression kvdoctor does not evaluate (`${var.model}`): the whole value is unknown here."""
    return value is not None and value.startswith("${") and value.endswith("}") and value.count("${") == 1


def _unknown(expression: str) -> str:
    """An expression kvdoctor does not evaluate, as the variable `${expression}` (a bare `${X}` as it is)."""
    text = expression.strip()
    bare = text.startswith("${") and text.endswith("}") and text.count("${") == 1 and text.count("}") == 1
    return text if bare else "${" + text + "}"


class _Parser:
    def __init__(self, text: str, name: str) -> None:
        self.text, self.name, self.pos = text, name, 0
        self.line_starts = [0] + [m.end() for m in re.finditer(r"\n", text)]

    # -- positions -------------------------------------------------------------------------------------------------
    def mark(self, index: int) -> yaml.Mark:
        line = bisect.bisect_right(self.line_starts, index) - 1
        return yaml.Mark(self.name, index, line, index - self.line_starts[line], None, None)

    def error(self, problem: str) -> HclError:
        return HclError(f"{self.name}:{self.mark(self.pos).line + 1}: malformed HCL: {problem}")

    def peek(self, length: int = 1) -> str:
        return self.text[self.pos : self.pos + length]

    def skip(self, newlines: bool) -> None:
        """Spaces and comments (# // /* */), and newlines when asked."""
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char in " \t\r" or (newlines and char == "\n"):
                self.pos += 1
            elif char == "#" or self.peek(2) == "//":
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end < 0 else end
            elif self.peek(2) == "/*":
                end = self.text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.error("a /* comment that never ends")
                self.pos = end + 2
            else:
                return

    # -- structure -------------------------------------------------------------------------------------------------
    def document(self) -> yaml.MappingNode:
        body = self.body(None, 0)
        return body

    def body(self, closer: str | None, depth: int) -> yaml.MappingNode:
        if depth > MAX_DEPTH:
            raise self.error(f"nested more than {MAX_DEPTH} levels deep")
        start, pairs = self.pos, []
        while True:
            self.skip(newlines=True)
            if self.pos >= len(self.text):
                if closer is not None:
                    raise self.error(f"a block without its closing {closer}")
                break
            if closer is not None and self.peek() == closer:
                self.pos += 1
                break
            pairs.append(self.item(depth))
        return yaml.MappingNode(BLOCK_TAG if closer else "tag:yaml.org,2002:map", pairs, self.mark(start),
                                self.mark(self.pos))  # fmt: skip

    def item(self, depth: int) -> tuple[yaml.Node, yaml.Node]:
        start = self.pos
        found = IDENTIFIER.match(self.text, self.pos)
        if found is None:
            raise self.error(f"expected an attribute or a block, found {self.peek()!r}")
        self.pos = found.end()
        key = self.scalar(found.group(0), STR, start)
        self.skip(newlines=False)
        if self.peek() == "=" and self.peek(2) != "==":
            self.pos += 1
            return key, self.expression(depth)
        labels = []
        while self.peek() != "{":
            label_start = self.pos
            if self.peek() == '"':
                labels.append(self.scalar(self.string(), STR, label_start))
            elif (label := IDENTIFIER.match(self.text, self.pos)) is not None:
                self.pos = label.end()
                labels.append(self.scalar(label.group(0), STR, label_start))
            else:
                raise self.error(f"expected '=' or a block after {found.group(0)!r}")
            self.skip(newlines=False)
        self.pos += 1
        body = self.body("}", depth + 1)
        if labels:
            label_key = self.scalar(LABELS, STR, start)
            body.value.insert(0, (label_key, yaml.SequenceNode("tag:yaml.org,2002:seq", labels, self.mark(start),
                                                               self.mark(start))))  # fmt: skip
        return key, body

    # -- expressions -----------------------------------------------------------------------------------------------
    def expression(self, depth: int) -> yaml.Node:
        self.skip(newlines=False)
        start = self.pos
        node = self.literal(depth)
        if node is not None:
            self.skip(newlines=False)
            if self.pos >= len(self.text) or self.peek() in "\n,]})":
                return node
            self.pos = start  # an operator follows: the whole expression is unknown here
        return self.scalar(_unknown(self.raw()), STR, start)

    def literal(self, depth: int) -> yaml.Node | None:
        start, char = self.pos, self.peek()
        if char == '"':
            return self.scalar(self.string(), STR, start)
        if (heredoc := HEREDOC.match(self.text, self.pos)) is not None:
            return self.scalar(self.heredoc(heredoc), STR, start)
        if char == "[":
            return self.sequence(depth)
        if char == "{":
            return self.object(depth)
        if (number := NUMBER.match(self.text, self.pos)) is not None and not IDENTIFIER.match(self.text, number.end()):
            self.pos = number.end()
            return self.scalar(number.group(0), INT if number.group(0).lstrip("-").isdigit() else FLOAT, start)
        word = IDENTIFIER.match(self.text, self.pos)
        if word is not None and word.group(0) in PASSING_FUNCTIONS and self.text.startswith("(", word.end()):
            return self.passing_call(word, depth)
        if word is not None and word.group(0) in ("true", "false", "null"):
            self.pos = word.end()
            return self.scalar(word.group(0) if word.group(0) != "null" else "", BOOL if word.group(0) != "null"
                               else NULL, start)  # fmt: skip
        return None

    def passing_call(self, word: re.Match, depth: int) -> yaml.Node | None:
        """`tostring(x)`, `tonumber(x)`, `tolist([...])`, `compact([...])` (its empty strings dropped) are their argument;
        `concat([...], [...])` the lists joined; None (an unknown value) for any other argument."""
        start = self.pos
        self.pos = word.end() + 1
        arguments = []
        while True:
            self.skip(newlines=True)
            if self.peek() == ")":
                self.pos += 1
                break
            if self.pos >= len(self.text):
                raise self.error(f"{word.group(0)}( without its closing )")
            arguments.append(self.expression(depth + 1))
            self.skip(newlines=True)
            if self.peek() == ",":
                self.pos += 1
        name = word.group(0)
        if name == "concat" and arguments and all(isinstance(a, yaml.SequenceNode) for a in arguments):
            items = [item for argument in arguments for item in argument.value]
            return yaml.SequenceNode("tag:yaml.org,2002:seq", items, self.mark(start), self.mark(self.pos))
        if name != "concat" and len(arguments) == 1:
            (argument,) = arguments
            if name == "compact" and isinstance(argument, yaml.SequenceNode):
                argument.value = [i for i in argument.value if not (isinstance(i, yaml.ScalarNode) and i.value == "")]
            return argument
        self.pos = start
        return None

    def sequence(self, depth: int) -> yaml.Node:
        start, items = self.pos, []
        self.pos += 1
        while True:
            self.skip(newlines=True)
            if self.peek() == "]":
                self.pos += 1
                break
            if self.pos >= len(self.text):
                raise self.error("a list without its closing ]")
            if IDENTIFIER.match(self.text, self.pos) and self.text.startswith("for", self.pos) and not items:
                self.pos = start  # [for x in xs : x]: a for expression, unknown here
                return self.scalar(_unknown(self.raw()), STR, start)
            items.append(self.expression(depth + 1))
            self.skip(newlines=True)
            if self.peek() == ",":
                self.pos += 1
        return yaml.SequenceNode("tag:yaml.org,2002:seq", items, self.mark(start), self.mark(self.pos))

    def object(self, depth: int) -> yaml.Node:
        start, pairs = self.pos, []
        self.pos += 1
        while True:
            self.skip(newlines=True)
            if self.peek() == "}":
                self.pos += 1
                break
            if self.pos >= len(self.text):
                raise self.error("an object without its closing }")
            key_start = self.pos
            if self.peek() == '"':
                key = self.string()
            elif self.peek() == "(":
                key = "${" + self.raw(stop_at_equals=True).strip() + "}"
            elif (word := IDENTIFIER.match(self.text, self.pos)) is not None:
                if word.group(0) == "for" and not pairs:
                    self.pos = start  # {for k, v in m : k => v}: unknown here
                    return self.scalar(_unknown(self.raw()), STR, start)
                self.pos = word.end()
                key = word.group(0)
                while self.peek() == "." and (part := IDENTIFIER.match(self.text, self.pos + 1)) is not None:
                    self.pos = part.end()  # a traversal as the key (`aws.dns = aws` in a module's providers)
                    key += "." + part.group(0)
            else:
                raise self.error(f"expected an object key, found {self.peek()!r}")
            self.skip(newlines=False)
            if self.peek() not in ("=", ":"):
                raise self.error(f"expected '=' or ':' after the key {key!r}")
            self.pos += 1
            pairs.append((self.scalar(key, STR, key_start), self.expression(depth + 1)))
            self.skip(newlines=False)
            if self.peek() == ",":
                self.pos += 1
        return yaml.MappingNode("tag:yaml.org,2002:map", pairs, self.mark(start), self.mark(self.pos))

    def string(self) -> str:
        """A quoted template: escapes decoded, `${...}` / `%{...}` kept as written, `$${` as `${`."""
        self.pos += 1
        out: list[str] = []
        while True:
            if self.pos >= len(self.text) or self.peek() == "\n":
                raise self.error("a string without its closing quote")
            char = self.peek()
            if char == '"':
                self.pos += 1
                return "".join(out)
            if char == "\\":
                escaped = self.text[self.pos + 1 : self.pos + 2]
                if escaped == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", self.text[self.pos + 2 : self.pos + 6]):
                    out.append(chr(int(self.text[self.pos + 2 : self.pos + 6], 16)))
                    self.pos += 6
                    continue
                out.append(ESCAPES.get(escaped, escaped))
                self.pos += 2
            elif self.peek(3) in ("$${", "%%{"):
                out.append(self.peek(3)[1:])
                self.pos += 3
            elif self.peek(2) in ("${", "%{"):
                begin = self.pos
                self.pos += 1
                self.balanced()
                out.append(self.text[begin : self.pos])
            else:
                out.append(char)
                self.pos += 1

    def heredoc(self, found: re.Match[str]) -> str:
        strip, marker = found.group(1) == "-", found.group(2)
        self.pos = found.end()
        lines = []
        while self.pos < len(self.text):
            end = self.text.find("\n", self.pos)
            end = len(self.text) if end < 0 else end
            line = self.text[self.pos : end]
            self.pos = min(end + 1, len(self.text))
            if line.strip() == marker:
                self.pos = end  # the newline after the marker ends the attribute
                if strip:
                    indent = min((len(x) - len(x.lstrip()) for x in lines if x.strip()), default=0)
                    lines = [x[indent:] for x in lines]
                return "".join(x + "\n" for x in lines)
            lines.append(line.rstrip("\r"))
        raise self.error(f"a heredoc <<{marker} without its closing {marker}")

    def balanced(self) -> None:
        """From an opening bracket to just past its closer, strings and nested brackets included."""
        stack = [CLOSERS[self.peek()]]
        self.pos += 1
        while stack:
            if self.pos >= len(self.text):
                raise self.error(f"an expression without its closing {stack[-1]}")
            char = self.peek()
            if char == '"':
                self.string()
                continue
            if char in CLOSERS:
                stack.append(CLOSERS[char])
            elif char == stack[-1]:
                stack.pop()
            elif char in ")]}":
                raise self.error(f"{char!r} where {stack[-1]!r} closes")
            self.pos += 1

    def raw(self, stop_at_equals: bool = False) -> str:
        """An expression's text up to a newline, `,` or an unmatched closer at depth 0 (or `=`/`:` for a key)."""
        start = self.pos
        while self.pos < len(self.text):
            char = self.peek()
            if char == "\n" or char in ",)]}" or (stop_at_equals and char in "=:" and self.pos > start
                                                  and self.text[start] != "("):  # fmt: skip
                break
            if char == '"':
                self.string()
            elif char in CLOSERS:
                self.balanced()
                if stop_at_equals:
                    break
            elif char == "#" or self.peek(2) == "//":
                break
            else:
                self.pos += 1
        if self.pos == start:
            raise self.error(f"expected a value, found {self.peek()!r}")
        return self.text[start : self.pos]

    def scalar(self, value: str, tag: str, start: int) -> yaml.ScalarNode:
        return yaml.ScalarNode(tag, value, self.mark(start), self.mark(self.pos), style='"' if tag == STR else None)
