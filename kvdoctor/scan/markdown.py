"""A Markdown file named as a path (`kvdoctor scan README.md`) -> the workloads of its fenced code blocks: shell
blocks (bash, sh, shell, console, zsh, none) read as scripts (a `$ ` prompt removed), YAML blocks as manifests, each
on the file's own lines. A directory walk never reads Markdown: its commands are examples for a reader, checked only
when asked for."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import PurePosixPath
from typing import Callable

from kvdoctor.scan.documents import Document, ManifestError, SourceFile, compose_documents
from kvdoctor.scan.scripts import script_findings
from kvdoctor.scan.workload import Workload

MARKDOWN_SUFFIXES = (".md", ".markdown")
FENCE = re.compile(r"^([ \t]{0,3})(`{3,}|~{3,})[ \t]*([\w+-]*)[^\n]*\n(.*?)^\1?[ \t]{0,3}\2[`~]*[ \t]*$", re.M | re.S)
SHELL_BLOCKS = {"", "bash", "sh", "shell", "console", "zsh", "shell-session", "shellsession", "terminal"}
YAML_BLOCKS = {"yaml", "yml"}
PROMPT = re.compile(r"^([ \t]*)\$ ", re.M)
NOTE = "a code block of {file} (named as a path: Markdown is read only then), read as the {what} it shows"
ReadDocument = Callable[[Document, str], list[Workload]]


def is_markdown(source: SourceFile) -> bool:
    return source.path.lower().endswith(MARKDOWN_SUFFIXES)


def read(source: SourceFile, read_document: ReadDocument) -> tuple[list[Workload], list[str]]:
    """The workloads of the file's shell and YAML code blocks, and the notes on commands kvdoctor cannot see."""
    name = PurePosixPath(source.path).name
    found: list[Workload] = []
    notes: list[str] = []
    for language, first_line, body in code_blocks(source.text):
        if language in SHELL_BLOCKS:
            workloads, unseen = script_findings(PROMPT.sub(r"\1  ", body), first_line, source.path, name)
            found += [replace(w, notes=w.notes + (NOTE.format(file=name, what="script"),)) for w in workloads]
            notes += unseen
        elif language in YAML_BLOCKS:
            try:
                documents = compose_documents(SourceFile(source.path, "\n" * (first_line - 1) + body))
            except ManifestError:
                continue  # an excerpt, not a whole manifest
            found += [replace(w, notes=w.notes + (NOTE.format(file=name, what="manifest"),))
                      for doc in documents for w in read_document(doc, source.text)]  # fmt: skip
    return found, notes


def code_blocks(text: str) -> list[tuple[str, int, str]]:
    """(language, the line its body starts on, the body) of each fenced code block."""
    return [(match.group(3).lower(), text.count("\n", 0, match.start(4)) + 1, match.group(4))
            for match in FENCE.finditer(text)]  # fmt: skip
