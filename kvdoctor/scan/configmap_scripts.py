"""A pod that runs a script a ConfigMap holds: a container's command (`bash /scripts/start.sh`, `python
/app/serve.py`, the path alone) or a RayJob's `spec.entrypoint` naming a file under a volumeMount whose volume is a
ConfigMap (`volumes: [{name: code, configMap: {name: vllm-scripts}}]`). Kubernetes writes each data key as a file
in the mount's folder (its `items` may rename them; Kubernetes docs, "Configure a Pod to Use a ConfigMap"). The
script, from a ConfigMap in the scanned files, is read as a shell script or a Python app, on the ConfigMap's lines,
with the container's image, env and GPUs."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from pathlib import PurePosixPath

import yaml

from kvdoctor.scan import nodes, python_apps, ray_cluster_gpus, ray_job
from kvdoctor.scan.config_maps import ConfigMap
from kvdoctor.scan.documents import SourceFile
from kvdoctor.scan.kubernetes import (container_env, gpu_limit, is_ray_cluster, pod_gpu_selectors, pod_spec_paths,
                                      pod_specs_within)
from kvdoctor.scan.scripts import script_findings
from kvdoctor.scan.workload import Workload

SHELLS = {"bash", "sh", "zsh", "dash"}
PYTHONS = ("python", "python3")


@dataclass(frozen=True)
class ScriptRun:
    """A container (or a RayJob's entrypoint) that runs a file of a ConfigMap volume."""

    container: yaml.Node | None
    spec: yaml.Node | None
    config_map: str
    key: str
    language: str
    """'shell' or 'python'."""
    label: str
    """The container's name ('entrypoint' for a RayJob's)."""


def script_runs(root: yaml.Node) -> list[ScriptRun]:
    """The object's containers (and RayJob entrypoint) that run a script from a ConfigMap volume."""
    kind = nodes.text(nodes.get(root, "kind")) or ""
    paths = pod_spec_paths(root, kind)
    specs = [nodes.get(root, *path) for path in paths] if paths is not None else pod_specs_within(root)
    found: list[ScriptRun] = []
    for spec in (s for s in specs if s is not None):
        for container in nodes.items(nodes.get(spec, "containers")):
            words = [nodes.text(w) or "" for w in nodes.items(nodes.get(container, "command"))]
            words += [nodes.text(w) or "" for w in nodes.items(nodes.get(container, "args"))]
            run = _script_run(words, container, spec, nodes.text(nodes.get(container, "name")) or "(unnamed)")
            found += [run] if run else []
    entrypoint = nodes.text(nodes.get(root, "spec", "entrypoint")) if kind == "RayJob" else None
    if entrypoint:
        head = nodes.get(root, "spec", "rayClusterSpec", "headGroupSpec", "template", "spec")
        containers = nodes.items(nodes.get(head, "containers"))
        try:
            words = shlex.split(entrypoint)
        except ValueError:
            words = []
        run = _script_run(words, containers[0] if containers else None, head, "entrypoint")
        found += [run] if run else []
    return found


def _script_run(words: list[str], container: yaml.Node | None, spec: yaml.Node | None, label: str) -> ScriptRun | None:
    if not words:
        return None
    program = PurePosixPath(words[0]).name
    if program in SHELLS and len(words) > 1 and not words[1].startswith("-"):
        path, language = words[1], "shell"
    elif program.startswith(PYTHONS) and len(words) > 1 and words[1].endswith(".py"):
        path, language = words[1], "python"
    elif words[0].startswith("/") and words[0].endswith((".sh", ".py")):
        path, language = words[0], "python" if words[0].endswith(".py") else "shell"
    else:
        return None
    mounted = _config_map_file(path, container, spec)
    return ScriptRun(container, spec, mounted[0], mounted[1], language, label) if mounted else None


def _config_map_file(path: str, container: yaml.Node | None, spec: yaml.Node | None) -> tuple[str, str] | None:
    """(ConfigMap name, data key) of the file at `path` in the container, when a ConfigMap volume is mounted there."""
    volumes = {nodes.text(nodes.get(v, "name")): v for v in nodes.items(nodes.get(spec, "volumes"))}
    for mount in nodes.items(nodes.get(container, "volumeMounts")):
        folder = (nodes.text(nodes.get(mount, "mountPath")) or "").rstrip("/")
        volume = volumes.get(nodes.text(nodes.get(mount, "name")))
        config_map = nodes.get(volume, "configMap")
        if not folder or config_map is None:
            continue
        sub_path = nodes.text(nodes.get(mount, "subPath"))
        if sub_path and path == folder:  # a single key mounted as the file itself
            return nodes.text(nodes.get(config_map, "name")) or "", sub_path
        if not path.startswith(folder + "/"):
            continue
        relative = path[len(folder) + 1:]
        items = {nodes.text(nodes.get(i, "path")): nodes.text(nodes.get(i, "key"))
                 for i in nodes.items(nodes.get(config_map, "items"))}  # fmt: skip
        return nodes.text(nodes.get(config_map, "name")) or "", items.get(relative, relative)
    return None


def workloads(root: yaml.Node, file: str, maps: dict[str, list[ConfigMap]]) -> list[Workload]:
    """The vLLM workloads of the object's scripts from ConfigMaps the scan read."""
    found: list[Workload] = []
    name = nodes.text(nodes.get(root, "metadata", "name")) or "(unnamed)"
    kind = nodes.text(nodes.get(root, "kind")) or ""
    for run in script_runs(root):
        held = next((m for m in maps.get(run.config_map, ()) if run.key in m.values), None)
        if held is None:
            continue
        text, value_line = held.values[run.key]
        first = (value_line or 0) + 1  # a block scalar's text starts on the line after `key: |`
        env, env_from = container_env(run.container) if run.container is not None else ([], [])
        known = {e.name: e.value for e in env if e.value is not None}
        if run.language == "python":
            read = python_apps.workloads(SourceFile(held.file, "\n" * (first - 1) + text))
        else:
            read, _ = script_findings(text, first, held.file, name, known)
        limit, limit_line = gpu_limit(run.container) if run.container is not None else (None, None)
        cluster = ray_cluster_gpus.cluster_gpus(root) if ray_job.is_ray_job(root) or is_ray_cluster(root) else None
        if cluster is not None or kind == "RayJob":  # vLLM's workers span the Ray cluster's pods: not one container's
            limit, limit_line = None, None
        image = nodes.get(run.container, "image")
        note = (f"{kind} {name} runs {run.key} of ConfigMap {run.config_map} ({held.file}), mounted in its "
                f"{run.label} container: the script's vLLM command, with the container's image, env and GPUs")
        for workload in read:
            adopted = replace(workload, platform="kubernetes", kind=kind, name=name, container=run.label,
                              namespace=nodes.text(nodes.get(root, "metadata", "namespace")),
                              image=nodes.text(image), env=tuple(env) + workload.env, env_from=tuple(env_from),
                              gpu_limit=limit if limit is not None else workload.gpu_limit,
                              gpu_limit_line=limit_line if limit is not None else workload.gpu_limit_line,
                              gpu_selectors=pod_gpu_selectors(run.spec) if run.spec is not None else (),
                              cluster_gpus=cluster, notes=(note,) + workload.notes)  # fmt: skip
            if held.file != file:
                adopted = _on_manifest_lines(adopted, file, nodes.line(root), nodes.line(image))
            else:
                adopted = replace(adopted, image_line=nodes.line(image))
            found.append(adopted)
    return found


def _on_manifest_lines(workload: Workload, file: str, line: int | None, image_line: int | None) -> Workload:
    """A workload read from another file's ConfigMap, anchored in the manifest that runs it (its argv keeps the
    ConfigMap file's lines)."""
    script_file = workload.file
    moved = replace(workload, file=file, line=line, image_line=image_line)
    argv = []
    for token in workload.argv:
        moved, at = moved.line_in(script_file, token.line)
        argv.append(replace(token, line=at))
    moved, command_line = moved.line_in(script_file, workload.command_line)
    return replace(moved, argv=tuple(argv), command_line=command_line)
