"""The vLLM sources at hand (wheels, unpacked trees, releases fetched earlier) by version, for what-ifs and fix checks.
Fetching a release that is not at hand is the dry run's job (dryrun/release_sources.py)."""

from __future__ import annotations

import os
from pathlib import Path

FETCHED = "vllm-kernels"  # <cache>/vllm-kernels/<version>/: kernel files fetched from the index (wheel_fetch)
FETCH_MARKER = "kvdoctor-fetch.json"  # written by wheel_fetch next to the files it fetched


def wheel_dirs(cache_dir: Path | None, extra: tuple[str, ...] = ()) -> list[Path]:
    """Where kvdoctor looks for vLLM wheels: --fix-source dirs, $KVDOCTOR_VLLM_WHEELS, <cache>/wheels."""
    dirs = [Path(p) for p in extra if Path(p).is_dir()]
    if os.environ.get("KVDOCTOR_VLLM_WHEELS"):
        dirs.append(Path(os.environ["KVDOCTOR_VLLM_WHEELS"]))
    if cache_dir is not None:
        dirs.append(cache_dir / "wheels")
    return [d for d in dirs if d.is_dir()]


def _fetched_releases(cache_dir: Path | None) -> dict[str, str]:
    """version -> tree of every release whose kernel files kvdoctor fetched earlier."""
    if cache_dir is None or not (cache_dir / FETCHED).is_dir():
        return {}
    return {p.name: str(p) for p in sorted((cache_dir / FETCHED).iterdir()) if (p / FETCH_MARKER).is_file()}


def available_sources(cache_dir: Path | None, extra: tuple[str, ...] = ()) -> dict[str, str]:
    """version -> path of every vLLM wheel or tree kvdoctor can see (wheels first, then fetched releases)."""
    from kvdoctor.base.versions import wheel_version
    from kvdoctor.facts.probes.versions import version_of_source

    found: dict[str, str] = {}
    for path in extra:
        if Path(path).is_file() or (Path(path) / "vllm").is_dir():
            version = version_of_source(Path(path))
            if version:
                found.setdefault(version, path)
    for directory in wheel_dirs(cache_dir, extra):
        for wheel in sorted(directory.glob("vllm-*.whl")):
            version = wheel_version(wheel)
            if version:
                found.setdefault(version, str(wheel))
    for version, tree in _fetched_releases(cache_dir).items():
        found.setdefault(version, tree)
    return found


def source_for_version(version: str, cache_dir: Path | None, extra: tuple[str, ...] = ()) -> str | None:
    return available_sources(cache_dir, extra).get(version)
