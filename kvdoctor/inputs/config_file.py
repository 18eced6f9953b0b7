"""A team's standing flags: kvdoctor.toml, or [tool.kvdoctor] in pyproject.toml, found walking up from cwd.

Example (kvdoctor.toml; in pyproject.toml the same keys sit under [tool.kvdoctor]):

    gpu = "A100"
    kv-cache-dtype = "turboquant_4bit_nc"
    vllm-version = "0.27.0"
    fail-on = "warning"
    rules = ["ci/kvdoctor-rules.yaml"]      # relative to this file

    [ignore]
    RULE_ID = "why it does not apply here"     # an id from `kvdoctor rules`
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvdoctor.base.errors import UsageError

CONFIG_NAME = "kvdoctor.toml"
RULE_ID = re.compile(r"^[A-Z][A-Z0-9]*-?[0-9]{3,}$")

# config key -> (check parameter name, accepted python types)
CHECK_KEYS: dict[str, tuple[str, tuple[type, ...]]] = {
    "model": ("model", (str,)),
    "kv-cache-dtype": ("kv_cache_dtype", (str,)),
    "dtype": ("dtype", (str,)),
    "attention-backend": ("attention_backend", (str,)),
    "tensor-parallel-size": ("tensor_parallel_size", (int,)),
    "gpu": ("gpu", (str,)),
    "vllm-version": ("vllm_version", (str,)),
    "vllm-source": ("vllm_source", (str,)),
    "revision": ("revision", (str,)),
    "offline": ("offline", (bool,)),
    "no-compile": ("no_compile", (bool,)),
    "compile-timeout": ("compile_timeout", (int, float)),
    "no-cache": ("no_cache", (bool,)),
    "format": ("output_format", (str,)),
    "fail-on": ("fail_on", (str,)),
    "verbose": ("verbose", (bool,)),
}
EXCLUSIVE = (("vllm_version", "vllm_source"),)
"""Options of which the command line may pick one over the config file's."""
LIST_KEYS = {"rules": "rules", "fix-source": "fix_source"}
PATH_KEYS = {"vllm-source", "rules", "fix-source"}


@dataclass(frozen=True)
class ConfigFile:
    """What a config file says; empty when none was found."""

    path: Path | None = None
    """The file read, or None."""
    defaults: dict[str, Any] = field(default_factory=dict)
    """`check` parameter name -> value, used where the command line did not set the flag."""
    rules_files: tuple[Path, ...] = ()
    """Extra rules files, resolved against the config file's directory."""
    fix_sources: tuple[str, ...] = ()
    ignore: dict[str, str] = field(default_factory=dict)
    """rule id -> the reason the team gave for ignoring it."""

    def merged(self, params: dict[str, Any], explicit: set[str]) -> dict[str, Any]:
        """params with this file's values where the command line was silent (names in explicit win)."""
        merged = dict(params)
        merged.update({k: v for k, v in self.defaults.items() if k not in explicit})
        for group in EXCLUSIVE:
            if explicit & set(group):  # the command line picked one of these: the file's others step aside
                merged.update({k: params.get(k) for k in group if k not in explicit})
        return merged


def find_config(start: Path) -> Path | None:
    """The nearest kvdoctor.toml, or pyproject.toml with [tool.kvdoctor], from start up to the repository root."""
    for directory in [start, *start.parents]:
        candidate = directory / CONFIG_NAME
        if candidate.is_file():
            return candidate
        pyproject = directory / "pyproject.toml"
        if pyproject.is_file() and "kvdoctor" in _read(pyproject).get("tool", {}):
            return pyproject
        if (directory / ".git").exists():
            return None
    return None


def load_config(explicit: Path | None = None, start: Path | None = None) -> ConfigFile:
    """Read --config PATH, else the nearest config file; raise UsageError (one line) on a bad one."""
    if explicit is not None:
        if not explicit.is_file():
            raise UsageError(f"--config {explicit}: no such file")
        path = explicit
    else:
        path = find_config((start or Path.cwd()).resolve())
        if path is None:
            return ConfigFile()
    raw = _read(path)
    if path.name == "pyproject.toml":
        table = raw.get("tool", {}).get("kvdoctor")
        if table is None:
            raise UsageError(f"{path}: no [tool.kvdoctor] table")
        where = f"{path} [tool.kvdoctor]"
    else:
        table, where = raw, str(path)
    return _parse(table, path, where)


def _read(path: Path) -> dict[str, Any]:
    import tomllib  # only when a config file is read (~3 ms of imports)

    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: invalid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None


def _parse(table: dict[str, Any], path: Path, where: str) -> ConfigFile:
    base = path.parent
    defaults: dict[str, Any] = {}
    lists: dict[str, tuple[str, ...]] = {"rules": (), "fix-source": ()}
    ignore: dict[str, str] = {}
    for raw_key, value in table.items():
        key = raw_key.replace("_", "-")
        if key == "ignore":
            ignore = _ignore(value, where)
        elif key in LIST_KEYS:
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise UsageError(f"{where}: '{raw_key}' must be a list of paths")
            lists[key] = tuple(str(_resolve(base, v)) for v in value)
        elif key in CHECK_KEYS:
            name, types = CHECK_KEYS[key]
            if isinstance(value, bool) and bool not in types or not isinstance(value, types):
                wanted = " or ".join(t.__name__ for t in types)
                raise UsageError(f"{where}: '{raw_key}' must be {wanted}, got {value!r}")
            defaults[name] = str(_resolve(base, value)) if key in PATH_KEYS else value
        else:
            known = ", ".join(sorted([*CHECK_KEYS, *LIST_KEYS, "ignore"]))
            raise UsageError(f"{where}: unknown key '{raw_key}'", f"known keys: {known}")
    _validate(defaults, where)
    return ConfigFile(
        path=path,
        defaults=defaults,
        rules_files=tuple(Path(p) for p in lists["rules"]),
        fix_sources=lists["fix-source"],
        ignore=ignore,
    )


def _validate(defaults: dict[str, Any], where: str) -> None:
    """The file's values pass the same validation as the flags, and a bad one names the file."""
    from kvdoctor.inputs.validate import validate_check_inputs
    from kvdoctor.base.errors import KvdoctorError

    names = ("dtype", "tensor_parallel_size", "vllm_version", "vllm_source", "gpu", "fail_on", "compile_timeout")
    try:
        validate_check_inputs(**{name: defaults[name] for name in names if name in defaults})
    except KvdoctorError as exc:
        raise UsageError(f"{where}: {exc.message}", exc.hint) from None


def _ignore(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise UsageError(f"{where}: 'ignore' must be a table of RULE_ID = \"reason\"")
    ignore = {}
    for rule_id, reason in value.items():
        if not RULE_ID.match(str(rule_id)):
            raise UsageError(f"{where}: ignore.{rule_id} is not a rule id", "ids are letters then 3+ digits; `kvdoctor rules` lists them")
        if not isinstance(reason, str) or not reason.strip():
            raise UsageError(f"{where}: ignore.{rule_id} needs a reason (a non-empty string)",
                             "ignored findings are still shown, with the reason")  # fmt: skip
        ignore[str(rule_id)] = reason.strip()
    return ignore


def _resolve(base: Path, value: str) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path
