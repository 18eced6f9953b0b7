"""Nomad job files (HCL, developer.hashicorp.com/nomad/docs/job-specification) -> vLLM workloads: each `task` of
each `group` of a `job`, read as a container. The docker / podman driver runs `config.entrypoint` (else the image's)
with `config.command` + `config.args` as the image's CMD (Nomad's drivers/docker/driver.go sets Cmd, never
Entrypoint, from them); exec / raw_exec run `command` + `args` themselves. The GPU count is the `count` of
`resources.device "nvidia/gpu"` (or "gpu", "nvidia/gpu/MODEL"; 1 when not given), the GPU its `${device.model}`
constraint or the device name's model; `env` values with `${...}` are Nomad's runtime interpolation, unknown here."""

from __future__ import annotations

import re
from dataclasses import replace

import yaml

from kvdoctor.scan import hcl, nodes
from kvdoctor.scan.image_entrypoints import names_vllm, unread_release, unseen_note
from kvdoctor.scan.kubernetes import container_workload
from kvdoctor.scan.workload import EnvVar, GpuSelector, Workload

CONTAINER_DRIVERS = {"docker", "podman", "containerd-driver", "nvidia-docker"}
PROCESS_DRIVERS = {"exec", "raw_exec", "exec2", "java"}
GPU_DEVICE = re.compile(r"^(?:nvidia/)?gpu(?:/(.+))?$")
MODEL_ATTRIBUTE = "${device.model}"
MODEL_SELECTOR = "nomad device nvidia/gpu ${device.model}"
"""The selector a task's GPU model constraint becomes (a name that says it names the GPU model)."""
EQUALS = {None, "=", "==", "is"}
INTERPOLATION = re.compile(r"\$\{[^}]*\}")


def is_nomad_job(root: yaml.Node) -> bool:
    return bool(hcl.blocks(root, "job"))


def workloads(root: yaml.Node, file: str) -> list[Workload]:
    found = []
    for job_labels, job in hcl.blocks(root, "job"):
        name = job_labels[0] if job_labels else "(unnamed)"
        for group_labels, group in hcl.blocks(job, "group"):
            for task_labels, task in hcl.blocks(group, "task"):
                workload = task_workload(task, task_labels[0] if task_labels else "(unnamed)", file, name)
                if workload is not None:
                    note = f"Nomad job {name}, group {group_labels[0] if group_labels else '(unnamed)'}"
                    found.append(replace(workload, notes=workload.notes + (note,)))
    return found


def unseen_notes(root: yaml.Node, file: str, read: list[Workload]) -> list[str]:
    """Notes for tasks that give no command and run an image named for vLLM (or of a release whose entrypoint
    kvdoctor did not read) and were not read as a workload."""
    seen = {(w.name, w.container) for w in read}
    notes = []
    for job_labels, job in hcl.blocks(root, "job"):
        name = job_labels[0] if job_labels else "(unnamed)"
        for _, group in hcl.blocks(job, "group"):
            for task_labels, task in hcl.blocks(group, "task"):
                task_name = task_labels[0] if task_labels else "(unnamed)"
                config = nodes.get(task, "config")
                image = nodes.text(nodes.get(config, "image"))
                own_command = nodes.get(config, "command") is not None or nodes.get(config, "entrypoint") is not None
                if (name, task_name) in seen or own_command or not (names_vllm(image) or unread_release(image)):
                    continue
                notes.append(unseen_note(f"{file}:{nodes.line(nodes.get(config, 'image'))}",
                                         f"Nomad job {name} (task {task_name})", image))  # fmt: skip
    return notes


def task_workload(task: yaml.Node, task_name: str, file: str, job: str) -> Workload | None:
    """The workload of one task when it runs vLLM, else None."""
    driver = nodes.text(nodes.get(task, "driver")) or ""
    config = nodes.get(task, "config")
    container = _container(task, task_name, driver, config)
    if container is None:
        return None
    workload = container_workload(container, "", file=file, line=nodes.line(task), platform="nomad", kind="Nomad task",
                                  name=job, selectors=())  # fmt: skip
    if workload is None:
        workload = _templated_script(task, container, file, job)
    if workload is None:
        return None
    count, count_line, selectors = _gpus(task)
    return replace(workload, env=tuple(_env(task)), gpu_limit=count, gpu_limit_line=count_line,
                   gpu_selectors=tuple(selectors),
                   notes=workload.notes + (f"Nomad {driver or 'docker'} driver: {DRIVER_NOTES.get(driver, '')}",))


DRIVER_NOTES = {
    "docker": "config.command and config.args are the image's CMD, after its entrypoint (config.entrypoint if given)",
    "podman": "config.command and config.args are the image's CMD, after its entrypoint (config.entrypoint if given)",
}


