"""Makefiles -> vLLM workloads: each target's recipe read as a shell script (`make vllm` runs `uv run vllm serve
...`), the workload named by the target. Make's own expansion comes first, as make does it: the file's variables
(`PORT := 8000`, `SERVE_COMMON = --port $(PORT)`) and a `define` block a recipe runs with `$(call NAME,a,b,c)`."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

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
    on what the recipes deploy with a command kvdoctor cannot see. A target that runs another's recipe with other
    variables is a workload of its own: `$(MAKE) run MODEL=x` in its recipe (command-line variables win over the
    file's), or `big: MODEL = x` with `big: run` (a target-specific variable reaches its prerequisites' recipes)."""
    makefile = _parsed(source.text, Path(source.path).parent if source.path not in ("", "<stdin>") else None)
    found, notes = [], []
    for target, script, how in _target_scripts(makefile):
        workloads, unseen = scripts.script_findings(script, 1, source.path, PurePosixPath(source.path).name)
        notes += unseen
        for workload in workloads:
            found.append(replace(workload, kind="Makefile target", container=target,
                                 notes=workload.notes + (how,)))  # fmt: skip
    return found, notes


@dataclass(frozen=True)
class Makefile:
    lines: list[str]
    variables: dict[str, str]
    defines: dict[str, list[tuple[int, str]]]
    recipes: dict[str, list[tuple[int, str]]]
    """target -> (line index, command) of each recipe line, make's prefixes (@, -, +) cut."""
    prerequisites: dict[str, list[str]]
    target_variables: dict[str, dict[str, str]]
    """target -> the target-specific variables its `target: NAME = value` lines set."""


MAKE_CALL = re.compile(r"^\s*(?:\$\(MAKE\)|\$\{MAKE\}|make)\s+(.*)$")


def _target_scripts(makefile: Makefile) -> list[tuple[str, str, str]]:
    """(target, the script make runs for it, how) for each target's own recipe, each recursive `$(MAKE) OTHER
    VAR=value` of a recipe, and each prerequisite's recipe run with the target's own variables."""
    found = []
    for target, commands in makefile.recipes.items():
        own = makefile.variables | makefile.target_variables.get(target, {})
        calls = [(at, command, _called_target(command, makefile)) for at, command in commands]
        kept = [(at, command) for at, command, called in calls if called is None]
        if kept:
            found.append((target, _script(makefile, kept, own), f"the recipe of make target {target!r}"))
        for at, _, called in calls:
            if called is not None:
                other, overrides = called
                found.append((target, _script(makefile, makefile.recipes[other], own | overrides),
                              f"make target {target!r} runs target {other!r} (line {at + 1}) with "
                              + " ".join(f"{k}={v}" for k, v in overrides.items())))
    for target, variables in makefile.target_variables.items():
        for other in makefile.prerequisites.get(target, []):
            if other in makefile.recipes and other != target:
                found.append((target, _script(makefile, makefile.recipes[other], makefile.variables | variables),
                              f"make target {target!r} runs its prerequisite {other!r} with its own variables "
                              + " ".join(f"{k}={v}" for k, v in variables.items())))
    return found


def _called_target(command: str, makefile: Makefile) -> tuple[str, dict[str, str]] | None:
    """(target, command-line variables) of a recipe line `$(MAKE) TARGET VAR=value ...` naming a target with a
    recipe and at least one variable (without one it is that target's own workload)."""
    call = MAKE_CALL.match(command)
    if call is None:
        return None
    try:
        words = shlex.split(call.group(1))
    except ValueError:
        return None
    overrides = dict(w.split("=", 1) for w in words if re.match(r"^[A-Za-z_][\w.-]*=", w))
    targets = [w for w in words if not w.startswith("-") and "=" not in w]
    if len(targets) != 1 or targets[0] not in makefile.recipes or not overrides:
        return None
    return targets[0], overrides


def _script(makefile: Makefile, commands: list[tuple[int, str]], variables: dict[str, str]) -> str:
    """The recipe lines as a script of the Makefile's length (other lines blank, make's references expanded, `$$`
    made `$`). A `$(call NAME,...)` of a `define` block puts the block's lines, expanded with the call's arguments,
    at the block's own lines."""
    body = [""] * len(makefile.lines)
    for at, command in commands:
        called = _called_define(command, makefile.defines)
        if called is None:
            body[at] = _expand(command, variables).replace("$$", "$")
            continue
        name, arguments = called
        values = {str(n): _expand(a, variables) for n, a in enumerate(arguments, 1)}
        for index, block_line in makefile.defines[name]:
            body[index] = _expand(RECIPE_PREFIXES.sub("", block_line), variables | values).replace("$$", "$")
    return "\n".join(body)


TARGET_VARIABLE = re.compile(r"^([A-Za-z0-9_.%/-][^:=#\t]*?)\s*:\s*(?:export\s+|override\s+)?([A-Za-z_][\w.-]*)\s*(:{1,3}=|\?=|\+=|=)\s*(.*)$")


def _parsed(text: str, folder: Path | None = None) -> Makefile:
    lines = text.split("\n")
    variables, defines = _variables_and_defines(lines, folder)
    recipes: dict[str, list[tuple[int, str]]] = {}
    prerequisites: dict[str, list[str]] = {}
    target_variables: dict[str, dict[str, str]] = {}
    target = None
    inside_define = False
    for at, line in enumerate(lines):
        if re.match(r"^\s*define\s", line):
            inside_define, target = True, None
        elif inside_define:
            inside_define = not re.match(r"^\s*endef\b", line)
            continue
        if line.startswith("\t") and target is not None:
            recipes.setdefault(target, []).append((at, RECIPE_PREFIXES.sub("", line)))
            continue
        if line.startswith((" ", "\t")):
            target = None
            continue
        specific = TARGET_VARIABLE.match(line)
        if specific is not None:  # `big: MODEL = x`: no rule, a variable of the target (and its prerequisites)
            for name in specific.group(1).split():
                target_variables.setdefault(name, {})[specific.group(2)] = COMMENT.sub("", specific.group(4)).strip()
            target = None
            continue
        rule = RULE.match(line)
        target = rule.group(1).split()[0] if rule else None
        if rule is not None:
            after = COMMENT.sub("", line[rule.end():]).split(";")[0]
            prerequisites.setdefault(target, []).extend(after.replace("|", " ").split())
    return Makefile(lines, variables, defines, recipes, prerequisites, target_variables)


INCLUDE = re.compile(r"^\s*-?(?:include|sinclude)\s+(\S[^#]*?)\s*(?:#.*)?$")
"""`include .env`, `-include config.mk`: make reads the named files there, their assignments in order."""
MAX_INCLUDES = 3


def _variables_and_defines(lines: list[str], folder: Path | None = None, depth: int = 0,
                           variables: dict[str, str] | None = None
                           ) -> tuple[dict[str, str], dict[str, list[tuple[int, str]]]]:
    """The file's variables (name -> unexpanded value, comments cut) and define blocks (name -> (line, text) of each
    body line), outside recipes; an included file of the same folder (`include .env`) is read where it is named."""
    variables = {} if variables is None else variables
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
        included = INCLUDE.match(line) if folder is not None and depth < MAX_INCLUDES else None
        if included:
            for name in included.group(1).split():
                path = folder / name
                if "$" not in name and path.is_file():
                    try:
                        text = path.read_text(encoding="utf-8")
                    except (OSError, UnicodeDecodeError):
                        continue
                    _variables_and_defines(text.split("\n"), folder, depth + 1, variables)
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
