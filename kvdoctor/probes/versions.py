"""Versions of the serving stack from installed distribution metadata; nothing is imported."""

from __future__ import annotations

import platform
from importlib import metadata

from kvdoctor.facts import VersionFacts

_DISTRIBUTIONS = {
    "vllm": ("vllm",),
    "triton": ("triton",),
    "torch": ("torch",),
    "flashinfer": ("flashinfer-python", "flashinfer"),
}


def installed_version(*names: str) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def probe_versions() -> VersionFacts:
    found = {fact: installed_version(*names) for fact, names in _DISTRIBUTIONS.items()}
    return VersionFacts(
        vllm=found["vllm"],
        vllm_source="installed" if found["vllm"] else None,
        triton=found["triton"],
        torch=found["torch"],
        flashinfer=found["flashinfer"],
        python=platform.python_version(),
    )
