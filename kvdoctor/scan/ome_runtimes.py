"""OME's serving runtimes (ome.io ClusterServingRuntime / ServingRuntime, sgl-project/ome): the pod OME creates for a
model runs `spec.engineConfig.runner` (and `spec.decoderConfig.runner` when prefill and decode are split), a container
spec with the image, command, args, env and resources; each runner is read as that pod's container. OME fills
`$(MODEL_PATH)` with the model's mount, so the model stays unknown here."""

from __future__ import annotations

from dataclasses import replace

import yaml

from kvdoctor.scan import kubernetes, nodes
from kvdoctor.scan.documents import Document
from kvdoctor.scan.workload import Workload

API_GROUP = "ome.io/"
KINDS = ("ClusterServingRuntime", "ServingRuntime")
RUNNERS = ("engineConfig", "decoderConfig")


def is_ome_runtime(root: yaml.Node) -> bool:
    return nodes.text(nodes.get(root, "kind")) in KINDS \
        and (nodes.text(nodes.get(root, "apiVersion")) or "").startswith(API_GROUP)  # fmt: skip


def workloads(doc: Document, source_text: str) -> list[Workload]:
    root = doc.root
    kind = nodes.text(nodes.get(root, "kind")) or KINDS[0]
    found: list[Workload] = []
    for component in RUNNERS:
        runner = nodes.get(root, "spec", component, "runner")
        if not nodes.is_map(runner) or nodes.get(runner, "image") is None:
            continue
        pod = nodes.map_node([
            (nodes.str_node("apiVersion", root), nodes.str_node("v1", root)),
            (nodes.str_node("kind", root), nodes.str_node("Pod", root)),
            (nodes.str_node("metadata", root), nodes.get(root, "metadata") or nodes.map_node([], root)),
            (nodes.str_node("spec", runner), nodes.map_node([
                (nodes.str_node("containers", runner),
                 yaml.SequenceNode("tag:yaml.org,2002:seq", [runner], runner.start_mark, runner.end_mark)),
            ], runner)),
        ], root)  # fmt: skip
        note = (f"OME {kind}: spec.{component}.runner read as the container of the pod OME creates for a model; "
                "$(MODEL_PATH) is the model's mount, filled by OME")
        found += [replace(w, kind=kind, notes=w.notes + (note,))
                  for w in kubernetes.workloads(Document(doc.file, doc.index, pod, doc.line_files), source_text)]
    return found
