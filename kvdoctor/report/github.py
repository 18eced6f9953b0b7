"""GitHub Actions workflow commands: `::error file=F,line=N,title=T::message`, escaped as the runner expects.

A pure builder of plain records; the check and scan adapters say what each annotation is about."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

LEVEL = {"error": "error", "warning": "warning", "info": "notice"}  # kvdoctor severity -> workflow command
VERDICT_LEVEL = {"FAIL": "error", "ERROR": "error", "WARN": "warning", "PASS": "notice"}


@dataclass(frozen=True)
class Annotation:
    """One workflow command; the pull request shows it on `file`:`line` when given."""

    level: str
    """'error', 'warning' or 'notice'."""
    title: str
    message: str
    """May span lines: the runner shows the newlines."""
    file: str | None = None
    line: int | None = None
    """Ignored without a file; 0 or None means the file as a whole."""


def escape_data(text: str) -> str:
    """The message part: %, CR and LF would end or garble the command."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A property value (file, title): also ':' and ',', which separate properties."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation_line(annotation: Annotation) -> str:
    """One `::level properties::message` line."""
    properties = []
    if annotation.file is not None:
        properties.append(f"file={escape_property(annotation.file)}")
        if annotation.line:
            properties.append(f"line={annotation.line}")
    properties.append(f"title={escape_property(annotation.title)}")
    return f"::{annotation.level} {','.join(properties)}::{escape_data(annotation.message)}"


def annotations_text(annotations: Iterable[Annotation]) -> str:
    """The whole output: one command per line."""
    return "\n".join(annotation_line(a) for a in annotations) + "\n"
