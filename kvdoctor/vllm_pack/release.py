"""The release model: what the knowledge pack holds about one vLLM release (`load_release("0.25.1")`).

Its `vllm serve` arguments, accepted dtypes, defaults and pins; the model runner and dtype resolution are asked
through runner.py and dtypes.py, the attention selection through select.py. A release the pack does not hold
gives None: facts are never guessed from another release.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from kvdoctor.vllm_pack.store import locate_release, pack_index

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

    @property
    def serve_command(self) -> str:
        """The server command whose parser the pack read: `vllm serve`, or before 0.5 the api_server module."""
        return self.data.get("serve_args", {}).get("command", "vllm serve")

    @property
    def flexible_parser(self) -> bool:
        """vLLM's FlexibleArgumentParser (`--max_model_len` reads as `--max-model-len`); False before 0.5."""
        return self.data.get("serve_args", {}).get("flexible", True)


@lru_cache(maxsize=None)
def load_release(version: str) -> ReleaseFacts | None:
    """One release's facts, or None when the pack does not hold that release (never guessed from another)."""
    entry = locate_release(version)[0]
    return None if entry is None else _release_facts(entry)


class ServeOptions(Mapping):
    """Option string -> ServeArg of one release; a ServeArg is built when looked up (a check looks up only the
    options it was given, in up to 20 releases)."""

    def __init__(self, sig_ids: dict[str, int], where: Path | None):
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
def _shared_serve_arg(sig_id: int, where: Path | None = None) -> ServeArg:
    """One distinct serve option, shared by every release that has it unchanged."""
    a = pack_index(where)["serve_sigs"][sig_id]
    return ServeArg(
        dest=a["dest"], option_strings=tuple(a["option_strings"]), takes_value=a["takes_value"],
        nargs=a["nargs"], choices=tuple(a["choices"]) if isinstance(a["choices"], list) else None,
        default=a["default"], is_bool_optional=a["is_bool_optional"], type_name=a["type"], action=a["action"],
    )


@lru_cache(maxsize=None)
def _serve_args(version: str) -> ServeOptions:
    entry, index, where = locate_release(version)
    sigs = index["serve_sigs"] if index else []
    ids = {option: sig_id for sig_id in ((entry or {}).get("serve_args") or {}).get("sigs", ())
           for option in sigs[sig_id]["option_strings"]}
    return ServeOptions(ids, where)


def _release_facts(data: dict) -> ReleaseFacts:
    serve = data.get("serve_args") or {}
    # "==2.11.0" -> "2.11.0"; ranges stay as written
    pins = {name: spec[2:] if spec.startswith("==") and "," not in spec else spec
            for name, spec in data.get("pins", {}).get("requires", {}).items()}
    if "flashinfer-python" in pins:
        pins["flashinfer"] = pins["flashinfer-python"]
    triton = data.get("pins", {}).get("triton")
    if triton:
        spec = triton["spec"]
        pins["triton"] = spec[2:] if spec.startswith("==") else spec
    return ReleaseFacts(
        version=data["version"],
        allow_abbrev=bool(serve.get("allow_abbrev", True)),
        kv_cache_dtypes=tuple(data.get("kv_cache_dtypes", {}).get("values", ())),
        model_dtypes=tuple(data.get("model_dtypes", {}).get("values", ())),
        defaults={key: value["value"] for key, value in data.get("defaults", {}).items()},
        pins=pins,
        kinds=frozenset(data.get("kinds", ())),
        data=data,
    )


def pack_values(release: ReleaseFacts, name: str) -> tuple[str, ...]:
    """The values of modelled input `name` (kvdoctor/model/modelled.py) the pack holds vLLM's answers for, the
    value the release was read with first. The builder records them (`modelled_inputs`); a pack built before it
    did: flashinfer-cubin as the wheel requires it (a stand-in when Requires-Dist names it), FlashInfer present."""
    info = release.data.get("modelled_inputs") or {}
    read = (info.get("read") or {}).get(name)
    if read is None:
        read = ("present" if "flashinfer-cubin" in (release.pins or {}) else "absent") \
            if name == "flashinfer-cubin" else "present"
    others = tuple(v.split("=", 1)[1] for v in info.get("variants", ()) if v.split("=", 1)[0] == name)
    return (read,) + tuple(v for v in others if v != read)


def modelled_variant(release: ReleaseFacts, name: str, value: str) -> str | None:
    """The pack's variant to read for the target's `value` of `name` ('flashinfer-cubin=present'), or None: the
    release was read with that value, or the pack did not ask vLLM with it (then the answer depends on an input
    the pack read otherwise, and facts/attention.py makes it undecided)."""
    values = pack_values(release, name)
    return f"{name}={value}" if value != values[0] and value in values else None
