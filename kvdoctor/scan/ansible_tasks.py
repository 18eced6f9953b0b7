"""An Ansible task list or playbook that deploys vLLM: a container task (community.docker.docker_container,
containers.podman.podman_container) read as a Compose service's parameters; a kubernetes.core.k8s task's inline
`definition` (a mapping, a list of them, or a YAML string) read as the Kubernetes objects it applies; a shell /
command task's script, and the script a copy task writes from its `content:`, read as a shell script's. Jinja2 in
their values is rendered with the role's variables and the play's `vars:` (scan/ansible_templates.py), each value on
its own line."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

import yaml

from kvdoctor.scan import compose, nodes
from kvdoctor.scan.command import heredoc_bodies
from kvdoctor.scan.documents import Document, ManifestError, ReadDocument, SourceFile, compose_documents
from kvdoctor.scan.embedded_scripts import RUNS_VLLM
from kvdoctor.scan.scripts import script_workloads
from kvdoctor.scan.workload import Workload

CONTAINER_MODULES = ("community.docker.docker_container", "docker_container", "containers.podman.podman_container",
                     "podman_container")  # fmt: skip
KUBERNETES_MODULES = ("kubernetes.core.k8s", "community.kubernetes.k8s", "k8s", "community.okd.k8s",
                      "redhat.openshift.k8s")  # fmt: skip
"""Modules that apply the Kubernetes objects of their `definition` parameter."""
SHELL_MODULES = ("ansible.builtin.shell", "shell", "ansible.builtin.command", "command", "ansible.builtin.raw", "raw")
"""Modules whose free-form value (or `cmd:`) is a command line; `command`'s `argv:` list is one too."""
COPY_MODULES = ("ansible.builtin.copy", "copy")
"""Modules that write a file from their `content:` (a launch script the role installs, read as a shell script's)."""
NESTED = ("block", "rescue", "always", "tasks", "pre_tasks", "post_tasks", "handlers")
"""Keys that hold more tasks: a block's, and a play's (a playbook is a list of plays)."""
AS_COMPOSE = {"image": "image", "command": "command", "entrypoint": "entrypoint", "env": "environment",
              "device_requests": "gpus"}  # fmt: skip
"""The container module's parameter -> the Compose service key of the same meaning (the docker SDK's, which both
follow)."""


def is_tasks(root: yaml.Node) -> bool:
    """A task list (a role's tasks/*.yml) or a playbook with a task that deploys vLLM."""
    return nodes.is_seq(root) and any(_deploying_tasks(root, {}))


def workloads(doc: Document, source_text: str, read: ReadDocument) -> list[Workload]:
    """The workloads the file's tasks deploy; ``read`` reads a Kubernetes object a k8s task applies."""
    from kvdoctor.scan.ansible_templates import render_values

    found: list[Workload] = []
    for module, params, play_vars in _deploying_tasks(doc.root, {}):
        read_from = render_values(params, Path(doc.file), play_vars)
        if module in CONTAINER_MODULES:
            deployed = _container_workloads(doc, module, params, source_text)
        elif module in KUBERNETES_MODULES:
            deployed = _applied_workloads(doc, params, source_text, read)
        elif module in COPY_MODULES:
            deployed = _shell_workloads(doc, nodes.get(params, "content"))
        else:
            deployed = _shell_workloads(doc, params)
        note = f"Ansible task {module}: " + {
            **{m: "its parameters read as a container's" for m in CONTAINER_MODULES},
            **{m: "its definition read as the objects it applies" for m in KUBERNETES_MODULES},
            **{m: "the script it writes (content) read as a shell script's" for m in COPY_MODULES},
        }.get(module, "its command read as a shell script's")  # fmt: skip
        notes = (note,)
        if read_from or play_vars:
            where = ", ".join(read_from + (["the play's vars"] if play_vars else []))
            notes += (f"Jinja2 in its values rendered with {where}; variables set elsewhere (inventory, extra vars) "
                      "are unknown here",)  # fmt: skip
        found += [replace(w, notes=w.notes + notes) for w in deployed]
    return found


