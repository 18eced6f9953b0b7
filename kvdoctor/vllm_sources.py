"""Find vLLM kernel sources (wheels or unpacked trees) for a version, for what-ifs and fix checks."""

from __future__ import annotations

import os
from pathlib import Path

from packaging.version import InvalidVersion, Version


def wheel_dirs(cache_dir: Path | None, extra: tuple[str, ...] = ()) -> list[Path]:
    """Where kvdoctor looks for vLLM wheels: --fix-source dirs, $KVDOCTOR_VLLM_WHEELS, <cache>/wheels."""
    dirs = [Path(p) for p in extra if Path(p).is_dir()]
    if os.environ.get("KVDOCTOR_VLLM_WHEELS"):
        dirs.append(Path(os.environ["KVDOCTOR_VLLM_WHEELS"]))
    if cache_dir is not None:
        dirs.append(cache_dir / "wheels")
    return [d for d in dirs if d.is_dir()]


def available_sources(cache_dir: Path | None, extra: tuple[str, ...] = ()) -> dict[str, str]:
    """version -> path of every vLLM wheel or tree kvdoctor can see."""
    from kvdoctor.probes.versions import version_of_source

    found: dict[str, str] = {}
    for path in extra:
        if Path(path).is_file() or (Path(path) / "vllm").is_dir():
            version = version_of_source(Path(path))
            if version:
                found.setdefault(version, path)
    for directory in wheel_dirs(cache_dir, extra):
        for wheel in sorted(directory.glob("vllm-*.whl")):
            parts = wheel.name.split("-")
            if len(parts) > 2:
                found.setdefault(parts[1], str(wheel))
    return found


def source_for_version(version: str, cache_dir: Path | None, extra: tuple[str, ...] = ()) -> str | None:
    return available_sources(cache_dir, extra).get(version)


def source_at_least(minimum: str, cache_dir: Path | None, extra: tuple[str, ...] = ()) -> tuple[str, str] | None:
    """(version, path) of the oldest visible source at or above ``minimum``."""
    candidates = []
    for version, path in available_sources(cache_dir, extra).items():
        try:
            if Version(version) >= Version(minimum):
                candidates.append((Version(version), version, path))
        except InvalidVersion:
            continue
    if not candidates:
        return None
    _, version, path = min(candidates)
    return version, path
