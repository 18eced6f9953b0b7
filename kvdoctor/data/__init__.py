"""kvdoctor's bundled data files (read as plain files: importlib.resources costs ~7 ms of imports per run)."""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent
PACKAGE_DIR = DATA_DIR.parent


def read_data(name: str) -> str:
    """The text of a file in kvdoctor/data."""
    return (DATA_DIR / name).read_text(encoding="utf-8")
