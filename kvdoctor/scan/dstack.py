"""dstack run configurations (`type: service` / `task`) -> a vLLM workload: the first of `commands` that launches
vLLM, with `env` (NAME=value; a bare NAME comes from the host, unknown here), dstack's own DSTACK_GPUS_NUM, the
commands' top-level assignments, `image`, and the GPU name and count of `resources.gpu` (MI300X:8, A100:80GB:2,
24GB: any GPU with that memory, one of it)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from kvdoctor.scan import nodes
from kvdoctor.scan.called_scripts import called_argv, called_script, placed_in
from kvdoctor.scan.command import expand_words, run_script, script_assignments
from kvdoctor.scan.documents import Document
from kvdoctor.scan.workload import EnvVar, GpuSelector, Workload

RUN_TYPES = {"service", "task", "dev-environment"}
GPU_KEY = "gpu"
"""dstack's resources.gpu: a GPU product name, read by scan/facts.py as a product name."""
GPUS_NUM = "DSTACK_GPUS_NUM"
"""Set by dstack in the run's environment: the run's GPUs (dstack docs, "Environment variables")."""
VENDORS = {"nvidia", "amd", "tpu", "intel", "tenstorrent"}
MEMORY = re.compile(r"^[0-9.]*(?:GB|MB|TB)[0-9.]*(?:GB|MB|TB)?$", re.IGNORECASE)  # 24GB, 24GB.., 40GB..80GB


def is_dstack_run(root: yaml.Node) -> bool:
    kind = nodes.text(nodes.get(root, "type"))
    return (nodes.is_map(root) and nodes.get(root, "apiVersion") is None and kind in RUN_TYPES
            and nodes.is_seq(nodes.get(root, "commands")))  # fmt: skip


def workloads(doc: Document, source_text: str) -> list[Workload]:
    root = doc.root
    env = _env(nodes.get(root, "env"))
    gpu_node = nodes.get(root, "resources", "gpu")
    names, count = _gpu_spec(gpu_node)
    known = {e.name: e.value for e in env if e.value is not None}
    nodes_count = nodes.text(nodes.get(root, "nodes")) or "1"
    spans = nodes_count.isdigit() and int(nodes_count) > 1
    if count is not None and not spans:
        known[GPUS_NUM] = str(count)
    for command in nodes.items(nodes.get(root, "commands")):
        argv, called = run_script(command, source_text), None
        if argv is None:  # `- bash serve.sh`: the command is in a file of the repository
            called = called_script(nodes.text(command) or "", nodes.line(command) or 1, Path(doc.file).parent)
            argv = called_argv(called, script_assignments(nodes.text(command) or "", known)) if called else None
        else:
            argv = expand_words(argv, script_assignments(nodes.text(command) or "", known))
        if argv is None:
            continue
        image_node = nodes.get(root, "image")
        notes = [f"dstack {nodes.text(nodes.get(root, 'type'))}: vLLM from `commands`, with `env` and {GPUS_NUM}"]
        if spans:
            notes.append(f"nodes {nodes_count}: the GPUs of one node are not compared with -tp x -pp")
        workload = Workload(
            file=doc.file, line=nodes.line(root), platform="dstack", kind=f"dstack {nodes.text(nodes.get(root, 'type'))}",
            name=nodes.text(nodes.get(root, "name")) or "(unnamed)", container="commands",
            image=nodes.text(image_node), image_line=nodes.line(image_node), argv=tuple(argv),
            command_line=argv[0].line if argv else nodes.line(command), env=tuple(env),
            gpu_selectors=(GpuSelector(GPU_KEY, names, nodes.line(gpu_node)),) if names else (),
            gpu_limit=None if spans else count, gpu_limit_line=nodes.line(gpu_node), notes=tuple(notes),
        )  # fmt: skip
        return [placed_in(workload, called) if called else workload]
    return []


def _env(node: yaml.Node | None) -> list[EnvVar]:
    """`env` as a list (NAME=value, or NAME alone: taken from the host) or a mapping."""
    if nodes.is_map(node):
        return [EnvVar(name, nodes.text(value), nodes.line(value)) for name, _, value in nodes.pairs(node)]
    found = []
    for item in nodes.items(node):
        name, eq, value = (nodes.text(item) or "").partition("=")
        found.append(EnvVar(name, value if eq else None, nodes.line(item), None if eq else "the host (dstack env NAME)"))
    return found


def _gpu_spec(node: yaml.Node | None) -> tuple[tuple[str, ...], int | None]:
    """('MI300X',), 8 for 'MI300X:8'; ('A100',), 2 for 'A100:80GB:2'; (), 1 for '24GB'; a mapping's name / count."""
    if nodes.is_map(node):
        name = nodes.get(node, "name")
        names = tuple(nodes.text(n) or "" for n in nodes.items(name)) if nodes.is_seq(name) else (
            (nodes.text(name),) if nodes.text(name) else ())  # fmt: skip
        count = nodes.text(nodes.get(node, "count")) or "1"
        return names, int(count) if count.isdigit() else None
    text = nodes.text(node)
    if not text:
        return (), None
    names: list[str] = []
    count: int | None = 1
    for part in text.split(":"):
        if part.lower() in VENDORS or MEMORY.match(part):
            continue
        if part.isdigit():
            count = int(part)
        elif ".." in part:
            count = None  # a range of counts: dstack picks one
        else:
            names += [n for n in part.split(",") if n]
    return tuple(names), count
