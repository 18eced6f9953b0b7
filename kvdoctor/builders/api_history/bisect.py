"""A module's API in every release, with as few fetches as the releases between two wheels read whole allow.

Between two releases whose module is known (read whole, or fetched), a release whose copy of the module has a
sha256 already seen is known for free, and one without the module is known from its file list. Where the two
known ends agree, the releases between are taken to agree with them (a name added and removed again between two
read releases is missed); where they differ, the middle release's module is fetched and each half bisected again.
So each change of a module's API is placed at its exact release for about log2(releases between) fetches.
"""

from __future__ import annotations

import time
from pathlib import Path

from kvdoctor.builders.api_history.extract import module_api, module_name
from kvdoctor.builders.api_history.sources import Release, cached_api, store_api

ABSENT = None  # the module is not in that release
RETRIES = 3


class ModuleApis:
    """Each (module path, sha256)'s keys, extracted once: from memory, the disk cache, or the release's source."""

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = cache_dir
        self.known: dict[tuple[str, str], frozenset] = {}
        self.fetched = 0

    def cheap(self, release: Release, path: str):
        """The module's keys when they cost no fetch, ABSENT when the release lacks it; else raises KeyError."""
        digest = release.hashes.get(path)
        if digest is None:
            return ABSENT
        if (path, digest) in self.known:
            return self.known[(path, digest)]
        stored = cached_api(self.cache_dir, path, digest)
        if stored is None:
            raise KeyError(path)
        keys = frozenset(tuple(k) for k in stored)
        self.known[(path, digest)] = keys
        return keys

    def get(self, release: Release, path: str):
        try:
            return self.cheap(release, path)
        except KeyError:
            pass
        digest = release.hashes[path]
        source = self._read(release, path)
        keys = module_api(module_name(path) or "", source, path.endswith("/__init__.py"))
        if not release.read_whole:
            self.fetched += 1
        store_api(self.cache_dir, path, digest, sorted(keys))
        self.known[(path, digest)] = keys
        return keys

    @staticmethod
    def _read(release: Release, path: str) -> bytes:
        for attempt in range(RETRIES):
            try:
                return release.source(path)
            except OSError:
                if attempt == RETRIES - 1:
                    raise
                time.sleep(1 + attempt)
        raise AssertionError("unreachable")


def module_through(apis: ModuleApis, path: str, span: list[Release]) -> list:
    """The module's keys (or ABSENT) in each release of `span`, whose first and last are read whole. Which releases
    count as known depends on the span alone (never on what a cache holds), so a rebuild decides the same."""
    values: list = [None] * len(span)
    known = [False] * len(span)
    for i in (0, len(span) - 1):
        values[i], known[i] = apis.get(span[i], path), True
    for i, release in enumerate(span):
        if path not in release.hashes:
            values[i], known[i] = ABSENT, True
    _same_file(path, span, values, known)
    _settle(apis, path, span, values, known, 0, len(span) - 1)
    return values


def _same_file(path: str, span: list[Release], values: list, known: list[bool]) -> None:
    """A release whose copy of the module is byte-identical to a known release's is known too."""
    by_digest = {span[i].hashes[path]: values[i] for i in range(len(span)) if known[i] and values[i] is not ABSENT}
    for i, release in enumerate(span):
        if not known[i] and release.hashes.get(path) in by_digest:
            values[i], known[i] = by_digest[release.hashes[path]], True


def _settle(apis: ModuleApis, path: str, span: list[Release], values: list, known: list[bool], low: int,
            high: int) -> None:
    """Fill values[low+1:high] (the ends known) by the rule of the module docstring."""
    inner = [i for i in range(low + 1, high) if not known[i]]
    if not inner:
        return
    cut = next((i for i in range(low + 1, high) if known[i]), None)
    if cut is not None:  # a release known for free splits the stretch
        _settle(apis, path, span, values, known, low, cut)
        _settle(apis, path, span, values, known, cut, high)
        return
    if values[low] == values[high] and values[low] is not ABSENT:
        for i in inner:
            values[i], known[i] = values[low], True
        return
    middle = inner[len(inner) // 2]
    values[middle], known[middle] = apis.get(span[middle], path), True
    _same_file(path, span, values, known)
    _settle(apis, path, span, values, known, low, middle)
    _settle(apis, path, span, values, known, middle, high)
