"""Amazon ECS task definitions that run vLLM -> workloads: a task-definition JSON file (`containerDefinitions`), a
Terraform `aws_ecs_task_definition` (its `container_definitions`: jsonencode'd HCL or a JSON heredoc) and a module
with a `container_definitions` map of containers (terraform-aws-modules/ecs's service module, snake_case keys).

An ECS container's `command` is the image's CMD and `entryPoint` its ENTRYPOINT, as Docker's; `environment` holds
{name, value} entries; `resourceRequirements` of type GPU is its GPUs (docs.aws.amazon.com/AmazonECS/latest/
developerguide/task_definition_parameters.html). Each container is read as the Kubernetes container that runs the
same process (command = entryPoint, args = command)."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import yaml

from kvdoctor.scan import hcl, nodes, terraform
from kvdoctor.scan.documents import Document
from kvdoctor.scan.embedded_scripts import INSTANCE_TYPE_LABEL, named_instance_types
from kvdoctor.scan.kubernetes import container_workload
from kvdoctor.scan.workload import GpuSelector, Workload

JSON_ENCODED = re.compile(r"^\$\{\s*jsonencode\((.*)\)\s*\}$", re.DOTALL)
# the container definition's keys in the JSON / jsonencode form and in terraform-aws-modules' snake_case form
KEYS = {"entry_point": "entryPoint", "resource_requirements": "resourceRequirements"}


def is_task_definition(root: yaml.Node) -> bool:
    """A task-definition JSON (what `aws ecs register-task-definition --cli-input-json` takes)."""
    return nodes.is_seq(nodes.get(root, "containerDefinitions"))


def task_definition_workloads(doc: Document, source_text: str) -> list[Workload]:
    family = nodes.text(nodes.get(doc.root, "family")) or "(unnamed)"
    return _workloads(nodes.items(nodes.get(doc.root, "containerDefinitions")), family, "ECS task definition",
                      doc.file)  # fmt: skip


def terraform_workloads(root: yaml.Node, file: str, defaults: dict[str, str],
                        given: set[str] = frozenset()) -> list[Workload]:  # fmt: skip
    """The workloads of a Terraform file's ECS task definitions and modules with a container_definitions map
    (``defaults``: the module's values, terraform.module_defaults; ``given``: the names a module call set)."""
    found: list[Workload] = []
    machine = _machine(root, defaults) or _module_machine(file, defaults)
    for labels, body in hcl.blocks(root, "resource"):
        if labels[:1] == ["aws_ecs_task_definition"]:
            definitions = _definitions(nodes.get(body, "container_definitions"), file)  # parsed, then filled
            note = terraform.fill_defaults(yaml.SequenceNode("tag:yaml.org,2002:seq", [body] + definitions), defaults,
                                          given)
            family = nodes.text(nodes.get(body, "family"))
            name = family if family and not hcl.is_unknown(family) else (labels[1] if len(labels) > 1 else "(unnamed)")
            found += _workloads(definitions, name, "Terraform ECS task definition", file, note)
    for labels, body in hcl.blocks(root, "module"):
        definitions = nodes.get(body, "container_definitions")
        if not nodes.is_map(definitions):
            continue
        note = terraform.fill_defaults(body, defaults, given)
        named = nodes.text(nodes.get(body, "name"))
        name = named if named and not hcl.is_unknown(named) else (labels[0] if labels else "(unnamed)")
        containers = [_named(definition, key) for key, _, definition in nodes.pairs(definitions)
                      if key != hcl.LABELS and nodes.is_map(definition)]  # fmt: skip
        found += _workloads(containers, name, "Terraform ECS service", file, note)
    if machine is None:
        return found
    selector, note = machine
    return [replace(w, gpu_selectors=(selector,), notes=w.notes + (note,)) if not w.gpu_selectors else w for w in found]


def _machine(root: yaml.Node, defaults: dict[str, str]) -> tuple[GpuSelector, str] | None:
    """The one EC2 instance type the file's blocks name (`instance_type = "g5.12xlarge"`, or a local / variable
    default), as the instance-type label its GPU is looked up by, with a note; None for none or several."""
    return _one_machine([(None, root)], defaults, "the file")


def _module_machine(file: str, defaults: dict[str, str]) -> tuple[GpuSelector, str] | None:
    """The one instance type the module's other .tf files name (a launch template in main.tf, its default in
    variables.tf), when the task definition's own file names none; the note says which file."""
    return _one_machine([(sibling.name, root) for sibling, root in terraform.sibling_roots(file)], defaults,
                        "the module")


def _one_machine(roots: list[tuple[str | None, yaml.Node]], defaults: dict[str, str],
                 where: str) -> tuple[GpuSelector, str] | None:  # fmt: skip
    """The one instance type the roots name (each with its file's name, None for the scanned file itself: its lines
    are the selector's), with its note; None for none or several."""
    named: dict[str, tuple[str | None, int | None]] = {}
    for name, root in roots:
        for instance, line in named_instance_types(root, defaults):
            named.setdefault(instance, (name, line))
    if len(named) != 1:
        return None
    ((instance, (name, line)),) = named.items()
    at = f"{name} line {line}" if name else f"line {line}"
    return (GpuSelector(INSTANCE_TYPE_LABEL, (instance,), None if name else line),
            f"the GPU read from the one instance type {where} names ({instance}, {at}): the EC2 capacity the "
            "service runs on, as its capacity provider's Auto Scaling group launches it")


def _definitions(value: yaml.Node | None, file: str) -> list[yaml.Node]:
    """The container definitions of `container_definitions = jsonencode([...])` or a JSON string (a heredoc)."""
    if nodes.is_seq(value):
        return nodes.items(value)
    text = nodes.text(value)
    if not text:
        return []
    line = nodes.line(value) or 1
    encoded = JSON_ENCODED.match(text.strip())
    try:
        if encoded is not None:  # HCL inside jsonencode(), on the file's own lines
            parsed = hcl.parse("\n" * (line - 1) + "definitions = " + encoded.group(1), file)
            return nodes.items(nodes.get(parsed, "definitions"))
        json.loads(text)  # a JSON heredoc: valid JSON is valid YAML, composed on the file's lines
        return nodes.items(yaml.compose("\n" * line + text, Loader=yaml.SafeLoader))
    except (hcl.HclError, ValueError, yaml.YAMLError):
        return []


def _named(definition: yaml.MappingNode, key: str) -> yaml.MappingNode:
    """A module's container (keyed by its name in the map) with its `name` when it states none."""
    if nodes.get(definition, "name") is not None:
        return definition
    return yaml.MappingNode(definition.tag, [(nodes.str_node("name", definition), nodes.str_node(key, definition))]
                            + list(definition.value), definition.start_mark, definition.end_mark)  # fmt: skip


def _workloads(definitions: list[yaml.Node], name: str, kind: str, file: str, note: str | None = None
               ) -> list[Workload]:  # fmt: skip
    found = []
    for definition in definitions:
        workload = _container(definition, name, kind, file)
        if workload is not None:
            found.append(replace(workload, notes=workload.notes + (note,)) if note else workload)
    return found


def _container(definition: yaml.Node, name: str, kind: str, file: str) -> Workload | None:
    fields = {KEYS.get(key, key): value for key, _, value in nodes.pairs(definition) if key != hcl.LABELS}
    pairs = [("name", fields.get("name")), ("image", fields.get("image")), ("command", fields.get("entryPoint")),
             ("args", fields.get("command")), ("env", fields.get("environment"))]
    shaped = yaml.MappingNode("tag:yaml.org,2002:map", [(nodes.str_node(key, definition), value)
                                                        for key, value in pairs if value is not None],
                              definition.start_mark, definition.end_mark)  # fmt: skip
    workload = container_workload(shaped, "", file=file, line=nodes.line(definition), platform="ecs", kind=kind,
                                  name=name, selectors=())  # fmt: skip
    if workload is None:
        return None
    count, line = _gpus(fields.get("resourceRequirements"))
    return replace(workload, gpu_limit=count, gpu_limit_line=line,
                   notes=workload.notes + ("an ECS container: `command` is the image's CMD, `entryPoint` its "
                                           "ENTRYPOINT; its GPUs are resourceRequirements of type GPU",))  # fmt: skip


def _gpus(requirements: yaml.Node | None) -> tuple[int | None, int | None]:
    for requirement in nodes.items(requirements):
        kind = nodes.text(nodes.get(requirement, "type"))
        value = nodes.get(requirement, "value")
        if kind == "GPU" and (nodes.text(value) or "").isdigit():
            return int(nodes.text(value)), nodes.line(value)
    return None, None
