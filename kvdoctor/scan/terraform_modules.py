"""Terraform module calls -> the workloads `terraform plan` creates for each: `module "llama" { source = "./modules/vllm"
model_id = "meta-llama/..." }` reads the module directory's .tf files with the call's arguments as its variables (over
their defaults), so that one module deployed twice is two workloads, each with its own model and machine. A local
source only (`./`, `../`); a registry or git module whose arguments name vLLM is named in a note. A module directory
that a scanned file calls is read through its calls, not alone (alone, the variables the caller sets would be
unknown)."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import yaml

from kvdoctor.scan import hcl, nodes
from kvdoctor.scan.documents import calls_local_module
from kvdoctor.scan.workload import Workload

META_ARGUMENTS = {"source", "version", "providers", "depends_on", "count", "for_each", hcl.LABELS}
"""A module block's own arguments, not the module's variables."""
MAX_DEPTH = 4
"""Modules calling modules: four levels cover real trees (and stop a module that calls itself)."""
MAX_BYTES = 1024 * 1024


@dataclass(frozen=True)
class ModuleCall:
    """One `module` block with a local source: its label, the module's directory, where the call is, and the values it
    gives the module's variables (`var.NAME` -> value; those given a value not known here under ``unknown``)."""

    label: str
    directory: Path
    file: str
    line: int | None
    arguments: dict[str, str]
    unknown: tuple[str, ...] = ()

    @property
    def note(self) -> str:
        given = ", ".join(f"{k.removeprefix('var.')}={v}" for k, v in sorted(self.arguments.items()))
        unknown = f"; {', '.join(self.unknown)} given values not known here" if self.unknown else ""
        return (f'read through Terraform module "{self.label}" ({self.file}:{self.line}) with '
                f"{given or 'its defaults'}{unknown}")  # fmt: skip


Read = Callable[[str, str, dict[str, str], int], tuple[list[Workload], list[str], list]]
"""(module file, its text, its variables' given values, depth) -> its workloads, notes and unread files."""


def calls(root: yaml.Node, file: str, defaults: dict[str, str]) -> list[ModuleCall]:
    """The file's module calls with a local source that is a directory, their arguments resolved with the caller's
    own values (``defaults``: `var.x` / `local.x` -> value)."""
    found = []
    for labels, body in hcl.blocks(root, "module"):
        directory = _local_directory(body, file)
        if directory is None:
            continue
        arguments, unknown = {}, []
        for key, _, value in nodes.pairs(body):
            if key in META_ARGUMENTS:
                continue
            if not nodes.is_scalar(value):  # a list or an object: its items are not read into the module's strings
                unknown.append(key)
                continue
            text = hcl.REFERENCE.sub(lambda m: defaults.get(m.group(1), m.group(0)), str(nodes.text(value)))
            if "${" in text.replace("$${", ""):
                unknown.append(key)
            else:
                arguments[f"var.{key}"] = text
        found.append(ModuleCall(labels[0] if labels else "?", directory, file, nodes.line(body), arguments,
                                tuple(unknown)))  # fmt: skip
    return found


def call_workloads(root: yaml.Node, file: str, defaults: dict[str, str], read: Read,
                   depth: int = 0) -> tuple[list[Workload], list[str], list]:  # fmt: skip
    """The workloads of the file's local module calls, each named `module.LABEL/NAME` and noted with the call's
    values, and the notes and unread files of the modules' own reading."""
    found: list[Workload] = []
    notes: list[str] = []
    unread: list = []
    if depth >= MAX_DEPTH:
        return found, notes, unread
    notes += remote_notes(root, file)
    for call in calls(root, file, defaults):
        for path in sorted(call.directory.glob("*.tf")):
            try:
                if not path.is_file() or path.stat().st_size > MAX_BYTES:
                    continue
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            workloads, why, failures = read(str(path), text, call.arguments, depth + 1)
            found += [replace(w, name=f"module.{call.label}/{w.name}", notes=w.notes + (call.note,)) for w in workloads]
            notes += why
            unread += failures
    return found, notes, unread


def remote_notes(root: yaml.Node, file: str) -> list[str]:
    """A module call whose source is a registry, git or URL module and whose arguments name vLLM: named, never read
    (its code is not in the tree until `terraform init` fetches it under .terraform/modules/)."""
    found = []
    for labels, body in hcl.blocks(root, "module"):
        source = nodes.text(nodes.get(body, "source")) or ""
        if _is_local(source) or not any("vllm" in t.lower() for t in nodes.scalars(body)):
            continue
        if nodes.is_map(nodes.get(body, "container_definitions")):  # an ECS service module: read by scan/ecs.py
            continue
        label = labels[0] if labels else "?"
        found.append(f'{file}:{nodes.line(body)}: Terraform module "{label}" from {source} names vLLM: its code is not '
                     f"in the tree, so what it deploys is not read (terraform init fetches it to .terraform/modules/"
                     f"{label}: scan that directory)")  # fmt: skip
    return found


def called_directories(files: list[tuple[str, str]]) -> dict[Path, str]:
    """The module directories the given .tf files (path, text) call with a local source -> where the first call is
    (`main.tf:3`)."""
    called: dict[Path, str] = {}
    for path, text in files:
        if not calls_local_module(text):
            continue
        try:
            root = hcl.parse(text, path)
        except hcl.HclError:
            continue
        for _, body in hcl.blocks(root, "module"):
            if (directory := _local_directory(body, path)) is not None:
                called.setdefault(directory.resolve(), f"{path}:{nodes.line(body)}")
    return called


def _is_local(source: str) -> bool:
    return source.startswith(("./", "../"))


def _local_directory(body: yaml.Node, file: str) -> Path | None:
    """The directory a module block's local source names, None for a remote source or one that is no directory."""
    source = nodes.text(nodes.get(body, "source")) or ""
    directory = Path(os.path.normpath(Path(file).parent / source)) if _is_local(source) else None
    return directory if directory is not None and directory.is_dir() else None
