"""vLLM version strings: one parser, the two orders kvdoctor compares releases in, and runs of releases.

Two orders, because their callers differ on odd input and reports must not change: `pack_order` sorts the
knowledge pack and decides whether a release is newer than it (a local part such as `+cu126` is ignored, a
string that is no version counts as newer); `pep440_order` is PEP 440's own (a local part counts, a string
that is no version counts as 0). They agree on every release the pack holds and every plain `X.Y.Z`.
`packaging` is imported only for a version that is not plain digits (no pack release), so sorting the pack at
start-up imports nothing.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

if TYPE_CHECKING:
    from packaging.version import Version


@lru_cache(maxsize=None)
def parse_version(text: str | None) -> Version | None:
    """The PEP 440 version `text` spells, or None when it is None, empty or not a version."""
    if not text:
        return None
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text)
    except InvalidVersion:
        return None


def release_numbers(text: str | None) -> tuple[int, ...]:
    """The release numbers as written ('0.26.0rc1' -> (0, 26, 0)); () when `text` is no version, which orders
    before every release."""
    version = parse_version(text)
    return version.release if version is not None else ()


def pep440_order(text: str) -> Version:
    """`text` as a PEP 440 version, to compare with `<`/`>`; a string that is no version counts as 0."""
    return parse_version(text) or parse_version("0")


def pack_order(text: str) -> tuple:
    """Sort key of releases in the knowledge pack's order: by release numbers as written; a pre- or dev release
    just before its release, a post release just after, a local part ignored; a string that is no version after
    every release."""
    parts = text.split(".")
    if all(p.isdigit() for p in parts):  # every pack release: no need to import packaging
        return (0, tuple(int(p) for p in parts), 0)
    version = parse_version(text)
    if version is None:
        return (1, (), 0)
    return (0, version.release, -1 if (version.pre or version.dev) else int(version.post is not None))


def release_runs(versions: Iterable[str], order: Sequence[str]) -> list[tuple[str, str]]:
    """(first, last) of each run of `versions` that follow each other in `order`, in that order; a version not
    in `order` is a run of its own, after the others."""
    position = {v: i for i, v in enumerate(order)}
    chosen = sorted(set(versions), key=lambda v: position.get(v, len(position)))
    runs: list[list[str]] = []
    for version in chosen:
        if runs and version in position and position.get(runs[-1][-1]) == position[version] - 1:
            runs[-1].append(version)
        else:
            runs.append([version])
    return [(run[0], run[-1]) for run in runs]


def describe_runs(versions: Iterable[str], order: Sequence[str], separator: str = ", ") -> str:
    """'0.20.0-0.25.1, 0.27.0': release_runs written out ('' for no versions)."""
    runs = release_runs(versions, order)
    return separator.join(first if first == last else f"{first}-{last}" for first, last in runs)


def wheel_version(path: Path | str, project: str = "vllm") -> str | None:
    """The version a wheel's file name gives (the wheel spec puts it there), or None when it is no such wheel."""
    from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

    try:
        name, version, _, _ = parse_wheel_filename(Path(path).name)
    except InvalidWheelFilename:
        return None
    return str(version) if name == canonicalize_name(project) else None
