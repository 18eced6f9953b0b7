"""A shell script held in a string value of an object scan does not otherwise read: the user data a cloud instance
runs at boot (a Crossplane / Cluster API / Karpenter object's `userData`, a Terraform `aws_instance.user_data` or
`metadata_startup_script`), cloud-init's `runcmd` and `write_files` (a `#cloud-config` document, also inside such a
string). Its `docker run` / `vllm serve` commands are read as a script's (scripts.py), on the file's own lines; its
workloads are named by the file, as a script's are, and the object's instance type (`instanceType`, Terraform's
`instance_type`, GCP's `machine_type`, Azure's `vm_size`) names their GPU as a node's instance-type label would."""

from __future__ import annotations

import re
import shlex
from dataclasses import replace
from pathlib import PurePosixPath
from typing import Iterator

import yaml

from kvdoctor.scan import nodes, systemd_units, terraform_templates
from kvdoctor.scan.scripts import installed_before, installed_in, pip_installed_release, script_workloads
from kvdoctor.scan.workload import GpuSelector, Token, Workload

RUNS_VLLM = re.compile(r"\b(?:docker|podman|nerdctl)\s+run\b|\bvllm\s+serve\b|-m\s+vllm\.entrypoints\.")
CLOUD_CONFIG = re.compile(r"^\s*#cloud-config\b")
UNIT_TEXT = re.compile(r"^\s*\[Service\]\s*$(?s:.*)^\s*ExecStart\s*=", re.MULTILINE)
"""A string that is a systemd service unit (its [Service] section sets ExecStart), not a shell script."""
COMMAND_LISTS = {"runcmd", "bootcmd"}
"""cloud-init's command lists: each item a shell line, or an argv list."""
MAX_DEPTH = 40
INSTANCE_TYPE_KEYS = {"instanceType", "instance_type", "machineType", "machine_type", "vmSize", "vm_size", "size"}
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
STR = "tag:yaml.org,2002:str"


def workloads(root: yaml.Node, file: str, source_text: str,
              machine: tuple[GpuSelector, ...] | None = None) -> list[Workload]:  # fmt: skip
    """The vLLM workloads of the scripts held in the object's string values (``machine``: the instance type that names
    their GPU, when another object than ``root`` names it)."""
    name = PurePosixPath(file).name
    machine = _instance_type(root) if machine is None else machine
    found: list[Workload] = []
    defaults = _placeholder_values(root)
    installed = _installed_release(root)
    for script, first, key in scripts_in(root, source_text):
        note = f"a script in `{key}` ({file}:{first}), read as a shell script run on the machine"
        env = None
        # a boot script that pip-installs vLLM and writes the unit that runs it (user_data: pip install, cat <<EOF)
        release = installed_in(script, first) or installed
        if UNIT_TEXT.search(script):  # cloud-init's write_files writes /etc/systemd/system/vllm.service
            script, env = systemd_units.as_script(script)
            note = f"a systemd unit in `{key}` ({file}:{first}), read as that unit's ExecStart"
        script, filled = placeholders_filled(script, defaults)
        if filled:
            note += f"; its {{placeholders}} filled from the document's {filled}, the others left unknown"
        for workload in script_workloads(script, first, file, name, env):
            selectors = workload.gpu_selectors or machine
            if release and workload.image is None and workload.vllm_pin is None:
                workload = installed_before(workload, release)
            found.append(replace(workload, notes=workload.notes + (note,), gpu_selectors=selectors))
    return found


