"""KubeRay's RayJob: its pods as any Ray cluster's, plus `spec.entrypoint`, the shell command KubeRay submits to the
cluster (`vllm serve facebook/opt-13b --tensor-parallel-size 2 --distributed-executor-backend ray`), run with the
head group's image and env."""

from __future__ import annotations

import yaml

from kvdoctor.scan import kubernetes, nodes, ray_cluster_gpus
from kvdoctor.scan.command import expand_words, run_script
from kvdoctor.scan.documents import Document
from kvdoctor.scan.workload import Workload

ENTRYPOINT_NOTE = ("RayJob: spec.entrypoint, submitted to the Ray cluster (the head group's image and env); vLLM's "
                   "workers span the cluster's pods, so only the cluster's most GPUs are compared with -tp x -pp (a shortfall)")  # fmt: skip


def is_ray_job(root: yaml.Node) -> bool:
    return kubernetes.is_kubernetes(root) and nodes.text(nodes.get(root, "kind")) == "RayJob" \
        and str(nodes.text(nodes.get(root, "apiVersion")) or "").startswith("ray.io/")


def workloads(doc: Document, source_text: str) -> list[Workload]:
    found = kubernetes.workloads(doc, source_text)
    entrypoint = nodes.get(doc.root, "spec", "entrypoint")
    argv = run_script(entrypoint, source_text)
    if argv is None:
        return found
    head = nodes.get(doc.root, "spec", "rayClusterSpec", "headGroupSpec", "template", "spec")
    containers = nodes.items(nodes.get(head, "containers"))
    container = containers[0] if containers else None
    env, env_from = kubernetes.container_env(container) if container is not None else ([], [])
    image_node = nodes.get(container, "image")
    argv = expand_words(argv, {e.name: e.value for e in env if e.value is not None})
    return found + [Workload(
        file=doc.file, line=nodes.line(doc.root), platform="kubernetes", kind="RayJob",
        name=nodes.text(nodes.get(doc.root, "metadata", "name")) or "(unnamed)",
        namespace=nodes.text(nodes.get(doc.root, "metadata", "namespace")), container="entrypoint",
        image=nodes.text(image_node), image_line=nodes.line(image_node), argv=tuple(argv),
        command_line=argv[0].line if argv else nodes.line(entrypoint), env=tuple(env), env_from=tuple(env_from),
        gpu_selectors=kubernetes.pod_gpu_selectors(head) if head is not None else (), notes=(ENTRYPOINT_NOTE,), cluster_gpus=ray_cluster_gpus.cluster_gpus(doc.root),
    )]  # fmt: skip
