"""A vLLM release's kernel files when they are not at hand: fetched from its wheel on the package index (range
requests, cached), and the oldest release at or above a minimum for fix checks."""

from __future__ import annotations

from pathlib import Path

from packaging.version import InvalidVersion, Version

from kvdoctor.facts.probes.vllm_sources import available_sources


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
