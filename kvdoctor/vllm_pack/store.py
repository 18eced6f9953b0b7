"""The knowledge pack's files: reading them, the summary index, locating a release and the selection files.

A release lives in the shipped pack (`kvdoctor/data/vllm_pack/`) or, newer than it, in a pack built on the fly
into kvdoctor's cache (on_the_fly.py). Only json and the standard library are imported here (the CLI loads this
on every run).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from kvdoctor.base.versions import pack_order
from kvdoctor.data import DATA_DIR

PACK_FORMAT = 1
_EMPTY = {"releases": [], "serve_sigs": [], "runtime_pools": {}}


def _pack_dir() -> Path:
    return DATA_DIR / "vllm_pack"


def cache_root() -> Path | None:
    """Where packs built on the fly are kept (`<kvdoctor cache>/vllm_pack`), or None without a cache folder."""
    from kvdoctor.base.cache_dir import default_cache_dir

    root = default_cache_dir()
    return root / "vllm_pack" if root else None


def built_pack_dir(version: str) -> Path | None:
    """The cached pack built for `version`, or None."""
    root = cache_root()
    if root is None or "/" in version or version.startswith("."):
        return None
    where = root / version
    return where if (where / "index.json").is_file() else None


def read_pack_file(name: str, where: Path | None = None) -> dict | None:
    """A pack file, plain or gzipped (releases before 0.20.0 are stored as `name.gz`); `where`: a built pack."""
    base = where or _pack_dir()
    path = base.joinpath(name)
    if path.is_file():
        return json.loads(path.read_text("utf-8"))
    path = base.joinpath(name + ".gz")
    if path.is_file():
        import gzip

        return json.loads(gzip.decompress(path.read_bytes()))
    return None


@lru_cache(maxsize=None)
def pack_index(where: Path | None = None) -> dict:
    """A pack's summary index (builders/vllm_pack/index.py): every release's small facts, each distinct serve
    option and run-time table once. One file, so an unknown-version check decodes no release file.
    `where`: a pack built on the fly (on_the_fly.py) instead of the shipped one."""
    data = read_pack_file("index.json", where)
    return data if data and data.get("format") == PACK_FORMAT else _EMPTY


@lru_cache(maxsize=1)
def _entries() -> dict[str, dict]:
    return {entry["version"]: entry for entry in pack_index()["releases"]}


@lru_cache(maxsize=None)
def locate_release(version: str) -> tuple[dict | None, dict | None, Path | None]:
    """(index entry, its index, its directory) of a release: the shipped pack, else one built on the fly for a
    release newer than the pack (kvdoctor's cache); (None, None, None) when neither holds it."""
    entry = _entries().get(version)
    if entry is not None:
        return entry, pack_index(), None
    where = built_pack_dir(version)
    if where is not None:
        entry = {e["version"]: e for e in pack_index(where)["releases"]}.get(version)
        if entry is not None:
            return entry, pack_index(where), where
    return None, None, None


@lru_cache(maxsize=1)
def pack_releases() -> tuple[str, ...]:
    """Every release the pack holds, oldest first."""
    return tuple(sorted(_entries(), key=pack_order))


def releases_with(kind: str) -> tuple[str, ...]:
    """The releases whose facts include `kind` (release.KINDS), oldest first."""
    return tuple(v for v in pack_releases() if kind in _entries()[v]["kinds"])


def newest_release() -> str | None:
    """The newest release the pack holds: kvdoctor's facts about vLLM stop there."""
    releases = pack_releases()
    return releases[-1] if releases else None


@lru_cache(maxsize=None)
def load_detail(version: str) -> dict:
    """The release's lazily read file: `backends` (attention selection replay), `backend_grid` (older
    releases: vLLM's own choice over a grid) and `runtime`."""
    entry, _, where = locate_release(version)
    data = read_pack_file(f"{version}.detail.json", where) if entry is not None and entry.get("has_detail") else None
    return data if data and data.get("format") == PACK_FORMAT else {}


def load_attention(version: str) -> dict | None:
    """The release's attention-backend facts (checks, per-capability answers, priorities, guards), or None."""
    return load_detail(version).get("backends")


def load_backend_grid(version: str) -> dict | None:
    """An older release's backend choices over a grid of inputs (vLLM's own answers), or None."""
    return load_detail(version).get("backend_grid")


def load_variant_attention(version: str, variant: str) -> dict | None:
    """load_attention as vLLM answered with a modelled input stated otherwise than the release was read with
    (`variant`: 'flashinfer-cubin=present'), or None when the pack did not ask that."""
    base = load_attention(version)
    diff = (load_detail(version).get("variants") or {}).get(variant)
    return None if base is None or diff is None else apply_variant(base, diff["backends"])


def apply_variant(base: dict, diff: dict) -> dict:
    """A release's `backends` facts with a variant's differences applied: whole parts replaced, and per capability
    the answer sets of the backends whose answers differ (appended to `answer_sets`)."""
    out = {**base, **diff.get("replace", {})}
    for key, node in diff.get("patch", {}).items():
        out[key] = apply_patch(base.get(key), node)
    sets = list(base["answer_sets"])
    per = {cap: dict(names) for cap, names in base["per_capability"].items()}
    for cap, names in sorted(diff.get("per_capability", {}).items()):
        for name, answers in sorted(names.items()):
            sets.append(answers)
            per.setdefault(cap, {})[name] = len(sets) - 1
    out["answer_sets"], out["per_capability"] = sets, per
    return out


def apply_patch(base: Any, node: dict) -> Any:
    """`base` changed as a variant's patch node says: {"=": value} replaces it; {"~": {key: node}, "-": [keys]}
    changes and drops keys of a dict (builders/vllm_pack/variants.py writes them)."""
    if "=" in node:
        return node["="]
    out = {k: v for k, v in (base or {}).items() if k not in node.get("-", ())}
    for key, child in node.get("~", {}).items():
        out[key] = apply_patch((base or {}).get(key), child)
    return out


def load_selection(version: str, capability: tuple[int, int], variant: str | None = None) -> dict | None:
    """load_attention narrowed to one compute capability (same keys, that capability's answers only), read from
    the pack's `selection-<capability>.json`, one small file shared by every release: a check replaying 20
    releases decodes ~0.5 MB instead of ~2.6 MB. A pack without these files (built on the fly by an older
    kvdoctor) falls back to the release's whole detail file. `variant` ('flashinfer-cubin=present'): vLLM's
    answers with that modelled input (release.modelled_variant), stored as the part `<version>+<variant>`."""
    entry, _, where = locate_release(version)
    if variant is not None:
        if entry is None or variant not in ((entry.get("modelled_inputs") or {}).get("variants") or ()):
            return None
        caps = _selection_caps(where)
        cap = f"{capability[0]}.{capability[1]}"
        part = _selection_part(cap, f"{version}+{variant}", where) if cap in caps else None
        if part is not None:
            return part
        attention = load_variant_attention(version, variant)
        if attention is not None and caps and cap not in caps:
            return {**attention, "per_capability": {}, "answer_sets": []}
        return attention
    if entry is None or "backend_replay" not in entry.get("kinds", ()):
        return load_attention(version) if entry is not None else None
    caps = _selection_caps(where)
    cap = f"{capability[0]}.{capability[1]}"
    if not caps:
        return load_attention(version)
    release = _selection_part(cap if cap in caps else caps[0], version, where)
    if release is None:
        return load_attention(version)
    if cap not in caps:  # a capability vLLM was never asked about: the replay says so
        return {**release, "per_capability": {}, "answer_sets": []}
    return release


@lru_cache(maxsize=None)
def load_runtime(version: str) -> dict | None:
    """The release's model-runner and dtype-resolution facts (from the index; tables shared between releases)."""
    entry, index, _ = locate_release(version)
    if entry is None or "runtime" not in entry:
        return None
    runtime = entry["runtime"]
    pools = index["runtime_pools"]
    out = {"where": runtime.get("where", {}), "kv_quant_modes": runtime.get("kv_quant_modes")}
    for key in ("dtype", "model_runner"):
        if runtime.get(key) is not None:
            out[key] = pools[key][runtime[key]]
    return out


@lru_cache(maxsize=None)
def _selection_caps(where: Path | None = None) -> tuple[str, ...]:
    base = where or _pack_dir()
    names = [p.name for p in base.iterdir()] if base.is_dir() else []
    return tuple(sorted(n[len("selection-"):-len(".json.gz")] for n in names
                        if n.startswith("selection-") and n.endswith(".json.gz")))


class _Parts:
    """A selection file: its header's byte spans into the JSON documents after it, decoded on first use."""

    def __init__(self, raw: bytes):
        end = raw.index(b"\n")
        self.header = json.loads(raw[:end])
        self._body = raw[end + 1:]
        self._decoded: dict[tuple[int, int], Any] = {}

    def part(self, span) -> Any:
        key = tuple(span)
        if key not in self._decoded:
            self._decoded[key] = json.loads(self._body[key[0]:key[1]])
        return self._decoded[key]


class _AnswerPool:
    """The file's shared answer sets, indexed like the detail file's `answer_sets` list."""

    def __init__(self, parts: _Parts):
        self._parts = parts

    def __getitem__(self, index: int) -> dict:
        return self._parts.part(self._parts.header["answer_pool"][index])

    def __len__(self) -> int:
        return len(self._parts.header["answer_pool"])


@lru_cache(maxsize=None)
def _selection_file(cap: str, where: Path | None = None) -> _Parts | None:
    """One capability's selection file (its parts decoded on first use), or None."""
    import gzip

    try:
        parts = _Parts(gzip.decompress((where or _pack_dir()).joinpath(f"selection-{cap}.json.gz").read_bytes()))
    except (OSError, ValueError):
        return None
    return parts if parts.header.get("format") == PACK_FORMAT else None


def _selection_part(cap: str, version: str, where: Path | None = None) -> dict | None:
    parts = _selection_file(cap, where)
    span = parts.header["releases"].get(version) if parts else None
    if span is None:
        return None
    part = parts.part(span)
    if "variant_of" in part:  # a variant part holds what differs from its release's part
        base = parts.header["releases"].get(part["variant_of"])
        if base is None:
            return None
        part = {**parts.part(base), **{k: v for k, v in part.items() if k != "variant_of"}}
    return {**part, "answer_sets": _AnswerPool(parts)}
