"""Scan output formats: one module each, each a function of the same ScanReport.

A module here exposes ``render(report: ScanReport, verbose: bool = False) -> str``; per-workload parts reuse
kvdoctor.report.formats' helpers for the check report inside.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Callable

from kvdoctor.base.errors import UsageError


def available_scan_formats() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def scan_renderer(name: str) -> Callable[..., str]:
    if name not in available_scan_formats():
        raise UsageError(f"unknown scan format {name!r}", f"use one of {', '.join(available_scan_formats())}")
    return importlib.import_module(f"kvdoctor.report.scan.{name}").render
