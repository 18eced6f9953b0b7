"""Kustomize's patches on composed YAML nodes: strategic merge (Kubernetes' patch strategies) and JSON 6902
operations. Every node keeps the mark of the file and line it was written on: a value a patch sets is on the
patch's line."""

from __future__ import annotations

import yaml

from kvdoctor.base.errors import KvdoctorError
from kvdoctor.base.yaml_safe import load_yaml_cached
from kvdoctor.data import read_data
from kvdoctor.scan import nodes

KUSTOMIZE = load_yaml_cached(read_data("kustomize.yaml"), "kustomize.yaml")
MERGE_KEYS: dict[str, str] = KUSTOMIZE["merge_keys"]
INFERRED_MERGE_KEY = "name"
DIRECTIVE = "$patch"
IGNORED_DIRECTIVES = ("$setElementOrder/", "$retainKeys", "$deleteFromPrimitiveList/")
STR = "tag:yaml.org,2002:str"
MAP = "tag:yaml.org,2002:map"
NULL = "tag:yaml.org,2002:null"


class PatchError(KvdoctorError):
    """A patch that Kustomize would refuse (a JSON 6902 path that is not there, a failed `test`)."""


def copied(node: yaml.Node) -> yaml.Node:
    """A structural copy of a node tree (marks shared: they are never changed in place)."""
    if isinstance(node, yaml.MappingNode):
        return yaml.MappingNode(node.tag, [(copied(k), copied(v)) for k, v in node.value], node.start_mark,
                                node.end_mark, node.flow_style)  # fmt: skip
    if isinstance(node, yaml.SequenceNode):
        return yaml.SequenceNode(node.tag, [copied(v) for v in node.value], node.start_mark, node.end_mark,
                                 node.flow_style)  # fmt: skip
    return yaml.ScalarNode(node.tag, node.value, node.start_mark, node.end_mark, node.style)


def scalar(text: str, at: yaml.Node) -> yaml.ScalarNode:
    """A string node written at another node's place (a value Kustomize sets, on the line that sets it)."""
    return yaml.ScalarNode(STR, text, at.start_mark, at.end_mark)


def set_key(mapping: yaml.MappingNode, key: str, value: yaml.Node, at: yaml.Node | None = None) -> None:
    """Set a key of a mapping node in place (added at the end when it is new)."""
    for index, (k, _) in enumerate(mapping.value):
        if nodes.is_scalar(k) and k.value == key:
            mapping.value[index] = (k, value)
            return
    mapping.value.append((scalar(key, at or value), value))


def mapping_at(parent: yaml.MappingNode, key: str, at: yaml.Node) -> yaml.MappingNode:
    """The mapping under a key, created (at ``at``'s place) when missing."""
    found = nodes.get(parent, key)
    if nodes.is_map(found):
        return found
    made = yaml.MappingNode(MAP, [], at.start_mark, at.end_mark)
    set_key(parent, key, made)
    return made


def _is_null(node: yaml.Node) -> bool:
    return nodes.is_scalar(node) and node.tag == NULL


def _directive(node: yaml.Node) -> str | None:
    return nodes.text(nodes.get(node, DIRECTIVE)) if nodes.is_map(node) else None


def _without_directives(node: yaml.Node) -> yaml.Node:
    if nodes.is_map(node):
        return yaml.MappingNode(node.tag, [(k, _without_directives(v)) for k, v in node.value
                                           if not (nodes.is_scalar(k) and _is_directive_key(k.value))],
                                node.start_mark, node.end_mark, node.flow_style)  # fmt: skip
    if nodes.is_seq(node):
        return yaml.SequenceNode(node.tag, [_without_directives(v) for v in node.value if _directive(v) is None],
                                 node.start_mark, node.end_mark, node.flow_style)  # fmt: skip
    return node


def _is_directive_key(key: str) -> bool:
    return key == DIRECTIVE or key.startswith(IGNORED_DIRECTIVES)


def strategic_merge(base: yaml.Node, patch: yaml.Node, field: str | None = None) -> yaml.Node | None:
    """The base with the patch merged in as `kubectl patch --type strategic` merges it; None when the patch deletes
    it (`$patch: delete`). Mappings merge key by key (a null value removes the key), lists of containers, env,
    volumes... merge on their merge key, other lists are replaced."""
    if nodes.is_map(base) and nodes.is_map(patch):
        directive = _directive(patch)
        if directive == "delete":
            return None
        if directive == "replace":
            return _without_directives(patch)
        merged = yaml.MappingNode(base.tag, list(base.value), base.start_mark, base.end_mark, base.flow_style)
        for key, value in patch.value:
            if not nodes.is_scalar(key) or _is_directive_key(key.value):
                continue
            old = nodes.get(merged, key.value)
            if _is_null(value):
                merged.value = [(k, v) for k, v in merged.value if not (nodes.is_scalar(k) and k.value == key.value)]
            elif old is None:
                merged.value.append((key, _without_directives(value)))
            else:
                new = strategic_merge(old, value, key.value)
                if new is None:
                    merged.value = [(k, v) for k, v in merged.value if not (nodes.is_scalar(k) and k.value == key.value)]
                else:
                    set_key(merged, key.value, new)
        return merged
    if nodes.is_seq(base) and nodes.is_seq(patch):
        return _merged_list(base, patch, field)
    return _without_directives(patch)


