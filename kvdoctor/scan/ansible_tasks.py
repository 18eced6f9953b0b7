"""An Ansible task that runs vLLM's container (community.docker.docker_container, containers.podman.podman_container):
its module parameters read as a Compose service's (image, command, entrypoint, env, device_requests as `gpus:`), the
Jinja2 in their values rendered with the role's variables (scan/ansible_templates.py), each value on its own line."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import yaml

from kvdoctor.scan import compose, nodes
from kvdoctor.scan.documents import Document
from kvdoctor.scan.workload import Workload

MODULES = ("community.docker.docker_container", "docker_container", "containers.podman.podman_container",
           "podman_container")  # fmt: skip
NESTED = ("block", "rescue", "always")
"""Task keys that hold more tasks."""
AS_COMPOSE = {"image": "image", "command": "command", "entrypoint": "entrypoint", "env": "environment",
              "device_requests": "gpus"}  # fmt: skip
"""The module's parameter -> the Compose service key of the same meaning (the docker SDK's, which both follow)."""


def is_tasks(root: yaml.Node) -> bool:
    """A task list (a role's tasks/*.yml, a play's tasks) with a container task."""
    return nodes.is_seq(root) and any(_container_tasks(root))


def workloads(doc: Document, source_text: str) -> list[Workload]:
    from kvdoctor.scan.ansible_templates import render_values

    found = []
    for module, params in _container_tasks(doc.root):
        read_from = render_values(params, Path(doc.file))
        service = yaml.MappingNode("tag:yaml.org,2002:map", [
            (yaml.ScalarNode("tag:yaml.org,2002:str", compose_key, key.start_mark, key.end_mark), value)
            for name, key, value in nodes.pairs(params) if (compose_key := AS_COMPOSE.get(name))
        ], params.start_mark, params.end_mark)  # fmt: skip
        name_node = nodes.get(params, "name")
        name = nodes.text(name_node) or "container"
        workload = compose.service_workload(doc.file, name, name_node or params, service, source_text)
        if workload is None:
            continue
        runner = "podman" if "podman" in module else "docker"
        notes = (f"Ansible task {module}: its parameters read as a {runner} container's",)
        if read_from:
            notes += (f"Jinja2 in its values rendered with the role's variables ({', '.join(read_from)}); "
                      "variables set elsewhere (inventory, play) are unknown here",)  # fmt: skip
        found.append(replace(workload, platform="ansible", kind=f"Ansible {module.rsplit('.', 1)[-1]}",
                             notes=workload.notes + notes))  # fmt: skip
    return found


def _container_tasks(tasks: yaml.Node):
    """(module, its parameters) of every container task, blocks included."""
    for task in nodes.items(tasks):
        if not nodes.is_map(task):
            continue
        for nested in NESTED:
            if nodes.is_seq(nodes.get(task, nested)):
                yield from _container_tasks(nodes.get(task, nested))
        for module in MODULES:
            params = nodes.get(task, module)
            if nodes.is_map(params) and nodes.get(params, "image") is not None:
                yield module, params
