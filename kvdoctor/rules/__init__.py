"""Rules as data (kvdoctor/data/rules/): one rule (rule), the files and their loader (loader), `when`
conditions (conditions) and evaluation over facts (engine)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from kvdoctor.data.fact_names import is_fact_name
from kvdoctor.rules.loader import Rule, bundled_ids, bundled_rules, bundled_stamps, file_stamp, load_rules

Stamped = tuple[tuple[Path, "tuple[int, int] | None"], ...]


def load_all_rules(extra: list[Path] | None = None) -> list[Rule]:
    """`kvdoctor check`'s rules: the bundled check rules, then the user's --rules files in order. An id a user
    file shares with any bundled rule (of any stage) or with another user file is refused."""
    return list(_load_cached(bundled_stamps(), tuple((path, file_stamp(path)) for path in extra or ())))


@lru_cache(maxsize=8)
def _load_cached(bundled: Stamped, stamped: Stamped) -> tuple[Rule, ...]:
    """Parsed rules per (path, mtime, size) of every file: a matrix worker judges many cells with one parse."""
    own = bundled_rules("check", is_fact_name)
    return own + tuple(load_rules([path for path, _ in stamped], is_fact_name, taken=bundled_ids()))
