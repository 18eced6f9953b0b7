"""ConfigMaps of the scanned tree -> the env values they give: a container's `configMapKeyRef` and `envFrom:
configMapRef` whose ConfigMap is in a scanned file take its `data` values (on the ConfigMap's own lines), and the
container's `$(VAR)` (and `$VAR` under `sh -c`) are expanded from them."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path, PurePosixPath

import yaml

from kvdoctor.scan import nodes
from kvdoctor.scan.command import expand_words
from kvdoctor.scan.workload import EnvVar, Token, Workload, file_line

KEY_REF = re.compile(r"^ConfigMap '(?P<name>[^']*)' key '(?P<key>[^']*)'$")
WHOLE_REF = re.compile(r"^ConfigMap '(?P<name>[^']*)'$")
K8S_VARIABLE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


@dataclass(frozen=True)
class ConfigMap:
    file: str
    namespace: str | None
    values: dict[str, tuple[str, int | None]]
    """key -> (value, line)"""
    line_files: tuple[str, ...] = ()
    """Other files its values are written in (a Kustomize generator's env file): see workload.LINE_FILE_STRIDE."""

    def where(self, line: int | None) -> tuple[str, int | None]:
        return file_line(self.file, self.line_files, line)


def config_maps_of(root: yaml.Node, file: str, line_files: tuple[str, ...] = ()) -> dict[str, list[ConfigMap]]:
    """A ConfigMap document's data by its name (none for any other document)."""
    if nodes.text(nodes.get(root, "kind")) != "ConfigMap" or nodes.get(root, "apiVersion") is None:
        return {}
    name = nodes.text(nodes.get(root, "metadata", "name"))
    values = {key: (text, nodes.line(value)) for key, _, value in nodes.pairs(nodes.get(root, "data"))
              if (text := nodes.text(value)) is not None}  # fmt: skip
    namespace = nodes.text(nodes.get(root, "metadata", "namespace"))
    return {name: [ConfigMap(file, namespace, values, line_files)]} if name else {}


def with_config_maps(workloads: list[Workload], maps: dict[str, list[ConfigMap]]) -> list[Workload]:
    return [_with_config_file(_resolved(w, maps), maps) if w.platform == "kubernetes" and maps else w
            for w in workloads]


def config_file_option(argv: tuple[Token, ...] | list[Token]) -> tuple[int, int, str] | None:
    """(index, tokens it takes, path) of `--config PATH` / `--config=PATH` in a serve argv, or None."""
    for index, token in enumerate(argv):
        if token.text.startswith("--config="):
            return index, 1, token.text.partition("=")[2]
        if token.text == "--config" and index + 1 < len(argv):
            return index, 2, argv[index + 1].text
    return None


def _with_config_file(workload: Workload, maps: dict[str, list[ConfigMap]]) -> Workload:
    """`vllm serve --config /etc/vllm/config.yaml` whose file a scanned ConfigMap holds (one data key of that file
    name in the workload's namespace, as a configMap volume mounts it): the argv reads that content, written to a
    file of kvdoctor's own (the container's path is not on this machine)."""
    found = config_file_option(workload.argv)
    if found is None:
        return workload
    index, taken, path = found
    name = PurePosixPath(path).name
    holders = [(map_name, config) for map_name, configs in maps.items() for config in configs
               if name in config.values and (config.namespace is None or workload.namespace is None
                                             or config.namespace == workload.namespace)]  # fmt: skip
    if len(holders) != 1:
        return workload
    map_name, config = holders[0]
    text, line = config.values[name]
    handle, copy_name = tempfile.mkstemp(dir=_copies_folder(), suffix=f"-{name}")
    copy = Path(copy_name)
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    argv = list(workload.argv)
    argv[index : index + taken] = [Token("--config", argv[index].line), Token(str(copy), argv[index].line)]
    note = f"--config {path}: read from ConfigMap {map_name!r} key {name!r} ({':'.join(map(str, config.where(line)))})"
    return replace(workload, argv=tuple(argv), notes=workload.notes + (note,))


def _resolved(workload: Workload, maps: dict[str, list[ConfigMap]]) -> Workload:
    env: list[EnvVar] = []
    used: list[str] = []
    for var in workload.env:
        found = KEY_REF.match(var.source or "") if var.value is None else None
        config = _config(maps, found.group("name"), workload.namespace) if found else None
        if config is not None and found.group("key") in config.values:
            value, line = config.values[found.group("key")]
            file, line = config.where(line)
            workload, placed = workload.line_in(file, line)  # a ConfigMap of another file: its line in that file
            env.append(EnvVar(var.name, value, placed))
            used.append(f"{var.name} from ConfigMap {found.group('name')!r} ({file}:{line})")
        else:
            env.append(var)
    env_from = []
    for whole in workload.env_from:
        found = WHOLE_REF.match(whole)
        config = _config(maps, found.group("name"), workload.namespace) if found else None
        if config is None:
            env_from.append(whole)
            continue
        defined = {e.name for e in env}
        taken = []
        for key, (value, line) in config.values.items():
            if key not in defined:
                workload, placed = workload.line_in(*config.where(line))
                taken.append(EnvVar(key, value, placed))
        env = taken + env
        used.append(f"envFrom ConfigMap {found.group('name')!r} ({config.file})")
    if not used:
        return workload
    known = {e.name: e.value for e in env if e.value is not None}
    argv = [Token(K8S_VARIABLE.sub(lambda m: known.get(m.group(1), m.group(0)), t.text), t.line) for t in workload.argv]
    if workload.expands_shell:  # under sh -c an unquoted $EXTRA_ARGS is split into its words
        argv = expand_words(argv, known)
    return replace(workload, env=tuple(env), env_from=tuple(env_from), argv=tuple(argv),
                   notes=workload.notes + tuple(f"{u}: read from the scanned files" for u in used))  # fmt: skip


def is_scanned_copy(path: str) -> bool:
    """Whether a --config path is kvdoctor's copy of a scanned ConfigMap's file (not a path of this machine)."""
    return _copies_folder.cache_info().currsize > 0 and Path(path).parent == _copies_folder()


@lru_cache(maxsize=1)
def _copies_folder() -> Path:
    """One temporary folder per process for the config files read from ConfigMaps, removed at exit."""
    folder = Path(tempfile.mkdtemp(prefix="kvdoctor-config-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def _config(maps: dict[str, list[ConfigMap]], name: str, namespace: str | None) -> ConfigMap | None:
    """The ConfigMap of that name in the workload's namespace (either unnamed: the same), when exactly one fits."""
    fits = [c for c in maps.get(name, []) if c.namespace is None or namespace is None or c.namespace == namespace]
    return fits[0] if len(fits) == 1 else None
