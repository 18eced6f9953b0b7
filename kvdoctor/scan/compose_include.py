"""Compose's `include:`: the Compose files a Compose file takes in (each item a path, or a mapping whose `path` is
one or a list), read as files of the scan with their own directory and .env, as Compose loads them."""

from __future__ import annotations

from pathlib import Path

from kvdoctor.scan import nodes
from kvdoctor.scan.documents import Document, ManifestError, SourceFile, display_path, read_source


def included_sources(doc: Document, already: list) -> tuple[list[SourceFile | ManifestError], list[str]]:
    """The files the document includes that the scan does not read yet (a ManifestError for one that cannot be
    read), and a note for each."""
    root = doc.root
    if not nodes.is_map(root) or nodes.get(root, "kind") is not None or not nodes.is_seq(nodes.get(root, "include")):
        return [], []
    read = {Path(s.path).resolve() for s in already if isinstance(s, SourceFile) and not s.path.startswith("<")}
    found: list[SourceFile | ManifestError] = []
    notes: list[str] = []
    for item, path in _paths(nodes.get(root, "include")):
        target = (Path(doc.file).parent / path).resolve()
        if target in read:
            continue
        read.add(target)
        if not target.is_file():  # Compose itself would stop here; the services of this file are still read
            notes.append(f"{doc.file}:{nodes.line(item)}: include {path!r}: no such file here, so its services are "
                         "not read")  # fmt: skip
            continue
        try:
            found.append(read_source(target))
        except ManifestError as exc:
            found.append(exc)
            continue
        notes.append(f"{display_path(target)}: included by {doc.file}:{nodes.line(item)} (Compose include), read "
                     "with it")  # fmt: skip
    return found, notes


def _paths(include):
    for item in nodes.items(include):
        if nodes.is_scalar(item):
            given = [item]
        else:
            path = nodes.get(item, "path")
            given = nodes.items(path) if nodes.is_seq(path) else [path]
        for node in given:
            text = nodes.text(node)
            if text and "$" not in text and "://" not in text:  # a remote (git/OCI) include is not fetched
                yield node, text
