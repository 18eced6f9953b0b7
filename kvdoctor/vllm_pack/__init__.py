"""vLLM's own facts per release, read from its released wheels by scripts/build_vllm_pack.py (the knowledge pack).

`load_release("0.25.1")` gives one release's facts: its `vllm serve` arguments, accepted dtypes, defaults, pins,
attention backends' checks and priorities, model-runner choice and dtype resolution, each with the vLLM
file:line it came from. A release the pack does not hold gives None: facts are never guessed from another
release. Only json and the standard library are imported here (the CLI loads this on every run).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping

from kvdoctor.data import DATA_DIR

PACK_FORMAT = 1
KINDS = {
    "serve_args": "every `vllm serve` option (vLLM's own parser)",
    "kv_cache_dtypes": "accepted --kv-cache-dtype values",
    "model_dtypes": "accepted --dtype values",
    "pins": "torch / Triton / FlashInfer versions the wheel pins",
    "dtype_resolution": "model dtype resolution per GPU",
    "model_runner": "V1 / V2 model runner choice",
    "backend_replay": "each attention backend's checks, priorities and guards (replayed, with reasons)",
    "backend_grid": "vLLM's own backend choice over a grid of inputs (looked up; no per-backend reasons)",
}
"""The kinds of facts a release's entry can hold (`ReleaseFacts.kinds`); releases before 0.20.0 hold fewer."""


@dataclass(frozen=True)
class ServeArg:
    """One `vllm serve` option as that release's argparse parser defines it."""

    dest: str
    """argparse destination (`kv_cache_dtype`)."""
    option_strings: tuple[str, ...]
    """Every spelling of the option: long, short, aliases and the `--no-x` form of a boolean flag."""
    takes_value: bool
    """False for flags (store_true, BooleanOptionalAction); True when a value must follow."""
    nargs: Any
    """argparse nargs (None: one value; '?', '*', '+', or a count)."""
    choices: tuple | None
    """The values argparse accepts, or None when it accepts any."""
    default: Any
    """The parser's default (JSON form; non-JSON defaults as their repr)."""
    is_bool_optional: bool
    """A BooleanOptionalAction (`--x` / `--no-x`)."""
    type_name: str | None
    """Name of argparse's `type` callable (`int`, `str`, `human_readable_int`, ...)."""
    action: str
    """argparse action class name (`StoreAction`, `BooleanOptionalAction`, ...)."""
    help_first_line: str | None
    """First line of the help text, when the parser has it without `--help`."""
    hidden: bool
    """Help suppressed (the option exists but is not listed)."""
    where: str | None
    """vLLM file:line of the add_argument call."""


