"""Makefiles -> vLLM workloads: each target's recipe read as a shell script (`make vllm` runs `uv run vllm serve
...`), the workload named by the target."""

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
    """(target, its recipe as a script of the Makefile's length: other lines blank, `$$` made `$`)."""
    lines = text.split("\n")
    recipes: dict[str, list[str]] = {}
    target = None
    for at, line in enumerate(lines):
        if line.startswith("\t") and target is not None:
            recipes[target][at] = RECIPE_PREFIXES.sub("", line).replace("$$", "$")
            continue
        rule = RULE.match(line)
        target = rule.group(1).split()[0] if rule and not line.startswith((" ", "\t")) else None
        if target is not None and target not in recipes:
            recipes[target] = [""] * len(lines)
    return [(name, "\n".join(body)) for name, body in recipes.items() if any(body)]