def rendered_workloads(body: yaml.Node, file: str, defaults: dict[str, str]) -> list[Workload]:
    """The vLLM workloads of the files a Terraform resource's values render (`user_data =
    templatefile("${path.module}/cloud-init.tpl", {...})`, `file(...)`: terraform_templates.py), read on the
    template's own lines with the resource's machine type naming their GPU; the template's own reading, with its
    variables unknown, gives way to this one (run.not_alone)."""
    machine = _instance_type(body)
    found: list[Workload] = []
    for key, value in _keyed_scalars(body):
        text = nodes.text(value) or ""
        if "file(" not in text or (rendered := terraform_templates.render(text, file, defaults)) is None \
                or not _runs_vllm(rendered.text):
            continue
        start = yaml.Mark(str(rendered.path), 0, 0, 0, None, None)
        holder = nodes.map_node([(nodes.str_node(key, value), yaml.ScalarNode(STR, rendered.text, start, start))], value)
        note = rendered.note(f"{file}:{nodes.line(value)}")
        found += [replace(w, notes=w.notes + (note,), read_through=(str(rendered.path),))
                  for w in workloads(holder, str(rendered.path), rendered.text, machine)]  # fmt: skip
    return found


def _keyed_scalars(node: yaml.Node, holder: str = "", depth: int = 0) -> Iterator[tuple[str, yaml.Node]]:
    for key, value in _keyed_values(node):
        if nodes.is_scalar(value):
            yield key or holder, value
        elif depth < MAX_DEPTH:
            yield from _keyed_scalars(value, key or holder, depth + 1)


def _installed_release(root: yaml.Node) -> tuple[str, Token] | None:
    """The release the last `pip install vllm==X` of cloud-init's command lists installs (a unit then runs it)."""
    installed = None
    stack, visited = [root], 0
    while stack and visited < 10_000:
        node, visited = stack.pop(), visited + 1
        for key, value in _keyed_values(node):
            if key in COMMAND_LISTS and nodes.is_seq(value):
                for item in nodes.items(value):
                    installed = (pip_installed_release([Token(nodes.text(w) or "", nodes.line(w))
                                                        for w in nodes.items(item)]) if nodes.is_seq(item)
                                 else installed_in(nodes.text(item) or "", nodes.text_line(item))) or installed
            elif nodes.is_map(value) or nodes.is_seq(value):
                stack.append(value)
            elif nodes.is_scalar(value) and isinstance(value.value, str) and CLOUD_CONFIG.match(value.value):
                installed = _installed_in_cloud_config(value) or installed  # user_data = "#cloud-config ..."
    return installed