def _deploying_tasks(tasks: yaml.Node, play_vars: dict[str, Any]) -> Iterator[tuple[str, yaml.Node, dict[str, Any]]]:
    """(module, its parameters, the play's vars) of every task that may deploy vLLM, blocks and plays included."""
    for task in nodes.items(tasks):
        if not nodes.is_map(task):
            continue
        own_vars = play_vars
        if nodes.get(task, "hosts") is not None and nodes.is_map(nodes.get(task, "vars")):
            own_vars = {**play_vars, **(nodes.plain(nodes.get(task, "vars")) or {})}
        for nested in NESTED:
            if nodes.is_seq(nodes.get(task, nested)):
                yield from _deploying_tasks(nodes.get(task, nested), own_vars)
        for module in CONTAINER_MODULES:
            if nodes.is_map(params := nodes.get(task, module)) and nodes.get(params, "image") is not None:
                yield module, params, own_vars
        for module in KUBERNETES_MODULES:
            if nodes.is_map(params := nodes.get(task, module)) and nodes.get(params, "definition") is not None:
                yield module, params, own_vars
        for module in SHELL_MODULES:
            if (params := nodes.get(task, module)) is not None and any(map(_deploys_vllm, nodes.scalars(params))):
                yield module, params, own_vars
        for module in COPY_MODULES:
            content = nodes.get(task, module, "content") if nodes.is_map(nodes.get(task, module)) else None
            if nodes.is_scalar(content) and RUNS_VLLM.search(str(content.value)):
                yield module, nodes.get(task, module), own_vars


def _deploys_vllm(script: str) -> bool:
    """A command that runs vLLM, or a here-document naming vLLM (a manifest piped to `kubectl apply -f -`)."""
    return bool(RUNS_VLLM.search(script)) or ("<<" in script and "vllm" in script.lower())


def _container_workloads(doc: Document, module: str, params: yaml.Node, source_text: str) -> list[Workload]:
    service = yaml.MappingNode("tag:yaml.org,2002:map", [
        (yaml.ScalarNode("tag:yaml.org,2002:str", compose_key, key.start_mark, key.end_mark), value)
        for name, key, value in nodes.pairs(params) if (compose_key := AS_COMPOSE.get(name))
    ], params.start_mark, params.end_mark)  # fmt: skip
    name_node = nodes.get(params, "name")
    workload = compose.service_workload(doc.file, nodes.text(name_node) or "container", name_node or params, service,
                                        source_text)  # fmt: skip
    if workload is None:
        return []
    return [replace(workload, platform="ansible", kind=f"Ansible {module.rsplit('.', 1)[-1]}")]


def _applied_workloads(doc: Document, params: yaml.Node, source_text: str, read: ReadDocument) -> list[Workload]:
    """The workloads of the objects a k8s task applies: its definition as a mapping, a list, or a YAML string (a
    literal block keeps the file's lines)."""
    definition = nodes.get(params, "definition")
    if nodes.is_scalar(definition):
        first = nodes.text_line(definition)
        try:
            documents = compose_documents(SourceFile(doc.file, "\n" * (first - 1) + str(definition.value)))
        except ManifestError:
            return []
        objects = [d.root for d in documents]
    else:
        objects = nodes.items(definition) if nodes.is_seq(definition) else [definition]
    return [w for root in objects if nodes.is_map(root) for w in read(Document(doc.file, doc.index, root), source_text)]


def _shell_workloads(doc: Document, params: yaml.Node) -> list[Workload]:
    """The workloads of a shell / command task's script: `docker run`, `vllm serve`, and the manifests its
    here-documents pipe to `kubectl apply`, on the file's lines."""
    script_node = nodes.get(params, "cmd") if nodes.is_map(params) else params
    argv = nodes.get(params, "argv") if nodes.is_map(params) else None
    if nodes.is_seq(argv):
        import shlex

        script, first = " ".join(shlex.quote(nodes.text(w) or "") for w in nodes.items(argv)), nodes.line(argv) or 1
    elif nodes.is_scalar(script_node) and isinstance(script_node.value, str):
        script, first = script_node.value, nodes.text_line(script_node)
    else:
        return []
    found = script_workloads(script, first, doc.file, PurePosixPath(doc.file).name)
    return found + _heredoc_objects(doc, script, first)


def _heredoc_objects(doc: Document, script: str, first: int) -> list[Workload]:
    """The Kubernetes objects of a script's here-documents (`kubectl apply -f - <<EOF`)."""
    from kvdoctor.scan import kubernetes

    found: list[Workload] = []
    for body_line, body in heredoc_bodies(script):
        try:
            documents = compose_documents(SourceFile(doc.file, "\n" * (first + body_line - 2) + body))
        except ManifestError:
            continue
        found += [w for d in documents if kubernetes.is_kubernetes(d.root) for w in kubernetes.workloads(d, "")]
    return found
