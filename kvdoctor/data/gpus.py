"""Resolve a --gpu target (a name, 'sm_80', '8.0') to a GpuDevice from the bundled GPU table."""

from __future__ import annotations

import difflib
import re
from functools import lru_cache

from kvdoctor.data import read_data
from kvdoctor.base.errors import GpuTargetError
from kvdoctor.model.facts import GpuDevice
from kvdoctor.base.yaml_safe import load_yaml_cached

_CAPABILITY = re.compile(r"^(?:sm_?|compute_?|cc)?(\d{1,2})\.?(\d)a?$", re.IGNORECASE)


def normalise(name: str) -> str:
    """'NVIDIA GeForce RTX 4090' -> 'rtx4090': the key names and aliases are matched on."""
    lowered = name.lower().replace("nvidia", "").replace("geforce", "").replace("tesla", "")
    return re.sub(r"[\s\-_/]+", "", lowered)


@lru_cache(maxsize=1)
def gpu_table() -> dict[str, GpuDevice]:
    """Normalised name or alias -> GpuDevice."""
    raw = load_yaml_cached(read_data("gpus.yaml"), "gpus.yaml")
    table: dict[str, GpuDevice] = {}
    for entry in raw["gpus"]:
        major, minor = (int(p) for p in str(entry["capability"]).split("."))
        device = GpuDevice(entry["name"], (major, minor), float(entry["memory_gib"]))
        for key in [entry["name"], *entry.get("aliases", [])]:
            table[normalise(key)] = device
    return table


def resolve_gpu_target(text: str) -> GpuDevice:
    """A GpuDevice for a --gpu value; raises GpuTargetError with suggestions when unknown."""
    cleaned = text.strip()
    if not cleaned:
        raise GpuTargetError("--gpu is empty", "pass a name such as A100 or a capability such as sm_80")
    match = _CAPABILITY.match(cleaned)
    if match:
        major, minor = int(match.group(1)), int(match.group(2))
        if not 3 <= major <= 15:
            raise GpuTargetError(f"--gpu {text}: compute capability {major}.{minor} is not a CUDA GPU")
        return GpuDevice(f"sm_{major}{minor} target", (major, minor), None)
    key = normalise(cleaned)
    table = gpu_table()
    if key in table:
        return table[key]
    close = difflib.get_close_matches(key, list(table), n=3, cutoff=0.6)
    suggestions = sorted({table[c].name for c in close})
    hint = f"did you mean {', '.join(suggestions)}?" if suggestions else "use a capability such as sm_80 or 8.0"
    raise GpuTargetError(f"unknown GPU '{text}'", f"{hint} `kvdoctor gpus` lists the known names")


@lru_cache(maxsize=1)
def _node_label_data() -> tuple[dict[str, str], tuple[re.Pattern[str], ...], dict[str, GpuDevice], tuple]:
    """(label key -> kind, suffix patterns, normalised node-label value -> GpuDevice, (pattern, GpuDevice) pairs)."""
    raw = load_yaml_cached(read_data("gpus.yaml"), "gpus.yaml")
    by_name = {d.name: d for d in gpu_table().values()}
    values: dict[str, GpuDevice] = {}
    patterns: list[tuple[str, GpuDevice]] = []
    for entry in raw["gpus"]:
        device = by_name[entry["name"]]
        for value in entry.get("node_labels", []):
            values[normalise(value)] = device
        patterns += [(str(p).lower(), device) for p in entry.get("instance_types", [])]
    suffixes = tuple(re.compile(s, re.IGNORECASE) for s in raw.get("node_label_suffixes", []))
    return dict(raw.get("node_label_keys", {})), suffixes, values, tuple(patterns)


def node_label_keys() -> dict[str, str]:
    """Node label keys that name a GPU -> how their values are matched ('product' or 'instance_type')."""
    return dict(_node_label_data()[0])


def gpu_for_node_label(key: str, value: str) -> GpuDevice | None:
    """The GPU a node label names (nvidia.com/gpu.product, GKE accelerator, instance type), or None."""
    import fnmatch

    kinds, suffixes, values, patterns = _node_label_data()
    kind = kinds.get(key)
    text = value.strip()
    if kind == "instance_type":
        return next((d for p, d in patterns if fnmatch.fnmatchcase(text.lower(), p)), None)
    if kind != "product" or not text:
        return None
    for suffix in suffixes:
        text = suffix.sub("", text)
    key_text = normalise(text)
    return values.get(key_text) or gpu_table().get(key_text) or _unique_by_suffix(text, values)


def _unique_by_suffix(text: str, values: dict[str, GpuDevice]) -> GpuDevice | None:
    """A custom label's shortened GPU name ('nvidia-2080ti', 'rtx-4090-24gb'): the one GPU whose normalised name
    or alias ends with it (a trailing memory size dropped when nothing does), None when none or several do."""
    names = {**gpu_table(), **values}
    for key in dict.fromkeys((normalise(text), normalise(re.sub(r"[\s\-_]\d+\s*gb$", "", text, flags=re.I)))):
        if len(key) < 4:
            continue
        devices = {device.name: device for name, device in names.items() if name.endswith(key)}
        if len(devices) == 1:
            return next(iter(devices.values()))
    return None
