"""The most GPUs a KubeRay cluster can have (RayCluster's spec, RayService's spec.rayClusterConfig, RayJob's
spec.rayClusterSpec): the head pod's plus each worker group's per pod x its pods. Ray places vLLM's workers anywhere
in the cluster, so one engine's tensor x pipeline parallel size is compared with this ceiling only: a cluster with
fewer GPUs than one engine needs cannot place it; any other count says nothing about one engine.

Per KubeRay's RayCluster API (ray-operator/apis/ray/v1/raycluster_types.go): a worker group runs `replicas` pods, up to
`maxReplicas` when `enableInTreeAutoscaling` is true, each replica `numOfHosts` pods (default 1); a pod's Ray GPUs are
its containers' nvidia.com/gpu (MIG slices, amd.com/gpu too), or rayStartParams num-gpus when set (the larger of the two is taken: a ceiling)."""

from __future__ import annotations

import re

import yaml

from kvdoctor.scan import nodes

GPU_RESOURCE = re.compile(r"^(?:nvidia\.com/(?:gpu|mig-[\w.-]+)|amd\.com/gpu)$")
"""Devices Ray counts as GPUs (a MIG slice is one too): all counted, since the total is a ceiling."""
CLUSTER_SPEC_PATHS = {"RayCluster": ("spec",), "RayService": ("spec", "rayClusterConfig"),
                      "RayJob": ("spec", "rayClusterSpec")}  # fmt: skip


def cluster_gpus(root: yaml.Node) -> tuple[int, str] | None:
    """(the cluster's most GPUs, how they add up) for a KubeRay object; None when it is none or a count is not
    written as a number here (a template value, an autoscaled group without maxReplicas, no replicas)."""
    path = CLUSTER_SPEC_PATHS.get(nodes.text(nodes.get(root, "kind")) or "")
    spec = nodes.get(root, *path) if path else None
    if not nodes.is_map(spec):
        return None
    head = _pod_gpus(nodes.get(spec, "headGroupSpec"))
    if head is None:
        return None
    autoscaled = nodes.plain(nodes.get(spec, "enableInTreeAutoscaling")) is True
    count_field = "maxReplicas" if autoscaled else "replicas"
    total, parts = head, [f"head {head}"]
    for group in nodes.items(nodes.get(spec, "workerGroupSpecs")):
        per_pod, replicas = _pod_gpus(group), _number(nodes.get(group, count_field))
        hosts = _number(nodes.get(group, "numOfHosts")) if nodes.get(group, "numOfHosts") is not None else 1
        if per_pod is None or replicas is None or hosts is None:
            return None
        total += per_pod * replicas * hosts
        name = nodes.text(nodes.get(group, "groupName")) or "workers"
        parts.append(f"{name} {per_pod} x {count_field} {replicas}" + (f" x numOfHosts {hosts}" if hosts != 1 else ""))
    return total, f"across the Ray cluster at most ({' + '.join(parts)})"


def _pod_gpus(group: yaml.Node | None) -> int | None:
    """A group's GPUs per pod: its containers' nvidia.com/gpu limits (else requests), or rayStartParams num-gpus
    if larger; None when one is not a number."""
    declared = 0
    for container in nodes.items(nodes.get(group, "template", "spec", "containers")):
        resources = nodes.get(container, "resources")
        section = nodes.get(resources, "limits") if _has_gpu(nodes.get(resources, "limits")) else nodes.get(resources, "requests")
        for key, _, value in nodes.pairs(section):
            if GPU_RESOURCE.match(key):
                count = _number(value)
                if count is None:
                    return None
                declared += count
    started = nodes.get(group, "rayStartParams", "num-gpus")
    if started is None:
        return declared
    ray_gpus = _number(started)
    return None if ray_gpus is None else max(declared, ray_gpus)


def _has_gpu(section: yaml.Node | None) -> bool:
    return any(GPU_RESOURCE.match(key) for key, _, _ in nodes.pairs(section))


def _number(node: yaml.Node | None) -> int | None:
    text = (nodes.text(node) or "").strip("'\"")
    return int(text) if text.isdigit() else None
