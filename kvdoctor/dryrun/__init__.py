"""Dry run: compile vLLM's real Triton kernels (TurboQuant, Triton attention) for a target GPU, without that GPU.

Light to import: the records and the failure-kind registry load at once; the runner (and what it imports) on
first use; Triton only inside the compiler child process (kvdoctor.dryrun.child).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from kvdoctor.model.dry_run import (
    CompileFailure,
    DryRunReport,
    DryRunRequest,
    KernelResult,
    Status,
    from_json,
    to_json,
)

_LAZY = {
    "DryRunSourceError": "kvdoctor.dryrun.kernel_source",
    "dry_run_applies": "kvdoctor.dryrun.runner",
    "kernel_roles_for": "kvdoctor.dryrun.kinds",
    "run_dry_run": "kvdoctor.dryrun.runner",
    "run_dry_runs": "kvdoctor.dryrun.runner",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'kvdoctor.dryrun' has no attribute {name!r}")


__all__ = [
    "CompileFailure",
    "DryRunReport",
    "DryRunRequest",
    "DryRunSourceError",
    "KernelResult",
    "Status",
    "dry_run_applies",
    "from_json",
    "kernel_roles_for",
    "run_dry_run",
    "run_dry_runs",
    "to_json",
]
