"""Launchers that run vLLM's engine with options of their own (NVIDIA Dynamo's `python -m dynamo.vllm`), from the
one table kvdoctor/data/engine_launchers.yaml."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

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


_WRAPPERS = _DATA.get("wrapper_modules") or {}
WRAPPER_MODULE = re.compile(_WRAPPERS.get("pattern", r"(?!)"))
"""Another project's module named for vLLM's server (`python -m skyrl...vllm_server_actor`): vLLM's serve, probably."""
WRAPPER_NAME: str = _WRAPPERS.get("name", "a wrapper of vLLM's server")

ENGINE_LAUNCHERS: dict[str, EngineLauncher] = {entry["module"]: _launcher(entry, "module") for entry in _DATA["launchers"]}
"""Module -> the launcher."""
IMAGE_EXTENSIONS: dict[str, EngineLauncher] = {entry["repository"]: _launcher(entry, "repository")
                                               for entry in _DATA.get("images", ())}  # fmt: skip
"""Image repository (without a registry host) -> the project whose `vllm serve` adds options of its own."""
EXTENSION_PROGRAMS: dict[str, EngineLauncher] = {e.program: e for e in IMAGE_EXTENSIONS.values() if e.program}
"""Program -> the project whose own CLI serves vLLM with its options (`vllm-omni serve MODEL`)."""


@dataclass(frozen=True)
class TranslatingLauncher:
    """Another project's server that starts vLLM's engine from options of its own (TRL's `trl vllm-serve`)."""

    program: tuple[str, ...]
    """Its command words ('trl', 'vllm-serve')."""
    module: str
    """The module run with `python -m` for the same server."""
    name: str
    project: str
    """The project whose releases its options are counted in ('TRL')."""
    source: str
    options: dict[str, tuple[str, str | None]]
    """Its option (underscored) -> (the vLLM engine argument it is passed as, the first release of the project that
    has it, None when not read)."""
    switches: frozenset[str]
    """Its options that are booleans (a bare switch, or followed by true/false)."""
    own: dict[str, str | None]
    """Its options that are not vLLM's (the server's host and port) -> the first release that has it."""
    config_option: str | None = None
    """Its option that names a YAML file of the same options, if any."""
    refuses_others: bool = True
    """Its parser refuses any other option (TRL's); False when it has many options of its own not read here (ms-swift's
    template, dataset, ...): those are left out and named, never judged."""
    requires: dict[str, str] = field(default_factory=dict)
    """Its options that must hold these values for it to start vLLM at all (ms-swift's deploy: --infer_backend vllm)."""

    def release_of(self, option: str) -> str | None:
        """The first release of the project that has the option (underscored), or None when none has it."""
        return self.options[option][1] if option in self.options else self.own.get(option)


def _release(value) -> str | None:
    return None if value is None else str(value)


TRANSLATING_LAUNCHERS: tuple[TranslatingLauncher, ...] = tuple(
    TranslatingLauncher(tuple(e["program"]), e["module"], e["name"], e["project"], e["source"],
                        {name: (engine, _release(release)) for name, (engine, release) in e["options"].items()},
                        frozenset(e.get("switches", ())), {k: _release(v) for k, v in e.get("own", {}).items()},
                        e.get("config_option"), e.get("refuses_others", True), dict(e.get("requires", {})))
    for e in _DATA.get("translating", ()))  # fmt: skip
"""Servers whose options are translated into vLLM's engine arguments (trl vllm-serve)."""
