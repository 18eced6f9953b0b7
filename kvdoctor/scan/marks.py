"""Node marks that name their file: an object assembled from several files (a Kustomize base and its patches, a KServe
InferenceService and its ServingRuntime) keeps each value's own file and line, read by the readers as one document."""

from __future__ import annotations

from collections.abc import Callable

import yaml

from kvdoctor.scan.documents import Document
from kvdoctor.scan.workload import LINE_FILE_STRIDE


def marked(node: yaml.Node, file: str, text: str) -> yaml.Node:
    """A copy with every mark naming ``file`` and holding its ``text`` (a word is placed in the file it is in); a node
    already marked with its file (one ``placed_document`` moved) keeps that file and gets its real line back."""
    if isinstance(node.start_mark.buffer, str) and node.start_mark.name != file or node.start_mark.line >= LINE_FILE_STRIDE:
        file, text = node.start_mark.name, node.start_mark.buffer
    start, end = _mark(node.start_mark, file, text), _mark(node.end_mark, file, text)
    return _rebuilt(node, lambda inner: marked(inner, file, text), start, end)


def _mark(mark: yaml.Mark, file: str, text: str) -> yaml.Mark:
    return yaml.Mark(file, mark.index, mark.line % LINE_FILE_STRIDE, mark.column, text, None)


def placed_document(root: yaml.Node, index: int = 0, home: str | None = None) -> Document:
    """The object as a document of ``home`` (default: the file its root is written in); its nodes of other files carry
    that file in their line (file k of ``line_files``, 1-based: line + k x LINE_FILE_STRIDE), which Workload.at reads
    back."""
    home = home or root.start_mark.name
    others: list[str] = []
    return Document(home, index, _encoded(root, home, others), tuple(others))


def _encoded(node: yaml.Node, home: str, others: list[str]) -> yaml.Node:
    mark = node.start_mark
    start, end = mark, node.end_mark
    if mark.name != home:
        if mark.name not in others:
            others.append(mark.name)
        shift = (others.index(mark.name) + 1) * LINE_FILE_STRIDE
        start = yaml.Mark(mark.name, mark.index, mark.line + shift, mark.column, mark.buffer, None)
        end = yaml.Mark(mark.name, node.end_mark.index, node.end_mark.line + shift, node.end_mark.column,
                        node.end_mark.buffer, None)  # fmt: skip
    return _rebuilt(node, lambda inner: _encoded(inner, home, others), start, end)


def _rebuilt(node: yaml.Node, child: Callable[[yaml.Node], yaml.Node], start: yaml.Mark, end: yaml.Mark) -> yaml.Node:
    """The node with new marks, its children each made by ``child``."""
    if isinstance(node, yaml.MappingNode):
        return yaml.MappingNode(node.tag, [(child(k), child(v)) for k, v in node.value], start, end, node.flow_style)
    if isinstance(node, yaml.SequenceNode):
        return yaml.SequenceNode(node.tag, [child(v) for v in node.value], start, end, node.flow_style)
    return yaml.ScalarNode(node.tag, node.value, start, end, node.style)
