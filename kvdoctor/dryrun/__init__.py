"""Dry run: compile vLLM's real TurboQuant KV-cache Triton kernels for a target GPU, without that GPU.

Light to import: Triton is imported only inside the compiler child process (kvdoctor.dryrun.child).
"""

from __future__ import annotations

from kvdoctor.dryrun.kernel_source import DryRunSourceError
from kvdoctor.dryrun.records import CompileFailure, DryRunReport, DryRunRequest, FixVerification, KernelResult
from kvdoctor.dryrun.runner import (
    dry_run_applies,
    kernel_roles_for,
    run_dry_run,
    run_dry_runs,
    to_json,
    verify_fixes,
)

__all__ = [
    "CompileFailure",
    "DryRunReport",
    "DryRunRequest",
    "DryRunSourceError",
    "FixVerification",
    "KernelResult",
    "dry_run_applies",
    "kernel_roles_for",
    "run_dry_run",
    "run_dry_runs",
    "to_json",
    "verify_fixes",
]
