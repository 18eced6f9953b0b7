"""Terraform's file functions, rendered as `terraform plan` renders them: `templatefile(PATH, {k = v, ...})` is PATH's
text with each `${k}` given its value (a literal, or the literal value of the `var.x` / `local.x` it names; one not
known here stays `${k}`, a variable unknown to the script that reads it) and `$${` made `${`; `file(PATH)` is PATH's
text as it is. `base64encode()` / `base64gzip()` around either (an instance's user_data) encode that same text. PATH
is relative to the module's directory (`${path.module}/x`, `${path.root}`, `${path.cwd}` or a bare relative path)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from kvdoctor.scan import hcl

WRAPPED = re.compile(r"^\$\{\s*(?:base64encode|base64gzip|chomp|trimspace)\((.*)\)\s*\}$", re.DOTALL)
TEMPLATEFILE = re.compile(r'^\$\{\s*templatefile\(\s*"([^"]+)"\s*,\s*\{(.*)\}\s*\)\s*\}$', re.DOTALL)
FILE = re.compile(r'^\$\{\s*file\(\s*"([^"]+)"\s*\)\s*\}$')
PATH_PREFIX = re.compile(r"^\$\{path\.(?:module|root|cwd)\}/?")
VARIABLE = re.compile(r"(?<!\$)\$\{\s*([A-Za-z_]\w*)\s*\}")
LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"|(-?\d+(?:\.\d+)?|true|false)$', re.DOTALL)
BARE_REFERENCE = re.compile(r"(?:var|local)\.[A-Za-z_][\w-]*$")
MAX_BYTES = 1024 * 1024
IF_BLOCK = re.compile(r"%\{~?\s*if\s+([A-Za-z_]\w*)\s*~?\}(.*?)(?:%\{~?\s*else\s*~?\}(.*?))?%\{~?\s*endif\s*~?\}", re.DOTALL)
DIRECTIVE_BLOCK = re.compile(r"%\{~?\s*(if|for)\b[^}]*\}.*?%\{~?\s*end\1\s*~?\}", re.DOTALL)
DIRECTIVE = re.compile(r"(?<!%)%\{[^}]*\}")
EXPRESSION = re.compile(r"(?<!\$)\$\{(?!\s*[A-Za-z_]\w*\s*\})[^{}]*\}")
UNRENDERED = "${TF_TEMPLATE_UNRENDERED}"
"""What an `if` / `for` directive or an expression (join(), a function call) of values not known here renders to: a
variable unknown to the script that reads it (its words are not judged as written)."""


@dataclass(frozen=True)
class Rendered:
    """A file a template function reads, as rendered: its path, its text, the variables given a value here and those
    passed with a value not known here."""

    path: Path
    text: str
    values: dict[str, str]
    unknown: tuple[str, ...] = ()
    function: str = "templatefile"
    unrendered: int = 0
    """The directives and expressions left unknown (rendered as UNRENDERED)."""

    def note(self, at: str) -> str:
        if self.function == "file":
            return f"{self.path} read by Terraform's file() at {at}, as it is"
        given = ", ".join(f"{k}={v}" for k, v in sorted(self.values.items())) or "no value known here"
        unknown = f"; {', '.join(self.unknown)} not known here" if self.unknown else ""
        left = (f"; {self.unrendered} template directive(s) / expression(s) of values not known here left unknown"
                if self.unrendered else "")
        return f"{self.path} rendered by Terraform's templatefile() at {at} with {given}{unknown}{left}"


def render(expression: str, file: str, defaults: dict[str, str]) -> Rendered | None:
    """The file a `${templatefile(...)}` / `${file(...)}` expression (possibly base64-encoded) renders, with the
    module's known values (`var.x` -> value); None when the expression is no such call or the file cannot be read."""
    expression = expression.strip()
    while (wrapped := WRAPPED.match(expression)) is not None:
        expression = "${" + wrapped.group(1).strip() + "}"
    if (call := TEMPLATEFILE.match(expression)) is not None:
        named, arguments = call.group(1), call.group(2)
    elif (call := FILE.match(expression)) is not None:
        named, arguments = call.group(1), None
    else:
        return None
    path = _path(named, file)
    try:
        if not path.is_file() or path.stat().st_size > MAX_BYTES:
            return None
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if arguments is None:
        return Rendered(path, text, {}, function="file")
    values, unknown = {}, []
    for name, value in _arguments(arguments):
        known = _value(value, defaults)
        if known is None:
            unknown.append(name)
        else:
            values[name] = known
    rendered = VARIABLE.sub(lambda m: values.get(m.group(1), m.group(0)), text)
    rendered = IF_BLOCK.sub(lambda m: _branch(m, values), rendered)
    left = len(DIRECTIVE_BLOCK.findall(rendered)) + len(EXPRESSION.findall(DIRECTIVE_BLOCK.sub("", rendered)))
    rendered = EXPRESSION.sub(UNRENDERED, DIRECTIVE_BLOCK.sub(UNRENDERED, rendered))
    rendered = DIRECTIVE.sub("", rendered).replace("%%{", "%{").replace("$${", "${")
    return Rendered(path, rendered, values, tuple(unknown), unrendered=left)


def _branch(match: re.Match[str], values: dict[str, str]) -> str:
    """An `%{ if x }A%{ else }B%{ endif }` whose x is a known boolean: the branch it takes; unknown: left as it is."""
    value = values.get(match.group(1))
    if value not in ("true", "false"):
        return match.group(0)
    return match.group(2) if value == "true" else (match.group(3) or "")


def _path(named: str, file: str) -> Path:
    named = PATH_PREFIX.sub("", named)
    return Path(os.path.normpath(Path(named) if Path(named).is_absolute() else Path(file).parent / named))


def _arguments(body: str) -> list[tuple[str, str]]:
    """The `name = expression` items of an object literal's body, split at its top-level commas and line breaks."""
    items, depth, quoted, start, at = [], 0, False, 0, 0
    while at < len(body):
        char = body[at]
        if quoted:
            if char == "\\":
                at += 1
            elif char == '"':
                quoted = False
        elif char == '"':
            quoted = True
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char in ",\n" and depth == 0:
            items.append(body[start:at])
            start = at + 1
        at += 1
    items.append(body[start:])
    found = []
    for item in items:
        name, equals, value = item.strip().partition("=")
        if not equals:
            name, equals, value = item.strip().partition(":")
        name = name.strip().strip('"')
        if equals and re.fullmatch(r"[A-Za-z_]\w*", name):
            found.append((name, value.strip()))
    return found


def _value(expression: str, defaults: dict[str, str]) -> str | None:
    """A literal's value (a string's `${var.x}` put in from ``defaults``), a `var.x` / `local.x` with a known value;
    None otherwise."""
    if BARE_REFERENCE.fullmatch(expression):
        return defaults.get(expression)
    literal = LITERAL.fullmatch(expression)
    if literal is None:
        return None
    if literal.group(2) is not None:
        return literal.group(2)
    text = hcl.REFERENCE.sub(lambda m: defaults.get(m.group(1), m.group(0)), literal.group(1))
    return None if "${" in text.replace("$${", "") else text.replace("$${", "${").replace('\\"', '"')
