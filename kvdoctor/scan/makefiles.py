"""Makefiles -> vLLM workloads: each target's recipe read as a shell script (`make vllm` runs `uv run vllm serve
...`), the workload named by the target. Make's own expansion comes first, as make does it: the file's variables
(`PORT := 8000`, `SERVE_COMMON = --port $(PORT)`) and a `define` block a recipe runs with `$(call NAME,a,b,c)`."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import PurePosixPath

from kvdoctor.scan import scripts
from kvdoctor.scan.documents import MAKEFILE_NAMES, SourceFile
from kvdoctor.scan.workload import Workload

# `name:` or `a b: prerequisites` at a line's start; `:=` / `::=` assignments are not rules.
RULE = re.compile(r"^([A-Za-z0-9_.%/$()-][^:=#\t]*?)\s*::?(?!=)")
RECIPE_PREFIXES = re.compile(r"^\t[@+-]*")
ASSIGNMENT = re.compile(r"^(?:export\s+|override\s+)?([A-Za-z_][\w.-]*)\s*(:{1,3}=|\?=|\+=|!=|=)\s*(.*)$")
COMMENT = re.compile(r"(?<!\\)\s*#.*$")
REFERENCE = re.compile(r"\$([({])")
MAX_DEPTH = 10
"""Expansion depth: a variable that refers to itself (`X = $(X) y`) stops here instead of looping."""


def is_makefile(source: SourceFile) -> bool:
    return bool(MAKEFILE_NAMES.search(PurePosixPath(source.path).name))


def read(source: SourceFile) -> tuple[list[Workload], list[str]]:
    """The vLLM workloads of each target's recipe (a recipe line keeps its line number in the Makefile), and the notes
    on what the recipes deploy with a command kvdoctor cannot see."""
    found, notes = [], []
    for target, recipe in _recipes(source.text):
        workloads, unseen = scripts.script_findings(recipe, 1, source.path, PurePosixPath(source.path).name)
        notes += unseen
        for workload in workloads:
            found.append(replace(workload, kind="Makefile target", container=target,
                                 notes=workload.notes + (f"the recipe of make target {target!r}",)))  # fmt: skip
    return found, notes


def _recipes(text: str) -> list[tuple[str, str]]:
    """(target, its recipe as a script of the Makefile's length: other lines blank, make's references expanded, `$$`
    made `$`). A recipe line that is a `$(call NAME,...)` of a `define` block puts the block's lines, expanded with the
    call's arguments, at the block's own lines."""
    lines = text.split("\n")
    variables, defines = _variables_and_defines(lines)
    recipes: dict[str, list[str]] = {}
    target = None
    inside_define = False
    for at, line in enumerate(lines):
        if re.match(r"^\s*define\s", line):
            inside_define, target = True, None
        elif inside_define:
            inside_define = not re.match(r"^\s*endef\b", line)
            continue
        if line.startswith("\t") and target is not None:
            body = recipes[target]
            command = RECIPE_PREFIXES.sub("", line)
            called = _called_define(command, defines)
            if called is None:
                body[at] = _expand(command, variables).replace("$$", "$")
                continue
            name, arguments = called
            values = {str(n): _expand(a, variables) for n, a in enumerate(arguments, 1)}
            for index, block_line in defines[name]:
                body[index] = _expand(RECIPE_PREFIXES.sub("", block_line), variables | values).replace("$$", "$")
            continue
        rule = RULE.match(line)
        target = rule.group(1).split()[0] if rule and not line.startswith((" ", "\t")) else None
        if target is not None and target not in recipes:
            recipes[target] = [""] * len(lines)
    return [(name, "\n".join(body)) for name, body in recipes.items() if any(body)]


def _variables_and_defines(lines: list[str]) -> tuple[dict[str, str], dict[str, list[tuple[int, str]]]]:
    """The file's variables (name -> unexpanded value, comments cut) and define blocks (name -> (line, text) of each
    body line), outside recipes."""
    variables: dict[str, str] = {}
    defines: dict[str, list[tuple[int, str]]] = {}
    current: str | None = None
    for at, line in enumerate(lines):
        if current is not None:
            if re.match(r"^\s*endef\b", line):
                current = None
            else:
                defines[current].append((at, line))
            continue
        opened = re.match(r"^\s*define\s+([A-Za-z_][\w.-]*)", line)
        if opened:
            current = opened.group(1)
            defines[current] = []
            continue
        if line.startswith("\t"):
            continue
        assigned = ASSIGNMENT.match(line)
        if assigned and "(" not in assigned.group(1):
            name, operator, value = assigned.groups()
            value = COMMENT.sub("", value).strip()
            if operator == "?=" and name in variables:
                continue
            variables[name] = f"{variables[name]} {value}".strip() if operator == "+=" and name in variables else value
    return variables, defines


def _called_define(command: str, defines: dict) -> tuple[str, list[str]] | None:
    """(NAME, its arguments) when the recipe line is `$(call NAME,a,b,...)` of a define block."""
    match = re.match(r"^\s*\$\(call\s+([A-Za-z_][\w.-]*)\s*(,|\))", command)
    if match is None or match.group(1) not in defines:
        return None
    inner, _ = _balanced(command, command.index("(") + 1)
    return match.group(1), _split_arguments(inner.split(",", 1)[1]) if "," in inner else []


def _balanced(text: str, start: int) -> tuple[str, int]:
    """The text from `start` to the parenthesis that closes the one before it, and the index after that one."""
    depth, index = 1, start
    while index < len(text):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            return text[start:index], index + 1
        index += 1
    return text[start:], len(text)


def _split_arguments(text: str) -> list[str]:
    """Make's argument split: at commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += {"(": 1, ")": -1}.get(char, 0)
        current += char
    return parts + [current]


def _expand(text: str, variables: dict[str, str], depth: int = 0) -> str:
    """`$(NAME)` / `${NAME}` replaced by the variable's expanded value; `$$` kept for the shell; a reference to no known
    variable (`$(MAKE)`, a function) kept as written."""
    if depth > MAX_DEPTH or "$" not in text:
        return text
    out, index = [], 0
    while index < len(text):
        char = text[index]
        if char != "$" or index + 1 >= len(text):
            out.append(char)
            index += 1
            continue
        following = text[index + 1]
        if following == "$":
            out.append("$$")
            index += 2
            continue
        if following in "({":
            inner, after = _balanced(text, index + 2) if following == "(" else _braced(text, index + 2)
            name = inner.strip()
            if name in variables:
                out.append(_expand(variables[name], variables, depth + 1))
            else:
                out.append(text[index:after])
            index = after
            continue
        out.append(char)
        index += 1
    return "".join(out)


def _braced(text: str, start: int) -> tuple[str, int]:
    end = text.find("}", start)
    return (text[start:end], end + 1) if end >= 0 else (text[start:], len(text))