@dataclass(frozen=True)
class ReleaseFacts:
    """Everything the pack holds about one vLLM release."""

    version: str
    allow_abbrev: bool
    """argparse prefix matching: an unambiguous prefix of a long option is accepted as that option."""
    kv_cache_dtypes: tuple[str, ...]
    """Accepted --kv-cache-dtype values (vLLM's CacheDType), in vLLM's order."""
    model_dtypes: tuple[str, ...]
    """Accepted --dtype values (vLLM's ModelDType)."""
    defaults: dict[str, Any]
    """Release defaults of selected serve settings (`block_size`, `gpu_memory_utilization`, ...)."""
    pins: dict[str, str]
    """Requirements the wheel declares: an exact pin as its version (`torch`: '2.11.0', `flashinfer`: '0.6.13'),
    a range as written (`transformers`: '>=5.5.3'); `triton` through torch's own pin ('3.6.0', '~=3.8.0')."""
    kinds: frozenset[str] = frozenset(KINDS) - {"backend_grid"}
    """The kinds of facts the pack holds for this release (`KINDS`); releases before 0.20.0 hold fewer."""
    data: dict = field(repr=False, compare=False, default_factory=dict)
    """The release's index entry (small facts, serve-option ids, run-time table ids)."""
    _where: dict[str, str] = field(repr=False, compare=False, default_factory=dict)

    def has(self, kind: str) -> bool:
        """Does the pack hold this kind of fact for the release ('backend_replay', 'model_runner', ...)?"""
        return kind in self.kinds

    @property
    def serve_args(self) -> Mapping[str, ServeArg]:
        """Every option string -> its ServeArg (aliases and `--no-x` forms map to the same object); built on
        first use from the index, where each distinct option is stored once for all releases."""
        return _serve_args(self.version)

    @property
    def serve_actions(self) -> tuple[ServeArg, ...]:
        """Each option once (not once per spelling)."""
        return self.serve_args.actions()

    @property
    def positionals(self) -> tuple[str, ...]:
        return tuple(self.data.get("serve_args", {}).get("positionals", ()))

    def provenance(self, key: str) -> str | None:
        """'vllm/engine/arg_utils.py:1161' style location of a fact: an option string ('--kv-cache-dtype'),
        a dest, 'kv_cache_dtypes', 'model_dtypes', 'defaults.block_size', 'pins', 'backend.FLASH_ATTN', ..."""
        if key in self._where:
            return self._where[key]
        if key in self.serve_args or key in {a.dest for a in self.serve_actions}:
            return _serve_where(self.version).get(key)
        if key.startswith("backend."):
            entry = (load_attention(self.version) or {}).get("classes", {}).get(key.split(".", 1)[1], {})
            return entry.get("where")
        if key == "backend_priorities":
            return (load_attention(self.version) or {}).get("priorities", {}).get("where")
        return (load_runtime(self.version) or {}).get("where", {}).get(key)

    def model_runner(self, *args: Any, **kwargs: Any):
        """V1 or V2 model runner for a model and flags, as this release decides (see runner.py)."""
        from kvdoctor.vllm_pack.runner import model_runner

        return model_runner(self, *args, **kwargs)

    def resolve_dtype(self, config_dtype: str | None, requested: str | None, capability: tuple[int, int] | None,
                      model_type: str | None = None):
        """(dtype, note, error) for `--dtype requested` and a config dtype on this capability (see dtypes.py)."""
        from kvdoctor.vllm_pack.dtypes import resolve_dtype

        return resolve_dtype(self, config_dtype, requested, capability, model_type)


def _pack_dir():
    return DATA_DIR / "vllm_pack"


def _version_key(text: str):
    parts = text.split(".")
    if all(p.isdigit() for p in parts):  # every pack release: no need to import packaging
        return (0, tuple(int(p) for p in parts), 0)
    from packaging.version import InvalidVersion, Version

    try:
        v = Version(text)
        return (0, v.release, -1 if (v.pre or v.dev) else int(v.post is not None))
    except InvalidVersion:
        return (1, (), 0)


def _read(name: str, where=None) -> dict | None:
    """A pack file, plain or gzipped (releases before 0.20.0 are stored as `name.gz`)."""
    base = where or _pack_dir()
    path = base.joinpath(name)
    if path.is_file():
        return json.loads(path.read_text("utf-8"))
    path = base.joinpath(name + ".gz")
    if path.is_file():
        import gzip

        return json.loads(gzip.decompress(path.read_bytes()))
    return None


_EMPTY = {"releases": [], "serve_sigs": [], "runtime_pools": {}}


@lru_cache(maxsize=None)
def _index(where=None) -> dict:
    """A pack's summary index (scripts/vllm_pack_index.py): every release's small facts, each distinct serve
    option and run-time table once. One file, so an unknown-version check decodes no release file.
    `where`: a pack built on the fly (on_the_fly.py) instead of the shipped one."""
    data = _read("index.json", where)
    return data if data and data.get("format") == PACK_FORMAT else _EMPTY


@lru_cache(maxsize=1)
def _entries() -> dict[str, dict]:
    return {entry["version"]: entry for entry in _index()["releases"]}


