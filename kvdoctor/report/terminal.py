"""The terminal's colours and the capture of a rich printout into text, shared by check, scan and matrix."""

from __future__ import annotations

import io
from typing import Any, Callable

VERDICT_STYLE = {"PASS": "bold green", "WARN": "bold yellow", "FAIL": "bold red", "ERROR": "bold magenta"}
SEVERITY_STYLE = {"error": "red", "warning": "yellow", "info": "cyan"}


def captured(print_console: Callable[..., None], record: Any, verbose: bool = False, color: bool = False,
             width: int = 120) -> str:  # fmt: skip
    """What `print_console(record, console, verbose)` prints, as text of a fixed width (no wrapping)."""
    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=color, width=width, highlight=False, soft_wrap=False)
    print_console(record, console, verbose)
    return buffer.getvalue()
