"""rules.yaml: loading (loader), conditions (conditions) and evaluation (engine)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from kvdoctor.data import PACKAGE_DIR
from kvdoctor.facts.derive import is_fact_name
from kvdoctor.rules.loader import Rule, load_rules


def bundled_rules_path() -> Path:
    """rules.yaml inside the wheel, else the repository's top-level copy (editable installs)."""
    packaged = PACKAGE_DIR / "rules.yaml"
    if packaged.is_file():
        return packaged
    return Path(__file__).resolve().parents[2] / "rules.yaml"


def load_all_rules(extra: list[Path] | None = None, include_bundled: bool = True) -> list[Rule]:
    paths = ([bundled_rules_path()] if include_bundled else []) + list(extra or [])
    return list(_load_cached(tuple((p, _stamp(p)) for p in paths)))


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
        return stat.st_mtime_ns, stat.st_size
    except OSError:
        return None  # the loader reports the problem


@lru_cache(maxsize=8)
def _load_cached(stamped: tuple[tuple[Path, tuple[int, int] | None], ...]) -> tuple[Rule, ...]:
    """Parsed rules per (path, mtime, size): a matrix worker judges many cells with one parse."""
    return tuple(load_rules([path for path, _ in stamped], is_fact_name, bundled=bundled_rules_path()))