def _merged_list(base: yaml.SequenceNode, patch: yaml.SequenceNode, field: str | None) -> yaml.Node:
    if any(_directive(item) == "replace" for item in patch.value):
        return _without_directives(patch)
    key = MERGE_KEYS.get(field or "")
    if key is None and all(nodes.is_map(i) and nodes.get(i, INFERRED_MERGE_KEY) is not None
                           for i in base.value + patch.value):  # fmt: skip
        key = INFERRED_MERGE_KEY
    if key is None or not all(nodes.is_map(i) for i in base.value + patch.value):
        return _without_directives(patch)
    items = list(base.value)
    for item in patch.value:
        wanted = nodes.text(nodes.get(item, key))
        index = next((i for i, old in enumerate(items) if nodes.text(nodes.get(old, key)) == wanted), None)
        if index is None:
            if _directive(item) != "delete":
                items.append(_without_directives(item))
            continue
        new = strategic_merge(items[index], item, None)
        if new is None:
            del items[index]
        else:
            items[index] = new
    return yaml.SequenceNode(base.tag, items, base.start_mark, base.end_mark, base.flow_style)


def json_patch(root: yaml.Node, operations: yaml.Node, where: str) -> yaml.Node:
    """The object with RFC 6902 operations applied (add, remove, replace, move, copy, test); raises PatchError,
    naming ``where`` (the patch's file:line), for an operation Kustomize would refuse."""
    if not nodes.is_seq(operations):
        raise PatchError(f"{where}: a JSON 6902 patch is a list of operations")
    for operation in nodes.items(operations):
        op = nodes.text(nodes.get(operation, "op"))
        path = nodes.text(nodes.get(operation, "path"))
        at = f"{where.rsplit(':', 1)[0]}:{nodes.line(operation)}"
        if op is None or path is None:
            raise PatchError(f"{at}: a JSON 6902 operation needs op and path")
        value = nodes.get(operation, "value")
        if op in ("move", "copy"):
            source = nodes.text(nodes.get(operation, "from"))
            value = _lookup(root, _pointer(source or "", at), at)
            if op == "move":
                root = _removed(root, _pointer(source or "", at), at)
            value = copied(value)
            op = "add"
        if op == "test":
            if nodes.plain(_lookup(root, _pointer(path, at), at)) != nodes.plain(value):
                raise PatchError(f"{at}: JSON 6902 test of {path} failed")
            continue
        if op in ("add", "replace"):
            if value is None:
                raise PatchError(f"{at}: JSON 6902 {op} of {path} has no value")
            root = _set(root, _pointer(path, at), copied(value), op == "add", at)
        elif op == "remove":
            root = _removed(root, _pointer(path, at), at)
        else:
            raise PatchError(f"{at}: unknown JSON 6902 operation {op!r}")
    return root


def _pointer(path: str, at: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"{at}: JSON 6902 path {path!r} does not start with /")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _child(node: yaml.Node, part: str, at: str) -> yaml.Node:
    if nodes.is_map(node):
        found = next((v for k, v in node.value if nodes.is_scalar(k) and k.value == part), None)
        if found is not None:
            return found
    elif nodes.is_seq(node) and part.isdigit() and int(part) < len(node.value):
        return node.value[int(part)]
    raise PatchError(f"{at}: JSON 6902 path part {part!r} is not in the object")


def _lookup(root: yaml.Node, parts: list[str], at: str) -> yaml.Node:
    node = root
    for part in parts:
        node = _child(node, part, at)
    return node


def _set(root: yaml.Node, parts: list[str], value: yaml.Node, add: bool, at: str) -> yaml.Node:
    if not parts:
        return value
    parent = _lookup(root, parts[:-1], at)
    last = parts[-1]
    if nodes.is_map(parent):  # a replace of a missing key adds it, as Kustomize's json-patch (v5) does
        set_key(parent, last, value)
    elif nodes.is_seq(parent):
        if last == "-" and add:
            parent.value.append(value)
        elif last.isdigit() and int(last) <= len(parent.value) - (0 if add else 1):
            if add:
                parent.value.insert(int(last), value)
            else:
                parent.value[int(last)] = value
        else:
            raise PatchError(f"{at}: JSON 6902 index {last!r} is out of the list")
    else:
        raise PatchError(f"{at}: JSON 6902 path ends inside a value")
    return root


def _removed(root: yaml.Node, parts: list[str], at: str) -> yaml.Node:
    if not parts:
        raise PatchError(f"{at}: JSON 6902 cannot remove the whole object")
    parent = _lookup(root, parts[:-1], at)
    _child(parent, parts[-1], at)
    if nodes.is_map(parent):
        parent.value = [(k, v) for k, v in parent.value if not (nodes.is_scalar(k) and k.value == parts[-1])]
    else:
        del parent.value[int(parts[-1])]
    return root
