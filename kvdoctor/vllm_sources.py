"""Find vLLM kernel sources (wheels, unpacked trees, fetched releases) for a version, for what-ifs and fix checks."""

from __future__ import annotations

import os
from pathlib import Path

from packaging.version import InvalidVersion, Version

FETCHED = "vllm-kernels"  # <cache>/vllm-kernels/<version>/: kernel files fetched from the index (wheel_fetch)


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
    from kvdoctor.dryrun.kernel_source import FETCH_MARKER as MARKER

    if cache_dir is None or not (cache_dir / FETCHED).is_dir():
        return {}
    return {p.name: str(p) for p in sorted((cache_dir / FETCHED).iterdir()) if (p / MARKER).is_file()}


def available_sources(cache_dir: Path | None, extra: tuple[str, ...] = ()) -> dict[str, str]:
    """version -> path of every vLLM wheel or tree kvdoctor can see (wheels first, then fetched releases)."""
    from kvdoctor.probes.versions import version_of_source, wheel_version

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


def fetch_source(version: str, cache_dir: Path | None, *, offline: bool) -> tuple[str | None, str | None]:
    """(tree of vLLM version's kernel files, None), fetched from its wheel on the user's package index by
    range requests (or read from kvdoctor's cache), else (None, one line on why not). No network if offline."""
    from kvdoctor.dryrun.kernel_source import KERNEL_FILES
    from kvdoctor.dryrun.wheel_fetch import fetch_release

    result = fetch_release(version, cache_dir, KERNEL_FILES, offline=offline)
    return (str(result.root), None) if result.root else (None, result.note)


def source_at_least(minimum: str, cache_dir: Path | None, extra: tuple[str, ...] = (), *,
                    fetch: bool = False, offline: bool = True) -> tuple[str, str] | None:  # fmt: skip
    """(version, path) of the oldest visible source at or above ``minimum``; with fetch (and not offline),
    ``minimum`` itself is fetched from the package index when nothing at hand qualifies."""
    candidates = []
    for version, path in available_sources(cache_dir, extra).items():
        try:
            if Version(version) >= Version(minimum):
                candidates.append((Version(version), version, path))
        except InvalidVersion:
            continue
    if candidates:
        _, version, path = min(candidates)
        return version, path
    if fetch and not offline:
        tree, _ = fetch_source(minimum, cache_dir, offline=False)
        if tree:
            return minimum, tree
    return None
