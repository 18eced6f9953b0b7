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
from importlib import resources
from typing import Any

PACK_FORMAT = 1


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
    serve_args: dict[str, ServeArg]
    """Every option string -> its ServeArg (aliases and `--no-x` forms map to the same object)."""
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
    data: dict = field(repr=False, compare=False)
    """The stored JSON (backends, runtime, modelled inputs) for select.py and the rest of this package."""
    _where: dict[str, str] = field(repr=False, compare=False, default_factory=dict)

    @property
    def serve_actions(self) -> tuple[ServeArg, ...]:
        """Each option once (not once per spelling)."""
        return tuple({id(a): a for a in self.serve_args.values()}.values())

    @property
    def positionals(self) -> tuple[str, ...]:
        return tuple(self.data.get("serve_args", {}).get("positionals", ()))

    def provenance(self, key: str) -> str | None:
        """'vllm/engine/arg_utils.py:1161' style location of a fact: an option string ('--kv-cache-dtype'),
        a dest, 'kv_cache_dtypes', 'model_dtypes', 'defaults.block_size', 'pins', 'backend.FLASH_ATTN', ..."""
        if key in self.serve_args:
            return self.serve_args[key].where
        if key in self._where:
            return self._where[key]
        detail = load_detail(self.version)
        if key.startswith("backend."):
            entry = (detail.get("backends") or {}).get("classes", {}).get(key.split(".", 1)[1], {})
            return entry.get("where")
        if key == "backend_priorities":
            return (detail.get("backends") or {}).get("priorities", {}).get("where")
        return (detail.get("runtime") or {}).get("where", {}).get(key)

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
    return resources.files("kvdoctor.data").joinpath("vllm_pack")


def _version_key(text: str):
    from packaging.version import InvalidVersion, Version

    try:
        return (0, Version(text))
    except InvalidVersion:
        return (1, text)


@lru_cache(maxsize=1)
def pack_releases() -> tuple[str, ...]:
    """Every release the pack holds, oldest first (sorted by Version)."""
    names = [p.name[: -len(".json")] for p in _pack_dir().iterdir()
             if p.name.endswith(".json") and not p.name.endswith(".detail.json")]
    return tuple(sorted(names, key=_version_key))


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
    path = _pack_dir().joinpath(f"{version}.json")
    if not path.is_file():
        return None
    data = json.loads(path.read_text("utf-8"))
    if data.get("format") != PACK_FORMAT:
        return None
    return _release_facts(data)


@lru_cache(maxsize=None)
def load_detail(version: str) -> dict:
    """The release's lazily read facts: `backends` (attention selection) and `runtime` (model runner, dtype)."""
    path = _pack_dir().joinpath(f"{version}.detail.json")
    if not path.is_file():
        return {}
    data = json.loads(path.read_text("utf-8"))
    return data if data.get("format") == PACK_FORMAT else {}


def load_attention(version: str) -> dict | None:
    """The release's attention-backend facts (checks, per-capability answers, priorities, guards), or None."""
    return load_detail(version).get("backends")


def load_runtime(version: str) -> dict | None:
    """The release's model-runner and dtype-resolution facts, or None."""
    return load_detail(version).get("runtime")


def _release_facts(data: dict) -> ReleaseFacts:
    serve = data.get("serve_args", {})
    by_option: dict[str, ServeArg] = {}
    for a in serve.get("actions", ()):
        arg = ServeArg(
            dest=a["dest"], option_strings=tuple(a["option_strings"]), takes_value=a["takes_value"],
            nargs=a["nargs"], choices=tuple(a["choices"]) if isinstance(a["choices"], list) else None,
            default=a["default"], is_bool_optional=a["is_bool_optional"], type_name=a["type"],
            action=a["action"], help_first_line=a["help"], hidden=a["hidden"], where=a["where"],
        )
        for option in arg.option_strings:
            by_option[option] = arg
    where: dict[str, str] = {}
    for a in serve.get("actions", ()):
        if a["where"]:
            where.setdefault(a["dest"], a["where"])
    where["serve_args"] = (serve.get("where") or {}).get("make_arg_parser")
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
        serve_args=by_option,
        allow_abbrev=bool(serve.get("allow_abbrev", True)),
        kv_cache_dtypes=tuple(data.get("kv_cache_dtypes", {}).get("values", ())),
        model_dtypes=tuple(data.get("model_dtypes", {}).get("values", ())),
        defaults=defaults,
        pins=pins,
        data=data,
        _where={k: v for k, v in where.items() if v},
    )
