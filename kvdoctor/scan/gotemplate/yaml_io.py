"""toYaml / toJson / fromYaml / fromJson as Helm has them: data through JSON (sorted keys, integral floats
written as integers) into YAML; YAML read back has every number a float64, as Helm's values do."""

from __future__ import annotations

import json
from typing import Any

import yaml

from kvdoctor.scan.gotemplate.values import GoObject


def plain(value: Any) -> Any:
    """The value as JSON writes it: integral floats as integers, structs as their fields."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    if isinstance(value, float):
        return float(value)  # a values file's number remembers its line: a float subclass YAML cannot write
    if isinstance(value, str):
        return str(value)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, GoObject):
        return {k: plain(v) for k, v in value.fields.items()}
    return value


def to_yaml(value: Any) -> str:
    """Helm's toYaml: the YAML of the value, without the final newline."""
    text = yaml.safe_dump(plain(value), default_flow_style=False, sort_keys=True, allow_unicode=True,
                          width=float("inf"))  # fmt: skip
    if text.endswith("\n...\n"):
        text = text[: -len("...\n")]
    return text.removesuffix("\n")


def to_json(value: Any) -> str:
    text = json.dumps(plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def as_go(value: Any) -> Any:
    """Data read from YAML or JSON as Helm holds it: every number a float64."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, dict):
        return {str(k): as_go(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_go(v) for v in value]
    return str(value)


def from_yaml(text: str) -> Any:
    """Helm's fromYaml: a map (an error is {"Error": message})."""
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return {"Error": str(exc).splitlines()[0]}
    return as_go(value) if isinstance(value, dict) else {} if value is None else {"Error": "not a map"}


def from_json(text: str) -> Any:
    try:
        return as_go(json.loads(text))
    except ValueError as exc:
        return {"Error": str(exc)}