def _installed_in_cloud_config(value: yaml.Node) -> tuple[str, Token] | None:
    """The release a #cloud-config document held in a string pip-installs, its word on the file's line."""
    try:
        inner = yaml.compose(value.value, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    found = _installed_release(inner) if inner is not None else None
    if found is None:
        return None
    release, word = found
    return release, Token(word.text, (word.line or 1) + nodes.text_line(value) - 1)


PLACEHOLDER = re.compile(r"(?<![$\\{])\{([A-Za-z_][A-Za-z0-9_]*)\}(?!\})")
"""A template's `{name}` (Python's str.format, a recipe runner's): not the shell's `${name}`, not Jinja's `{{ name }}`."""
PLACEHOLDER_SOURCES = ("defaults", "vars", "variables", "params", "parameters", "settings", "config")
"""Top-level mappings a template's placeholders are filled from (a spark-vllm-docker recipe's `defaults`)."""


def _placeholder_values(root: yaml.Node) -> tuple[str, dict[str, str]]:
    """(the mapping's key, its scalar values) of the document's first top-level mapping of template values."""
    for key in PLACEHOLDER_SOURCES:
        mapping = nodes.get(root, key)
        if nodes.is_map(mapping):
            return key, {name: text for name, _, value in nodes.pairs(mapping) if (text := nodes.text(value)) is not None}
    return "", {}


def placeholders_filled(script: str, defaults: tuple[str, dict[str, str]]) -> tuple[str, str]:
    """The script with its `{name}` placeholders filled from the document's values (the rest as unknown shell
    variables, never literal values), and the mapping's key when one was filled."""
    source, values = defaults
    if not PLACEHOLDER.search(script):
        return script, ""
    filled = PLACEHOLDER.sub(lambda m: values.get(m.group(1), "${" + m.group(1) + "}"), script)
    return filled, source if any(m.group(1) in values for m in PLACEHOLDER.finditer(script)) else ""


def _instance_type(root: yaml.Node) -> tuple[GpuSelector, ...]:
    """The machine the object creates, as the instance-type node label its GPU is looked up by (none when unnamed)."""
    first = next(named_instance_types(root), None)
    return (GpuSelector(INSTANCE_TYPE_LABEL, (first[0],), first[1]),) if first else ()


def named_instance_types(root: yaml.Node, defaults: dict[str, str] | None = None
                         ) -> Iterator[tuple[str, int | None]]:  # fmt: skip
    """Each machine type the object's keys name (instance_type, machineType, vmSize...) with its line, in the order
    met; a whole `${var.x}` / `${local.x}` takes its literal default from ``defaults``; an unresolved one is left
    out."""
    stack, visited = [root], 0
    while stack and visited < 10_000:
        node, visited = stack.pop(), visited + 1
        for key, value in _keyed_values(node):
            text = nodes.text(value) if nodes.is_scalar(value) else None
            if key in INSTANCE_TYPE_KEYS and text:
                if defaults and text.startswith("${") and text.endswith("}"):
                    text = defaults.get(text[2:-1], text)
                if "$" not in text:
                    yield text, nodes.line(value)
            if nodes.is_map(value) or nodes.is_seq(value):
                stack.append(value)


def scripts_in(root: yaml.Node, source_text: str = "", offset: int = 0,
               depth: int = 0, holder: str = "") -> list[tuple[str, int, str]]:  # fmt: skip
    """(script, its first line in the file, the key that holds it: a list item's, its list's) for each string value
    that runs vLLM."""
    found: list[tuple[str, int, str]] = []
    for key, value in _keyed_values(root):
        key = key or holder
        if depth > MAX_DEPTH:
            break
        if key in COMMAND_LISTS and nodes.is_seq(value):
            found += [(line, first + offset, key) for line, first in _command_lines(value)]
        elif nodes.is_scalar(value) and isinstance(value.value, str) and _runs_vllm(value.value):
            first = _first_line(value, source_text) + offset
            if CLOUD_CONFIG.match(value.value):
                found += _cloud_config(value.value, first - 1, depth)
            else:
                found.append((value.value, first, key))
        elif nodes.is_map(value) or nodes.is_seq(value):
            found += scripts_in(value, source_text, offset, depth + 1, key)
    return found


def _runs_vllm(text: str) -> bool:
    return bool(RUNS_VLLM.search(text)) or (bool(CLOUD_CONFIG.match(text)) and "vllm" in text.lower())


def _keyed_values(node: yaml.Node) -> list[tuple[str, yaml.Node]]:
    if nodes.is_map(node):
        return [(key, value) for key, _, value in nodes.pairs(node)]
    return [("", item) for item in nodes.items(node)]


def _command_lines(commands: yaml.Node) -> list[tuple[str, int]]:
    """cloud-init's runcmd: a string item is a shell line, a list item an argv."""
    lines = []
    for item in nodes.items(commands):
        if nodes.is_seq(item):
            line = " ".join(shlex.quote(nodes.text(word) or "") for word in nodes.items(item))
            if RUNS_VLLM.search(line):
                lines.append((line, nodes.line(item) or 1))
        elif (text := nodes.text(item)) and RUNS_VLLM.search(text):
            lines.append((text, _first_line(item, "")))
    return lines


def _cloud_config(text: str, offset: int, depth: int) -> list[tuple[str, int, str]]:
    """A #cloud-config document inside a string, read on the file's lines (`offset` lines above its first)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return []
    return scripts_in(root, text, offset, depth + 1) if root is not None else []


def _first_line(node: yaml.Node, source_text: str) -> int:
    """The line of a string's first character: a YAML block scalar (`|`) or an HCL heredoc starts on the next."""
    heredoc = source_text.startswith("<<", node.start_mark.index)
    return nodes.text_line(node) + (1 if heredoc else 0)
