"""The one registry of output formats: which formats each command offers, and the module that renders each.

Every format of a command is one adapter module `kvdoctor.report.<command>.<format>` exposing
``render(record, verbose=False) -> str``; the command's terminal format also exposes
``print_console(record, console, verbose=False)``. Offering a format = writing its adapter + naming it here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from kvdoctor.base.errors import UsageError

@dataclass(frozen=True)
class FormatMenu:
    """The formats one command offers."""

    package: str
    """Where its adapters live: `<package>.<format>`."""
    names: tuple[str, ...]
    """In the order `--format` errors and `kvdoctor formats` list them."""
    noun: str
    """What the error calls an unknown one: 'format', 'scan format'."""
    terminal: str
    """The format a person reads in the terminal (also printed when --output takes the chosen one)."""
    option_help: str
    """The `--format` option's help."""

    def available(self) -> list[str]:
        """Every format name, in order."""
        return list(self.names)

    def renderer(self, name: str) -> Callable[..., str]:
        """`render(record, verbose=False) -> str` of the format; an unknown name is a user error."""
        return self._adapter(name).render

    def print_console(self, record: Any, console: Any, verbose: bool = False) -> None:
        """Print the record to a rich console in the terminal format."""
        self._adapter(self.terminal).print_console(record, console, verbose)

    def _adapter(self, name: str) -> Any:
        if name not in self.names:
            raise UsageError(f"unknown {self.noun} {name!r}", f"use one of {', '.join(self.names)}")
        return importlib.import_module(f"{self.package}.{name}")


CHECK = FormatMenu("kvdoctor.report.check", ("github", "json", "junit", "markdown", "prometheus", "sarif", "text"),
                   "format", "text", "text, json, or another from `kvdoctor formats`.")  # fmt: skip
SCAN = FormatMenu("kvdoctor.report.scan", ("github", "json", "junit", "markdown", "sarif", "text"),
                  "scan format", "text", "text, json, sarif, junit, github or markdown.")  # fmt: skip
MATRIX = FormatMenu("kvdoctor.report.matrix", ("table", "json", "csv", "html"),
                    "matrix format", "table", "table, json, csv or html.")  # fmt: skip
VERIFY = FormatMenu("kvdoctor.report.verify", ("github", "json", "junit", "markdown", "text"),
                    "verify format", "text", "text, json, junit, github or markdown.")  # fmt: skip

BY_COMMAND = {"check": CHECK, "explain": CHECK, "scan": SCAN, "matrix": MATRIX, "verify": VERIFY}
"""Each command's menu (explain writes check's Report)."""
