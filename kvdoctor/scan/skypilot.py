"""SkyPilot task YAML -> a vLLM workload: the `run:` script's `vllm serve` line, with the task's `envs`, the
script's own top-level assignments (NUM_SHARDS=${SKYPILOT_NUM_GPUS_PER_NODE:-1}), the image of
`resources.image_id: docker:...` and the GPU and count of `resources.accelerators` (H200:8, {A100: 8})."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from kvdoctor.scan import nodes
from kvdoctor.scan.called_scripts import called_argv, called_script, placed_in
from kvdoctor.scan.command import expand_words, run_script, script_assignments
from kvdoctor.scan.documents import Document
from kvdoctor.scan.scripts import installed_before, installed_in
from kvdoctor.scan.workload import EnvVar, GpuSelector, Token, Workload

ACCELERATORS = "accelerators"
"""SkyPilot's resources.accelerators: a GPU product name (with :count), read by scan/facts.py as a product name."""
ACCELERATOR = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9_.-]*)\s*(?::\s*(\d+))?\s*$")


def is_skypilot_task(root: yaml.Node) -> bool:
    """A task: a `run` script and SkyPilot's `resources` (or `envs` / `setup`), and no Kubernetes or Compose keys."""
    if not nodes.is_map(root) or nodes.get(root, "apiVersion") is not None or nodes.get(root, "services") is not None:
        return False
    run = nodes.text(nodes.get(root, "run"))
    return run is not None and any(nodes.get(root, key) is not None for key in ("resources", "envs", "setup"))


def workloads(doc: Document, source_text: str) -> list[Workload]:
    root = doc.root
    run = nodes.get(root, "run")
    known = {name: value for name, _, node in nodes.pairs(nodes.get(root, "envs")) if (value := nodes.text(node))}
    resources = nodes.get(root, "resources")
    accelerators = _accelerators(nodes.get(resources, "accelerators"))
    counts = {count for _, count in accelerators if count is not None}
    per_node = counts.pop() if len(counts) == 1 else None
    if per_node is not None:
        known["SKYPILOT_NUM_GPUS_PER_NODE"] = str(per_node)  # SkyPilot sets it in the run script's environment
    num_nodes = nodes.text(nodes.get(root, "num_nodes")) or "1"
    if num_nodes.isdigit():
        known["SKYPILOT_NUM_NODES"] = num_nodes  # SkyPilot sets it too (its docs: environment variables)
    argv = run_script(run, source_text)
    called = None
    if argv is None:  # `run: bash scripts/serve.sh`: the command is in a file of the workdir
        called = called_script(nodes.text(run) or "", nodes.line(run) or 1, _workdir(doc.file, root))
        argv = called_argv(called, script_assignments(nodes.text(run) or "", known)) if called else None
    else:
        argv = expand_words(argv, script_assignments(nodes.text(run) or "", known))
    if argv is None:
        return []
    spans = num_nodes.isdigit() and int(num_nodes) > 1
    image_node = nodes.get(resources, "image_id")
    image = (nodes.text(image_node) or "").removeprefix("docker:") or None
    accel_node = nodes.get(resources, "accelerators")
    selectors = ((GpuSelector(ACCELERATORS, tuple(name for name, _ in accelerators), nodes.line(accel_node)),)
                 if accelerators else ())  # fmt: skip
    notes = ["SkyPilot task: the `run:` script's vllm serve, with envs and the script's own assignments"]
    if spans:
        notes.append(f"num_nodes {num_nodes}: the GPUs of one node are not compared with -tp x -pp")
    env = [EnvVar(name, nodes.text(node), nodes.line(node)) for name, _, node in nodes.pairs(nodes.get(root, "envs"))]
    env += [EnvVar(name, None, nodes.line(node), "a SkyPilot secret")
            for name, _, node in nodes.pairs(nodes.get(root, "secrets"))]  # fmt: skip
    workload = Workload(
        file=doc.file, line=nodes.line(root), platform="skypilot", kind="SkyPilot task",
        name=nodes.text(nodes.get(root, "name")) or "(unnamed)", container="run", image=image,
        image_line=nodes.line(image_node), argv=tuple(argv), command_line=argv[0].line if argv else nodes.line(run),
        env=tuple(env), gpu_selectors=selectors, gpu_limit=None if spans else per_node,
        gpu_limit_line=nodes.line(accel_node), notes=tuple(notes),
    )  # fmt: skip
    installed = _setup_installs(nodes.get(root, "setup"), known) if image is None else None
    if installed is not None:  # `setup: pip install vllm==X`: the environment `run:` then runs in
        workload = installed_before(workload, installed)
    return [placed_in(workload, called) if called else workload]


def _setup_installs(setup: yaml.Node | None, known: dict[str, str]) -> tuple[str, Token] | None:
    """The release the task's `setup:` script pip-installs last (SkyPilot runs `run:` in what setup installed)."""
    text = nodes.text(setup) if setup is not None and nodes.is_scalar(setup) else None
    return installed_in(text, nodes.text_line(setup), known) if text else None


def _workdir(file: str, root: yaml.Node) -> Path:
    """The task's `workdir` (relative to the task file's folder), else that folder: where `run` runs."""
    folder = Path(file).parent
    workdir = nodes.text(nodes.get(root, "workdir"))
    return folder / workdir if workdir and not workdir.startswith(("/", "~")) and "://" not in workdir else folder


def _accelerators(node: yaml.Node | None) -> list[tuple[str, int | None]]:
    """'H200:8' -> [('H200', 8)]; {A100: 8} -> [('A100', 8)]; {L4, A10g} (any of them) -> [('L4', None), ...]."""
    if nodes.is_map(node):
        found = []
        for name, _, value in nodes.pairs(node):
            count = nodes.text(value)
            found.append((name, int(count) if count and count.isdigit() else None))
        return found
    items = nodes.items(node) if nodes.is_seq(node) else [node] if node is not None else []
    found = []
    for item in items:
        match = ACCELERATOR.match(nodes.text(item) or "")
        if match:
            found.append((match.group(1), int(match.group(2)) if match.group(2) else None))
    return found
