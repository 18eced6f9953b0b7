"""Launchers that run vLLM's engine with options of their own (NVIDIA Dynamo's `python -m dynamo.vllm`), from the
one table kvdoctor/data/engine_launchers.yaml."""

from __future__ import annotations

from dataclasses import dataclass

from kvdoctor.base.yaml_safe import load_yaml_cached
from kvdoctor.data import read_data


@dataclass(frozen=True)
class EngineLauncher:
    module: str
    """The Python module run with `python -m` ('dynamo.vllm'), or the image repository ('vllm/vllm-omni')."""
    name: str
    """What a report calls it."""
    switches: frozenset[str]
    """Its own options that take no value."""
    valued: frozenset[str]
    """Its own options that take one value."""
    many: frozenset[str]
    """Its own options that take every word up to the next option."""

    def owns(self, option: str) -> bool:
        return option in self.switches | self.valued | self.many


_DATA = load_yaml_cached(read_data("engine_launchers.yaml"), "engine_launchers.yaml")


def _launcher(entry: dict, key: str) -> EngineLauncher:
    return EngineLauncher(entry[key], entry["name"], frozenset(entry.get("switches", ())),
                          frozenset(entry.get("valued", ())), frozenset(entry.get("many", ())))  # fmt: skip


ENGINE_LAUNCHERS: dict[str, EngineLauncher] = {entry["module"]: _launcher(entry, "module") for entry in _DATA["launchers"]}
"""Module -> the launcher."""
IMAGE_EXTENSIONS: dict[str, EngineLauncher] = {entry["repository"]: _launcher(entry, "repository")
                                               for entry in _DATA.get("images", ())}  # fmt: skip
"""Image repository (without a registry host) -> the project whose `vllm serve` adds options of its own."""