@lru_cache(maxsize=None)
def _locate(version: str):
    """(index entry, its index, its directory) of a release: the shipped pack, else one built on the fly for a
    release newer than the pack (kvdoctor's cache); (None, None, None) when neither holds it."""
    entry = _entries().get(version)
    if entry is not None:
        return entry, _index(), None
    from kvdoctor.vllm_pack.on_the_fly import built_pack_dir

    where = built_pack_dir(version)
    if where is not None:
        entry = {e["version"]: e for e in _index(where)["releases"]}.get(version)
        if entry is not None:
            return entry, _index(where), where
    return None, None, None


@lru_cache(maxsize=1)
def pack_releases() -> tuple[str, ...]:
    """Every release the pack holds, oldest first (sorted by Version)."""
    return tuple(sorted(_entries(), key=_version_key))


def releases_with(kind: str) -> tuple[str, ...]:
    """The releases whose facts include `kind` (KINDS), oldest first."""
    return tuple(v for v in pack_releases() if kind in _entries()[v]["kinds"])


def newest_release() -> str | None:
    """The newest release the pack holds: kvdoctor's facts about vLLM stop there."""
    releases = pack_releases()
    return releases[-1] if releases else None


def where_facts_stop(version: str) -> str | None:
    """A plain sentence when `version` is not in the pack ('facts stop at 0.34.0; 0.35.0 is newer'), else None."""
    if version in pack_releases():
        return None
    newest = newest_release()
    if newest is not None and _version_key(version) > _version_key(newest):
        return f"kvdoctor's vLLM facts stop at {newest}; {version} is newer and was not read"
    return f"vLLM {version} is not among the releases kvdoctor read ({pack_releases()[0]}-{newest})"


@lru_cache(maxsize=None)
def load_release(version: str) -> ReleaseFacts | None:
    """One release's facts, or None when the pack does not hold that release (never guessed from another)."""
    entry = _locate(version)[0]
    return None if entry is None else _release_facts(entry)


@lru_cache(maxsize=None)
def load_detail(version: str) -> dict:
    """The release's lazily read file: `backends` (attention selection replay), `backend_grid` (older
    releases: vLLM's own choice over a grid) and `runtime`."""
    entry, _, where = _locate(version)
    data = _read(f"{version}.detail.json", where) if entry is not None and entry.get("has_detail") else None
    return data if data and data.get("format") == PACK_FORMAT else {}


def load_attention(version: str) -> dict | None:
    """The release's attention-backend facts (checks, per-capability answers, priorities, guards), or None."""
    return load_detail(version).get("backends")


def load_selection(version: str, capability: tuple[int, int]) -> dict | None:
    """load_attention narrowed to one compute capability (same keys, that capability's answers only), read from
    the pack's `selection-<capability>.json`, one small file shared by every release: a check replaying 20
    releases decodes ~0.5 MB instead of ~2.6 MB. A pack without these files (built on the fly by an older
    kvdoctor) falls back to the release's whole detail file."""
    entry, _, where = _locate(version)
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
def _selection_caps(where=None) -> tuple[str, ...]:
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
def _selection_file(cap: str, where=None) -> _Parts | None:
    """One capability's selection file (its parts decoded on first use), or None."""
    import gzip

    try:
        parts = _Parts(gzip.decompress((where or _pack_dir()).joinpath(f"selection-{cap}.json.gz").read_bytes()))
    except (OSError, ValueError):
        return None
    return parts if parts.header.get("format") == PACK_FORMAT else None


def _selection_part(cap: str, version: str, where=None) -> dict | None:
    parts = _selection_file(cap, where)
    span = parts.header["releases"].get(version) if parts else None
    return None if span is None else {**parts.part(span), "answer_sets": _AnswerPool(parts)}


def load_backend_grid(version: str) -> dict | None:
    """An older release's backend choices over a grid of inputs (vLLM's own answers), or None."""
    return load_detail(version).get("backend_grid")


