"""Matrix outputs: one module each (table, json, csv, html), each `render(matrix) -> str` of the same Matrix."""

from __future__ import annotations

import importlib

FORMATS = ("table", "json", "csv", "html")


def matrix_renderer(name: str):
    from kvdoctor.base.errors import UsageError

    if name not in FORMATS:
        raise UsageError(f"unknown matrix format {name!r}", f"use one of {', '.join(FORMATS)}")
    return importlib.import_module(f"kvdoctor.report.matrix.{name}").render
