"""Release boundaries of vLLM's kernel launches, from the one table kvdoctor/data/kernel_layouts.yaml."""

from __future__ import annotations

from functools import lru_cache

from kvdoctor.base.yaml_safe import load_yaml_cached
from kvdoctor.data import read_data


@lru_cache(maxsize=1)
def _table() -> dict:
    return load_yaml_cached(read_data("kernel_layouts.yaml"), "kernel_layouts.yaml")


def launches_since(fact: str, release: tuple[int, ...]) -> bool:
    """Does vLLM `release` ((major, minor, micro); () when unknown) launch its kernels the way `fact` (a key of
    kernel_layouts.yaml) says? An unknown release does only where the fact says `unknown_release: newest`."""
    entry = _table()[fact]
    if release == ():
        return entry.get("unknown_release") == "newest"
    return release >= tuple(int(part) for part in entry["since"].split("."))