@lru_cache(maxsize=None)
def load_runtime(version: str) -> dict | None:
    """The release's model-runner and dtype-resolution facts (from the index; tables shared between releases)."""
    entry, index, _ = _locate(version)
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
def _shared_serve_arg(sig_id: int, where=None) -> ServeArg:
    """One distinct serve option, shared by every release that has it unchanged (its file:line: provenance())."""
    a = _index(where)["serve_sigs"][sig_id]
    return ServeArg(
        dest=a["dest"], option_strings=tuple(a["option_strings"]), takes_value=a["takes_value"],
        nargs=a["nargs"], choices=tuple(a["choices"]) if isinstance(a["choices"], list) else None,
        default=a["default"], is_bool_optional=a["is_bool_optional"], type_name=a["type"],
        action=a["action"], help_first_line=a["help"], hidden=a["hidden"], where=None,
    )


class ServeOptions(Mapping):
    """Option string -> ServeArg of one release; a ServeArg is built when looked up (a check looks up only the
    options it was given, in up to 20 releases)."""

    def __init__(self, sig_ids: dict[str, int], where):
        self._ids = sig_ids
        self._where = where

    def __getitem__(self, option: str) -> ServeArg:
        return _shared_serve_arg(self._ids[option], self._where)

    def __iter__(self):
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, option) -> bool:
        return option in self._ids

    def actions(self) -> tuple[ServeArg, ...]:
        """Each option once (not once per spelling)."""
        return tuple(_shared_serve_arg(i, self._where) for i in dict.fromkeys(self._ids.values()))


@lru_cache(maxsize=None)
def _serve_args(version: str) -> ServeOptions:
    entry, index, where = _locate(version)
    sigs = index["serve_sigs"] if index else []
    ids = {option: sig_id for sig_id in ((entry or {}).get("serve_args") or {}).get("sigs", ())
           for option in sigs[sig_id]["option_strings"]}
    return ServeOptions(ids, where)


@lru_cache(maxsize=None)
def _serve_where(version: str) -> dict[str, str]:
    """Option string and dest -> the add_argument call's file:line (read from the release's own file)."""
    where: dict[str, str] = {}
    for a in (_read(f"{version}.json", _locate(version)[2]) or {}).get("serve_args", {}).get("actions", ()):
        if a["where"]:
            where.setdefault(a["dest"], a["where"])
            for option in a["option_strings"]:
                where[option] = a["where"]
    return where


def _release_facts(data: dict) -> ReleaseFacts:
    serve = data.get("serve_args") or {}
    where: dict[str, str] = {"serve_args": serve.get("make_arg_parser")}
    for key in ("kv_cache_dtypes", "model_dtypes"):
        if key in data:
            where[key] = data[key]["where"]
    defaults = {}
    for key, value in data.get("defaults", {}).items():
        defaults[key] = value["value"]
        where[f"defaults.{key}"] = value["where"]
    # "==2.11.0" -> "2.11.0"; ranges stay as written
    pins = {name: spec[2:] if spec.startswith("==") and "," not in spec else spec
            for name, spec in data.get("pins", {}).get("requires", {}).items()}
    if "flashinfer-python" in pins:
        pins["flashinfer"] = pins["flashinfer-python"]
    triton = data.get("pins", {}).get("triton")
    if triton:
        spec = triton["spec"]
        pins["triton"] = spec[2:] if spec.startswith("==") else spec
        where["pins.triton"] = triton["where"]
    where["pins"] = data.get("pins", {}).get("where")
    return ReleaseFacts(
        version=data["version"],
        allow_abbrev=bool(serve.get("allow_abbrev", True)),
        kv_cache_dtypes=tuple(data.get("kv_cache_dtypes", {}).get("values", ())),
        model_dtypes=tuple(data.get("model_dtypes", {}).get("values", ())),
        defaults=defaults,
        pins=pins,
        kinds=frozenset(data.get("kinds", ())),
        data=data,
        _where={k: v for k, v in where.items() if v},
    )
