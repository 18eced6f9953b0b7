"""The failure-kind registry (`kvdoctor/data/failure_kinds.yaml`): every kind a dry run can report, in one place."""

from __future__ import annotations

from functools import lru_cache

from kvdoctor.data import read_data
from kvdoctor.base.yaml_safe import load_yaml_cached


@lru_cache(maxsize=1)
def failure_kinds() -> dict[str, str]:
    """kind -> one line on what it means."""
    return {kind: entry["meaning"] for kind, entry in _registry().items()}


@lru_cache(maxsize=1)
def _registry() -> dict[str, dict]:
    text = read_data("failure_kinds.yaml")
    return load_yaml_cached(text, "failure_kinds.yaml")


def kernel_roles_for(kind: str | None) -> tuple[str, ...] | None:
    """Roles of the kernels that can fail with this kind (the registry's `roles`); None = every role."""
    roles = _registry().get(kind or "", {}).get("roles")
    return tuple(roles) if roles else None
