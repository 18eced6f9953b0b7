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

    program: str | None = None
    """Its own command-line program, run as `PROGRAM serve MODEL ...` (vllm-omni), if any."""
    marker: str | None = None
    """The switch that hands `vllm serve` to it (vLLM-Omni's --omni), if any."""

    def owns(self, option: str) -> bool:
        return option in self.switches | self.valued | self.many


_DATA = load_yaml_cached(read_data("engine_launchers.yaml"), "engine_launchers.yaml")


def _launcher(entry: dict, key: str) -> EngineLauncher:
    return EngineLauncher(entry[key], entry["name"], frozenset(entry.get("switches", ())),
                          frozenset(entry.get("valued", ())), frozenset(entry.get("many", ())),
                          entry.get("program"), entry.get("marker"))  # fmt: skip


ENGINE_LAUNCHERS: dict[str, EngineLauncher] = {entry["module"]: _launcher(entry, "module") for entry in _DATA["launchers"]}
"""Module -> the launcher."""
IMAGE_EXTENSIONS: dict[str, EngineLauncher] = {entry["repository"]: _launcher(entry, "repository")
                                               for entry in _DATA.get("images", ())}  # fmt: skip
"""Image repository (without a registry host) -> the project whose `vllm serve` adds options of its own."""
EXTENSION_PROGRAMS: dict[str, EngineLauncher] = {e.program: e for e in IMAGE_EXTENSIONS.values() if e.program}
"""Program -> the project whose own CLI serves vLLM with its options (`vllm-omni serve MODEL`)."""
