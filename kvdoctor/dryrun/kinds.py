"""The failure-kind registry (`kvdoctor/data/failure_kinds.yaml`): every kind a dry run can report, in one place."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from kvdoctor.yaml_safe import load_yaml


@lru_cache(maxsize=1)
def failure_kinds() -> dict[str, str]:
    """kind -> one line on what it means."""
    return {kind: entry["meaning"] for kind, entry in _registry().items()}


@lru_cache(maxsize=1)
def _registry() -> dict[str, dict]:
    text = resources.files("kvdoctor.data").joinpath("failure_kinds.yaml").read_text(encoding="utf-8")
    return load_yaml(text)


def kernel_roles_for(kind: str | None) -> tuple[str, ...] | None:
    """Roles of the kernels that can fail with this kind (the registry's `roles`); None = every role."""
    roles = _registry().get(kind or "", {}).get("roles")
    return tuple(roles) if roles else None
