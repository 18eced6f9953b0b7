"""Output formats: one module each, each a function of the same Report.

A module here exposes ``render(report: Report, verbose: bool = False) -> str``; adding a format means
adding a module, nothing else.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Callable

from kvdoctor.base.errors import UsageError
from kvdoctor.model.report import Report


def available_formats() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def renderer(name: str) -> Callable[..., str]:
    if name not in available_formats():
        raise UsageError(f"unknown format {name!r}", f"use one of {', '.join(available_formats())}")
    return importlib.import_module(f"kvdoctor.report.formats.{name}").render


def render(report: Report, name: str, verbose: bool = False) -> str:
    return renderer(name)(report, verbose=verbose)
