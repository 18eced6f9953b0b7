"""ConfigMaps of the scanned tree -> the env values they give: a container's `configMapKeyRef` and `envFrom:
configMapRef` whose ConfigMap is in a scanned file take its `data` values (on the ConfigMap's own lines), and the
container's `$(VAR)` (and `$VAR` under `sh -c`) are expanded from them."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import yaml

from kvdoctor.scan import nodes
from kvdoctor.scan.command import expand_shell_variables
from kvdoctor.scan.workload import EnvVar, Token, Workload

KEY_REF = re.compile(r"^ConfigMap '(?P<name>[^']*)' key '(?P<key>[^']*)'$")
WHOLE_REF = re.compile(r"^ConfigMap '(?P<name>[^']*)'$")
K8S_VARIABLE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


@dataclass(frozen=True)
class ConfigMap:
    file: str
    namespace: str | None
    values: dict[str, tuple[str, int | None]]
    """key -> (value, line)"""


def config_maps_of(root: yaml.Node, file: str) -> dict[str, list[ConfigMap]]:
    """A ConfigMap document's data by its name (none for any other document)."""
    if nodes.text(nodes.get(root, "kind")) != "ConfigMap" or nodes.get(root, "apiVersion") is None:
        return {}
    name = nodes.text(nodes.get(root, "metadata", "name"))
    values = {key: (text, nodes.line(value)) for key, _, value in nodes.pairs(nodes.get(root, "data"))
              if (text := nodes.text(value)) is not None}  # fmt: skip
    namespace = nodes.text(nodes.get(root, "metadata", "namespace"))
    return {name: [ConfigMap(file, namespace, values)]} if name else {}


def with_config_maps(workloads: list[Workload], maps: dict[str, list[ConfigMap]]) -> list[Workload]:
    return [_resolved(w, maps) if w.platform == "kubernetes" and maps else w for w in workloads]


def _resolved(workload: Workload, maps: dict[str, list[ConfigMap]]) -> Workload:
    env: list[EnvVar] = []
    used: list[str] = []
    for var in workload.env:
        found = KEY_REF.match(var.source or "") if var.value is None else None
        config = _config(maps, found.group("name"), workload.namespace) if found else None
        if config is not None and found.group("key") in config.values:
            value, line = config.values[found.group("key")]
            env.append(EnvVar(var.name, value, line))
            used.append(f"{var.name} from ConfigMap {found.group('name')!r} ({config.file}:{line})")
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
        env = [EnvVar(key, value, line) for key, (value, line) in config.values.items() if key not in defined] + env
        used.append(f"envFrom ConfigMap {found.group('name')!r} ({config.file})")
    if not used:
        return workload
    known = {e.name: e.value for e in env if e.value is not None}
    argv = [Token(K8S_VARIABLE.sub(lambda m: known.get(m.group(1), m.group(0)), t.text), t.line) for t in workload.argv]
    if workload.expands_shell:
        argv = expand_shell_variables(argv, known)
    return replace(workload, env=tuple(env), env_from=tuple(env_from), argv=tuple(argv),
                   notes=workload.notes + tuple(f"{u}: read from the scanned files" for u in used))  # fmt: skip


def _config(maps: dict[str, list[ConfigMap]], name: str, namespace: str | None) -> ConfigMap | None:
    """The ConfigMap of that name in the workload's namespace (either unnamed: the same), when exactly one fits."""
    fits = [c for c in maps.get(name, []) if c.namespace is None or namespace is None or c.namespace == namespace]
    return fits[0] if len(fits) == 1 else None
