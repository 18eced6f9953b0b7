"""Markdown for pull-request comments and job summaries: verdict marks, table cells escaped, tables.

A pure builder of plain strings; the check and scan adapters choose what goes in the rows."""

from __future__ import annotations

from typing import Sequence

VERDICT_MARK = {"PASS": "✅", "WARN": "⚠️", "FAIL": "❌", "ERROR": "⛔"}
SEVERITY_MARK = {"error": "🔴 error", "warning": "🟡 warning", "info": "🔵 info"}


def cell(text: str) -> str:
    """Text that stays inside one table cell: a '|' would split it, a newline would end the row."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def html_text(text: str) -> str:
    """Text inside an HTML element such as <summary>, where markdown is not rendered."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A GitHub table, one line per row; every cell escaped with `cell`."""
    lines = [_row(header), _row(["---"] * len(header))]
    return lines + [_row(r) for r in rows]


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cell(c) for c in cells) + " |"
