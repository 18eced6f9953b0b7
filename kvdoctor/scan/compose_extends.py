"""Compose's `extends`: a service built on another service of this file or of another Compose file, merged as Compose
merges it (the extending service's keys win; mappings merge key by key; `command`, `entrypoint` and other
sequences are replaced, `environment` lists are joined, the extending service's entries last)."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from kvdoctor.scan import nodes
from kvdoctor.scan.workload import LINE_FILE_STRIDE

MAX_DEPTH = 5  # extends chains deeper than this are not followed (Compose refuses a cycle)


def extended(file: str, root: yaml.Node, service: yaml.Node) -> tuple[yaml.Node, tuple[str, ...], str | None]:
    """(the service with what it extends merged under it, the other files its nodes come from, a note saying what was
    merged or why the base could not be read). Nodes of another file carry lines past LINE_FILE_STRIDE
    (Workload.line_files)."""
    other_files: list[str] = []
    merged, note = _resolve(Path(file), root, service, other_files, 0)
    return merged, tuple(other_files), note


def _resolve(path: Path, root: yaml.Node, service: yaml.Node, other_files: list[str], depth: int
             ) -> tuple[yaml.Node, str | None]:  # fmt: skip
    spec = nodes.get(service, "extends")
    if spec is None or depth >= MAX_DEPTH:
        return service, None
    base_name = nodes.text(spec) if nodes.is_scalar(spec) else nodes.text(nodes.get(spec, "service"))
    base_file = None if nodes.is_scalar(spec) else nodes.text(nodes.get(spec, "file"))
    if not base_name:
        return service, None
    base_path, base_root = path, root
    if base_file:
        base_path = (path.parent / base_file).resolve()
        try:
            base_root = yaml.compose(base_path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            return service, (f"extends {base_file!r} (line {nodes.line(spec)}) could not be read "
                             f"({type(exc).__name__}): its keys are not merged")
    base = nodes.get(base_root, "services", base_name)
    if not nodes.is_map(base):
        return service, f"extends service {base_name!r} (line {nodes.line(spec)}) is not in {base_file or 'this file'}"
    if base_path != path:  # the other file's nodes, on lines that stand for that file
        base_root = _shifted(base_root, _file_index(str(base_path), other_files))
        base = nodes.get(base_root, "services", base_name)
    base, note = _resolve(base_path, base_root, base, other_files, depth + 1)
    read = (f"extends service {base_name!r} of {base_file or 'this file'} (line {nodes.line(spec)}): its keys merged "
            "under this one's")
    return _merged(base, service), note or read


def _file_index(file: str, other_files: list[str]) -> int:
    if file not in other_files:
        other_files.append(file)
    return other_files.index(file) + 1


def _shifted(node: yaml.Node, index: int) -> yaml.Node:
    """A copy of a node tree of another file whose lines stand for that file (index-th of the workload's line_files)."""
    node = copy.deepcopy(node)
    stack = [node]
    while stack:
        current = stack.pop()
        for attr in ("start_mark", "end_mark"):
            mark = getattr(current, attr)
            if mark is not None:
                setattr(current, attr, yaml.Mark(mark.name, mark.index, mark.line + index * LINE_FILE_STRIDE,
                                                 mark.column, mark.buffer, mark.pointer))
        if nodes.is_map(current):
            stack += [part for pair in current.value for part in pair]
        elif nodes.is_seq(current):
            stack += list(current.value)
    return node


REPLACED = frozenset({"command", "entrypoint", "extends"})


def _merged(base: yaml.Node, child: yaml.Node) -> yaml.Node:
    """The child service over its base: the child's keys win, mappings merge, environment lists are joined."""
    if not nodes.is_map(base) or not nodes.is_map(child):
        return child
    own = {nodes.text(key): (key, value) for key, value in child.value}
    out: list[tuple[yaml.Node, yaml.Node]] = []
    for key, value in base.value:
        name = nodes.text(key)
        if name == "extends":
            continue
        if name not in own:
            out.append((key, value))
            continue
        child_key, child_value = own.pop(name)
        if name in REPLACED:
            out.append((child_key, child_value))
        elif nodes.is_map(value) and nodes.is_map(child_value):
            out.append((child_key, _merged(value, child_value)))
        elif name == "environment" and nodes.is_seq(value) and nodes.is_seq(child_value):
            out.append((child_key, yaml.SequenceNode(child_value.tag, list(value.value) + list(child_value.value),
                                                     child_value.start_mark, child_value.end_mark)))
        else:
            out.append((child_key, child_value))
    out += [(key, value) for key, value in child.value if nodes.text(key) in own and nodes.text(key) != "extends"]
    return yaml.MappingNode(child.tag, out, child.start_mark, child.end_mark)
