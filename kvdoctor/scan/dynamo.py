"""NVIDIA Dynamo's DynamoGraphDeployment -> vLLM workloads: each service's `extraPodSpec.mainContainer` that runs
vLLM (`python3 -m dynamo.vllm ...`), named by its service; the service's `resources.limits.gpu` is its GPU count."""

from __future__ import annotations

import re
from dataclasses import replace

import yaml

from kvdoctor.scan import nodes
from kvdoctor.scan.documents import Document
from kvdoctor.scan.kubernetes import container_workload, pod_gpu_selectors
from kvdoctor.scan.workload import Workload

KIND = "DynamoGraphDeployment"
SDK_SERVE = re.compile(r"\bdynamo\s+serve\s+(\S+)")
"""Dynamo's earlier SDK (0.1-0.3): `dynamo serve graphs.disagg:Frontend` runs a graph whose vLLM arguments are in
DYN_DEPLOYMENT_CONFIG or a config file, not in the command."""


def is_dynamo_graph(root: yaml.Node) -> bool:
    return nodes.text(nodes.get(root, "kind")) == KIND and nodes.is_map(nodes.get(root, "spec", "services"))


def workloads(doc: Document, source_text: str) -> list[Workload]:
    name = nodes.text(nodes.get(doc.root, "metadata", "name")) or "(unnamed)"
    namespace = nodes.text(nodes.get(doc.root, "metadata", "namespace"))
    found: list[Workload] = []
    for service, _, spec in nodes.pairs(nodes.get(doc.root, "spec", "services")):
        container = nodes.get(spec, "extraPodSpec", "mainContainer")
        if container is None:
            continue
        workload = container_workload(
            container, source_text, file=doc.file, line=nodes.line(doc.root), platform="kubernetes", kind=KIND,
            name=name, namespace=namespace, selectors=pod_gpu_selectors(nodes.get(spec, "extraPodSpec")),
        )  # fmt: skip
        if workload is None:
            continue
        gpus, gpus_line = _service_gpus(spec)
        secret = nodes.text(nodes.get(spec, "envFromSecret"))
        found.append(replace(
            workload, container=service, gpu_limit=gpus if gpus is not None else workload.gpu_limit,
            gpu_limit_line=gpus_line if gpus is not None else workload.gpu_limit_line,
            env_from=workload.env_from + ((f"Secret {secret} (envFromSecret)",) if secret else ()),
            notes=workload.notes + (f"Dynamo service {service}: its extraPodSpec.mainContainer",),
        ))  # fmt: skip
    return found


def _service_gpus(spec: yaml.Node) -> tuple[int | None, int | None]:
    """The service's `resources.limits.gpu` (else requests), the GPUs the operator gives its pod."""
    for section in ("limits", "requests"):
        value = nodes.get(spec, "resources", section, "gpu")
        text = nodes.text(value)
        if text is not None and str(text).isdigit():
            return int(str(text)), nodes.line(value)
    return None, None


def sdk_note(root: yaml.Node, where: str) -> str | None:
    """A note for a graph whose services run Dynamo's SDK (`dynamo serve GRAPH`) rather than `python -m dynamo.vllm`."""
    if not is_dynamo_graph(root):
        return None
    graph = next((m.group(1) for text in nodes.scalars(root) if (m := SDK_SERVE.search(text))), None)
    if graph is None:
        return None
    return (f"{where}: {KIND} {nodes.text(nodes.get(root, 'metadata', 'name')) or ''}: its services run Dynamo's SDK "
            f"(`dynamo serve {graph}`), whose vLLM arguments come from DYN_DEPLOYMENT_CONFIG or a config file, not "
            "the command: not checked")  # fmt: skip