def _templated_script(task: yaml.Node, container: yaml.Node, file: str, job: str) -> Workload | None:
    """The workload of a task whose command runs a script its own `template` block writes (`entrypoint = ["/bin/bash",
    "/local/run.sh"]` with `template { destination = "local/run.sh" data = <<EOF ... EOF }`): that script, read on the
    file's lines, in the task's image."""
    from kvdoctor.scan.scripts import script_findings

    words = [nodes.text(w) or "" for key in ("command", "args") for w in nodes.items(nodes.get(container, key))]
    for _, template in hcl.blocks(task, "template"):
        destination = _task_path(nodes.text(nodes.get(template, "destination")) or "")
        data = nodes.get(template, "data")
        if not destination or not nodes.text(data) or not any(_task_path(w) == destination for w in words):
            continue
        heredoc = data.end_mark.line > data.start_mark.line  # its body starts on the line after `data = <<EOF`
        found, _ = script_findings(str(nodes.text(data)), nodes.line(data) + heredoc, file, job)
        if found:
            note = f"runs {destination}, which the task's template block writes: read as that script"
            return replace(found[0], platform="nomad", kind="Nomad task", name=job,
                           container=nodes.text(nodes.get(container, "name")) or found[0].container,
                           image=nodes.text(nodes.get(container, "image")) or found[0].image,
                           notes=found[0].notes + (note,))
    return None


def _task_path(path: str) -> str:
    """A path in the task's directory as one form: `local/run.sh`, `/local/run.sh`, `${NOMAD_TASK_DIR}/run.sh`."""
    path = path.replace("${NOMAD_TASK_DIR}", "local").replace("$NOMAD_TASK_DIR", "local").lstrip("./")
    return path if path.startswith(("local/", "secrets/", "alloc/")) else ""


def _container(task: yaml.Node, name: str, driver: str, config: yaml.Node | None) -> yaml.Node | None:
    """The task as a Kubernetes-shaped container node (name, image, command, args)."""
    if config is None:
        return None
    command, args = nodes.get(config, "command"), nodes.get(config, "args")
    words = ([command] if nodes.text(command) else []) + (nodes.items(args) if nodes.is_seq(args) else
                                                          [args] if nodes.text(args) else [])  # fmt: skip
    pairs: list[tuple[str, yaml.Node]] = [("name", _scalar(name, task))]
    if driver in PROCESS_DRIVERS:
        pairs.append(("command", _seq(words, task)))
    elif driver in CONTAINER_DRIVERS or nodes.get(config, "image") is not None:
        pairs.append(("image", nodes.get(config, "image") or _scalar("", task)))
        entrypoint = nodes.get(config, "entrypoint")
        if entrypoint is not None:
            pairs.append(("command", entrypoint if nodes.is_seq(entrypoint) else _seq([entrypoint], task)))
        if words:
            pairs.append(("args", _seq(words, task)))
    else:
        return None
    return yaml.MappingNode("tag:yaml.org,2002:map", [(_scalar(k, task), v) for k, v in pairs], task.start_mark,
                            task.end_mark)  # fmt: skip


def _env(task: yaml.Node) -> list[EnvVar]:
    env = []
    for key, _, value in nodes.pairs(nodes.get(task, "env")):
        text = nodes.text(value)
        if key == hcl.LABELS:
            continue
        if text is None or INTERPOLATION.search(text):
            why = f"Nomad's interpolation {text}" if text else "an expression"
            env.append(EnvVar(key, None, nodes.line(value), why))
        else:
            env.append(EnvVar(key, text, nodes.line(value)))
    return env


def _gpus(task: yaml.Node) -> tuple[int | None, int | None, list[GpuSelector]]:
    """(GPU count, its line, the GPU model selectors) of the task's `resources.device` blocks for NVIDIA GPUs."""
    count, line, selectors = None, None, []
    for labels, device in hcl.blocks(nodes.get(task, "resources"), "device"):
        found = GPU_DEVICE.match(labels[0] if labels else "")
        if found is None:
            continue
        number = nodes.get(device, "count")
        value = nodes.text(number)
        count = (count or 0) + (int(value) if value is not None and value.isdigit() else 1)
        line = line or nodes.line(number) or nodes.line(device)
        if found.group(1):
            selectors.append(GpuSelector(MODEL_SELECTOR, (found.group(1),), nodes.line(device)))
        for _, constraint in hcl.blocks(device, "constraint"):
            attribute = nodes.text(nodes.get(constraint, "attribute"))
            operator = nodes.text(nodes.get(constraint, "operator"))
            model = nodes.get(constraint, "value")
            if attribute == MODEL_ATTRIBUTE and operator in EQUALS and nodes.text(model):
                selectors.append(GpuSelector(MODEL_SELECTOR, (str(nodes.text(model)),), nodes.line(model)))
    return count, line, selectors


_scalar = nodes.str_node


def _seq(items: list[yaml.Node], at: yaml.Node) -> yaml.SequenceNode:
    return yaml.SequenceNode("tag:yaml.org,2002:seq", items, items[0].start_mark if items else at.start_mark,
                             items[-1].end_mark if items else at.start_mark)  # fmt: skip
