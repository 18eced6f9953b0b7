"""rules.yaml: loading (loader), conditions (conditions) and evaluation (engine)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from kvdoctor.derived import is_fact_name
from kvdoctor.rules.loader import Rule, load_rules


def bundled_rules_path() -> Path:
    """rules.yaml inside the wheel, else the repository's top-level copy (editable installs)."""
    packaged = Path(str(resources.files("kvdoctor").joinpath("rules.yaml")))
    if packaged.is_file():
        return packaged
    return Path(__file__).resolve().parents[2] / "rules.yaml"


def load_all_rules(extra: list[Path] | None = None, include_bundled: bool = True) -> list[Rule]:
    paths = ([bundled_rules_path()] if include_bundled else []) + list(extra or [])
    return load_rules(paths, is_fact_name)
