"""Which vLLM releases a judgement covers: the judged one, or (unknown) every release the pack read in full.

A fact about an unknown release is decided only when every candidate release agrees; otherwise it stays
unknown and the report says which releases go which way ("rejected by 0.20.0-0.25.1").
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Iterable

from kvdoctor.base.versions import describe_runs, parse_version, pep440_order
from kvdoctor.vllm_pack.release import KINDS, load_release
from kvdoctor.vllm_pack.store import pack_releases, releases_with


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
    """The releases to judge `vllm_version` against, and why the set is empty or wider than one release."""
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
    if newest is not None and pep440_order(vllm_version) > pep440_order(newest):
        return Candidates((), exact=False, note=f"kvdoctor's facts about vLLM stop at {newest}; {vllm_version} is newer")
    series = [v for v in known if v.split(".")[:2] == vllm_version.split(".")[:2]]
    nearest = (f"; of its series kvdoctor read {', '.join(series)} (--vllm-version {series[-1]} judges that release, "
               "whose flags and facts may differ)") if series else ""
    return Candidates((), exact=False, note=f"vLLM {vllm_version} is not among the releases kvdoctor read "
                      f"({describe_range(known)}){nearest}")  # fmt: skip


@dataclass(frozen=True)
class NamedRelease:
    """What a `--vllm-version` names, read against the releases kvdoctor read."""

    version: str
    """The release to judge: a pack release's own spelling, or the text as given when the pack lacks it."""
    note: str | None = None
    """How a series or another spelling was read ('0.25 read as 0.25.1, ...'), None when taken as written."""
    choices: tuple[str, ...] = ()
    """For a name that fits several series (e.g. '0'): the series the pack holds; the caller refuses it."""


def named_release(text: str) -> NamedRelease:
    """Read a `--vllm-version` that is a version: a pack release under another spelling (v0.25.1, 0.25.1.0) is that
    release; a series X.Y is its newest patch in the pack; a bare major version fits several series (choices)."""
    wanted = parse_version(text)
    known = pack_releases()
    if wanted is None:
        return NamedRelease(text)
    exact = bool(wanted.pre or wanted.post is not None or wanted.dev is not None or wanted.local)
    if exact or len(wanted.release) > 2:  # one release: the pack's under any spelling, else judged as not read
        same = [v for v in known if parse_version(v) == wanted]
        if not same:
            return NamedRelease(text)
        return NamedRelease(same[0], None if same[0] == text else f"--vllm-version {text} read as vLLM {same[0]}")
    prefix = wanted.release
    matching = [v for v in known if parse_version(v).release[: len(prefix)] == prefix]
    if len(prefix) == 1:
        series = tuple(dict.fromkeys(".".join(map(str, parse_version(v).release[:2])) for v in matching))
        return NamedRelease(text, choices=series) if series else NamedRelease(text)
    if not matching:
        return NamedRelease(text)
    newest, series = matching[-1], ".".join(map(str, prefix))
    return NamedRelease(newest, f"--vllm-version {text} names a series: judged as vLLM {newest}, the newest "
                                f"{series} release kvdoctor read ({describe_range(matching)})")  # fmt: skip


def spelled_as_the_pack(text: str) -> str:
    """A pack release written another way (a pin's '0.6.3post1', a tag's '0.25.1.0') as the pack spells it; any
    other text as it is."""
    wanted = parse_version(text)
    if wanted is None or text in pack_releases():
        return text
    return next((v for v in pack_releases() if parse_version(v) == wanted), text)


def partial_note(release: Any) -> str | None:
    """What an older release's facts lack ('... stop at 0.20.0'), or None for a release the pack read fully."""
    missing = [k for k in KINDS if k != "backend_grid" and not release.has(k)]
    if not missing:
        return None
    full = releases_with("backend_replay")
    stop = f"; these facts stop at {full[0]}" if full else ""
    if not release.has("backend_grid"):  # before 0.7: no backend choice read; the builder says why (not_read)
        command = "" if release.serve_command == "vllm serve" else \
            f"; its server is `{release.serve_command}` (no `vllm serve` yet), whose parser was read"
        return f"vLLM {release.version}: kvdoctor read {_read_kinds(release)} only{command}; not read: " \
               f"{_unread_kinds(release, missing)}{stop}"
    how = "its backend choice is vLLM's own answer over a grid of inputs (no per-backend reasons)"
    lacking = ", ".join(KINDS[k] for k in missing)
    return f"vLLM {release.version}: kvdoctor read its dtype and backend facts only; {how}; not read: {lacking}{stop}"


_NOT_READ_KEY = {"backend_replay": "backend_choice", "dtype_resolution": "dtype_resolution",
                 "model_runner": "model_runner"}
"""A kind of fact -> the key under which the builder says why it did not read it (a release's `not_read`)."""


def _read_kinds(release: Any) -> str:
    return "; ".join(KINDS[k] for k in KINDS if release.has(k))


def _unread_kinds(release: Any, missing: list[str]) -> str:
    why = release.data.get("not_read") or {}
    named = {"backend_replay": "the attention backend choice"}  # neither replayed nor looked up on a grid
    parts = []
    for kind in missing:
        reason = why.get(_NOT_READ_KEY.get(kind, kind))
        parts.append(named.get(kind, KINDS[kind]) + (f" ({reason})" if reason else ""))
    return "; ".join(parts)


@lru_cache(maxsize=1)
def all_serve_options() -> frozenset[str]:
    """Every option string `vllm serve` has in any release the pack read."""
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
    return describe_runs(versions, pack_releases()) or "none"


def releases_around(version: str | None) -> tuple:
    """For a release the pack did not read inside the span it did (0.14.0 between 0.13.0 and 0.14.1): the nearest
    read releases on either side. What both say of something vLLM kept in between (a parser's default, the
    arguments it refuses) is what the release between them says."""
    try:
        at = pep440_order(version) if version else None
    except ValueError:
        return ()
    known = pack_releases()
    below = [v for v in known if pep440_order(v) < at] if at is not None else []
    above = [v for v in known if pep440_order(v) > at] if at is not None else []
    if not below or not above:
        return ()
    return tuple(release for release in (load_release(below[-1]), load_release(above[0])) if release is not None)


def covered(version: str, low: str, high: str) -> bool:
    """Is `version` within [low, high]? A bound of fewer parts covers every release it prefixes (0.33 = 0.33.*);
    ('pack', 'pack') covers the releases the knowledge pack read, as named: a post, rc or dev build of one is another
    release, whose facts are not loaded (the unread-release rule fired on 0.6.2.post1 as if 0.6.2 covered it)."""
    if low == "pack":
        if version in pack_releases():
            return True
        return high == "between" and bool(releases_around(version))
    release = pep440_order(version).release
    lo, hi = pep440_order(low).release, pep440_order(high).release
    return _pad(release, len(lo)) >= lo and release[: len(hi)] <= hi


def _pad(release: tuple[int, ...], length: int) -> tuple[int, ...]:
    return release + (0,) * max(0, length - len(release))


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
