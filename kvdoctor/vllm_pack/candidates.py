"""Which vLLM releases a judgement covers: the judged one, or (unknown) every release the pack read in full.

A fact about an unknown release is decided only when every candidate release agrees; otherwise it stays
unknown and the report says which releases go which way ("rejected by 0.20.0-0.25.1").
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Iterable

from packaging.version import InvalidVersion, Version


@dataclass(frozen=True)
class Candidates:
    """The releases a judgement is made for."""

    releases: tuple[Any, ...]
    """ReleaseFacts from the knowledge pack, oldest first."""
    exact: bool
    """True when the vLLM version is known and in the pack."""
    note: str | None = None
    """Why the set is empty or wider than one release."""


@dataclass(frozen=True)
class Agreement:
    """How the candidate releases answer one question."""

    value: Any
    """The common answer, or None when they disagree (or there are none)."""
    split: tuple[tuple[Any, str], ...] = ()
    """(answer, release range) for every distinct answer, in release order."""


def candidates(vllm_version: str | None) -> Candidates:
    from kvdoctor.vllm_pack import load_release, pack_releases

    known = pack_releases()
    if vllm_version is None:  # judged against the releases read in full; older ones only when named
        full = [v for v in known if load_release(v).has("backend_replay")] or list(known)
        older = [v for v in known if v not in full]
        note = (f"vLLM version unknown: judged against every release kvdoctor read in full ({describe_range(full)}); "
                f"{describe_range(older)} are judged only when named with --vllm-version") if older else None
        return Candidates(tuple(load_release(v) for v in full), exact=False, note=note)
    release = load_release(vllm_version)
    if release is not None:
        return Candidates((release,), exact=True, note=partial_note(release))
    newest = known[-1] if known else None
    if newest is not None and _version(vllm_version) > _version(newest):
        return Candidates((), exact=False, note=f"kvdoctor's facts about vLLM stop at {newest}; {vllm_version} is newer")
    return Candidates((), exact=False, note=f"vLLM {vllm_version} is not among the releases kvdoctor read "
                      f"({describe_range(known)})")  # fmt: skip


def partial_note(release: Any) -> str | None:
    """What an older release's facts lack ('... stop at 0.20.0'), or None for a release the pack read fully."""
    from kvdoctor.vllm_pack import KINDS, releases_with

    missing = [k for k in KINDS if k != "backend_grid" and not release.has(k)]
    if not missing:
        return None
    full = releases_with("backend_replay")
    how = ("its backend choice is vLLM's own answer over a grid of inputs (no per-backend reasons)"
           if release.has("backend_grid") else "")
    stop = f"; these facts stop at {full[0]}" if full else ""
    lacking = ", ".join(KINDS[k] for k in missing)
    return f"vLLM {release.version}: kvdoctor read its dtype and backend facts only; {how}; not read: {lacking}{stop}" \
        .replace("only; ;", "only;")


@lru_cache(maxsize=1)
def all_serve_options() -> frozenset[str]:
    """Every option string `vllm serve` has in any release the pack read."""
    from kvdoctor.vllm_pack import load_release, pack_releases

    names: set[str] = set()
    for version in pack_releases():
        names.update(load_release(version).serve_args)
    return frozenset(names)


def agree(releases: Iterable[Any], answer: Callable[[Any], Any]) -> Agreement:
    """Ask every release; the value is decided only when all answers are equal."""
    pairs = [(release.version, answer(release)) for release in releases]
    if not pairs:
        return Agreement(None)
    groups: dict[Any, list[str]] = {}
    for version, value in pairs:
        groups.setdefault(_hashable(value), []).append(version)
    split = tuple((value, describe_range(versions)) for value, versions in groups.items())
    return Agreement(pairs[0][1] if len(groups) == 1 else None, split)


def describe_range(versions: Iterable[str]) -> str:
    """'0.20.0-0.25.1, 0.27.0': runs of consecutive pack releases; 'none' for no versions."""
    from kvdoctor.vllm_pack import pack_releases

    order = {v: i for i, v in enumerate(pack_releases())}
    chosen = sorted(set(versions), key=lambda v: order.get(v, len(order)))
    runs: list[list[str]] = []
    for version in chosen:
        if runs and order.get(version) is not None and order.get(runs[-1][-1]) == order[version] - 1:
            runs[-1].append(version)
        else:
            runs.append([version])
    return ", ".join(run[0] if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs) or "none"


def covered(version: str, low: str, high: str) -> bool:
    """Is `version` within [low, high]? A bound of fewer parts covers every release it prefixes (0.33 = 0.33.*);
    ('pack', 'pack') covers the releases the knowledge pack read."""
    if low == "pack":
        from kvdoctor.vllm_pack import pack_releases

        return _version(version).base_version in pack_releases() or version in pack_releases()
    release = _version(version).release
    lo, hi = _version(low).release, _version(high).release
    return _pad(release, len(lo)) >= lo and release[: len(hi)] <= hi


def _pad(release: tuple[int, ...], length: int) -> tuple[int, ...]:
    return release + (0,) * max(0, length - len(release))


@lru_cache(maxsize=None)
def _version(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
