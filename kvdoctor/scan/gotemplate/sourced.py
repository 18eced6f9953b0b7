"""Values that remember where they were written (a values file's line), so that what a template prints from them
can be traced back to that line."""

from __future__ import annotations

from typing import Any

Origin = tuple[str, int]
"""(file as shown, 1-based line)."""


class SourcedStr(str):
    origin: Origin

    def __new__(cls, text: str, origin: Origin) -> "SourcedStr":
        made = super().__new__(cls, text)
        made.origin = origin
        return made


class SourcedFloat(float):
    origin: Origin

    def __new__(cls, number: float, origin: Origin) -> "SourcedFloat":
        made = super().__new__(cls, number)
        made.origin = origin
        return made


def origin_of(value: Any) -> Origin | None:
    return getattr(value, "origin", None)


def with_origin(value: Any, origin: Origin) -> Any:
    """A string or number that remembers its origin; other values as they are."""
    if isinstance(value, str):
        return SourcedStr(value, origin)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return SourcedFloat(float(value), origin)
    return value
