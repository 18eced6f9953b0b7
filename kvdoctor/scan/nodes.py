"""Walk composed YAML nodes: mapping look-ups (with `<<` merge keys), scalars, lines, safe plain values."""

from __future__ import annotations

from typing import Any, Iterator

import yaml
from yaml.constructor import ConstructorError, SafeConstructor

MAX_MERGE_DEPTH = 20


def line(node: yaml.Node | None) -> int | None:
    """1-based line where a node starts."""
    return node.start_mark.line + 1 if node is not None else None


def text_line(node: yaml.Node) -> int:
    """1-based line of a string's first character: a block scalar (`|`, `>`) starts on the line after its key."""
    return (line(node) or 1) + (1 if node.style in ("|", ">") else 0)


def str_node(text: str, at: yaml.Node) -> yaml.ScalarNode:
    """A string node placed where ``at`` starts (a value kvdoctor writes into a tree it builds)."""
    return yaml.ScalarNode("tag:yaml.org,2002:str", text, at.start_mark, at.start_mark)


def map_node(pairs_: list[tuple[yaml.Node, yaml.Node]], at: yaml.Node) -> yaml.MappingNode:
    """A mapping node of (key node, value node) pairs, placed where ``at`` is."""
    return yaml.MappingNode("tag:yaml.org,2002:map", pairs_, at.start_mark, at.end_mark)


def is_map(node: yaml.Node | None) -> bool:
    return isinstance(node, yaml.MappingNode)


def is_seq(node: yaml.Node | None) -> bool:
    return isinstance(node, yaml.SequenceNode)


def is_scalar(node: yaml.Node | None) -> bool:
    return isinstance(node, yaml.ScalarNode)


def pairs(node: yaml.Node | None, _depth: int = 0) -> Iterator[tuple[str, yaml.Node, yaml.Node]]:
    """(key text, key node, value node) of a mapping, own keys first, then those merged in with `<<`."""
    if not is_map(node) or _depth > MAX_MERGE_DEPTH:
        return
    merged: list[yaml.Node] = []
    for key, value in node.value:
        if is_scalar(key) and key.tag == "tag:yaml.org,2002:merge":
            merged += value.value if is_seq(value) else [value]
        elif is_scalar(key):
            yield key.value, key, value
    for extra in merged:
        yield from pairs(extra, _depth + 1)


def get(node: yaml.Node | None, *path: str) -> yaml.Node | None:
    """The node at a key path, or None; the first occurrence of a key wins (own keys before merged ones)."""
    for key in path:
        node = next((v for k, _, v in pairs(node) if k == key), None)
        if node is None:
            return None
    return node


def items(node: yaml.Node | None) -> list[yaml.Node]:
    return list(node.value) if is_seq(node) else []


def text(node: yaml.Node | None) -> str | None:
    """A scalar's text as written (numbers and booleans too), None for null, mappings and sequences."""
    if not is_scalar(node) or node.tag == "tag:yaml.org,2002:null":
        return None
    return str(node.value)


def plain(node: yaml.Node | None) -> Any:
    """A node as safe plain Python (SafeConstructor: no tags beyond YAML's own)."""
    if node is None:
        return None
    try:
        return SafeConstructor().construct_object(node, deep=True)
    except (ConstructorError, RecursionError, ValueError, TypeError):
        return None


def scalars(node: yaml.Node | None, _depth: int = 0) -> Iterator[str]:
    """Every scalar's text under a node (keys too)."""
    if is_scalar(node):
        yield str(node.value)
    elif is_seq(node) and _depth < 200:
        for item in node.value:
            yield from scalars(item, _depth + 1)
    elif is_map(node) and _depth < 200:
        for key, value in node.value:
            yield from scalars(key, _depth + 1)
            yield from scalars(value, _depth + 1)
