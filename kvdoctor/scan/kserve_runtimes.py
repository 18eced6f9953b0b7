"""KServe InferenceServices whose container is not under spec.predictor.containers: a `spec.predictor.model` that runs
on a ServingRuntime of the scanned files (the predictor pod KServe's controller builds from both), KFServing v1alpha2's
`spec.default.predictor.custom.container`, and a `spec.predictor.container` that KServe's v1beta1 API does not have.

KServe builds the model's pod (pkg/controller/v1beta1/inferenceservice/components/predictor.go with
utils.MergeRuntimeContainers): the runtime's kserve-container strategic-merged with the container fields of
`predictor.model`, the runtime's args followed by the model's; `{{.Name}}` in the runtime's args is the
InferenceService's name; the runtime is the one `predictor.model.runtime` names, else the one runtime whose
supportedModelFormats lists the model format with autoSelect."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import yaml

from kvdoctor.scan import kubernetes, nodes
from kvdoctor.scan.documents import Document
from kvdoctor.scan.kustomize_patches import copied, scalar, set_key, strategic_merge
from kvdoctor.scan.marks import marked, placed_document
from kvdoctor.scan.workload import Workload

KSERVE_API = "serving.kserve.io/"
KFSERVING_V1ALPHA2 = "serving.kubeflow.org/v1alpha2"
RUNTIME_KINDS = ("ServingRuntime", "ClusterServingRuntime")
RUNTIME_CONTAINER = "kserve-container"
MODEL_FIELDS = ("modelFormat", "runtime", "runtimeVersion", "storageUri", "storage", "protocolVersion")
"""Fields of predictor.model that are KServe's own, not the container's (the CRD's ModelSpec embeds a Container)."""
POD_FIELDS = ("nodeSelector", "tolerations", "affinity", "runtimeClassName")
NAME_PLACEHOLDER = "{{.Name}}"
SINGULAR_NOT_RUN = ("spec.predictor.container is not a field of KServe's InferenceService (its predictor has `containers`, "
                    "a list, or `model`; no KServe or KFServing version had it): kubectl apply's strict validation "
                    "refuses it and the API server otherwise drops it, so KServe never runs this container; checked as "
                    "if written as spec.predictor.containers: [...]")


@dataclass(frozen=True)
class Runtime:
    kind: str
    name: str
    namespace: str | None
    root: yaml.Node
    """Marked with its file (marks.marked)."""
    auto_formats: tuple[str, ...]
    """Model formats it serves with autoSelect: true."""


def runtimes_of(doc: Document, text: str) -> list[Runtime]:
    """The document as a ServingRuntime / ClusterServingRuntime a model predictor may run on (none otherwise)."""
    root = doc.root
    kind = nodes.text(nodes.get(root, "kind"))
    if kind not in RUNTIME_KINDS or not (nodes.text(nodes.get(root, "apiVersion")) or "").startswith(KSERVE_API):
        return []
    name = nodes.text(nodes.get(root, "metadata", "name"))
    formats = tuple(nodes.text(nodes.get(f, "name")) or "" for f in nodes.items(nodes.get(root, "spec", "supportedModelFormats"))
                    if nodes.text(nodes.get(f, "autoSelect")) in ("true", "True"))  # fmt: skip
    namespace = nodes.text(nodes.get(root, "metadata", "namespace"))
    return [Runtime(kind, name, namespace, marked(root, doc.file, text), formats)] if name else []


def runs_on_a_runtime(root: yaml.Node) -> bool:
    """An InferenceService whose predictor is a `model` (its container comes from a serving runtime)."""
    return (nodes.text(nodes.get(root, "kind")) == "InferenceService"
            and (nodes.text(nodes.get(root, "apiVersion")) or "").startswith(KSERVE_API)
            and nodes.is_map(nodes.get(root, "spec", "predictor", "model")))  # fmt: skip


def model_workloads(doc: Document, text: str, runtimes: list[Runtime],
                    read: Callable[[Document, str], list[Workload]]) -> list[Workload]:  # fmt: skip
    """The workloads of the predictor pod KServe builds from the InferenceService and its runtime, placed on both
    files' lines; none when its runtime is not in the scanned files."""
    root = marked(doc.root, doc.file, text)
    model = nodes.get(root, "spec", "predictor", "model")
    runtime = runtime_for(model, nodes.text(nodes.get(root, "metadata", "namespace")), runtimes)
    containers = nodes.items(nodes.get(runtime.root, "spec", "containers")) if runtime else []
    if not containers:
        return []
    base = next((c for c in containers if nodes.text(nodes.get(c, "name")) == RUNTIME_CONTAINER), containers[0])
    pod = predictor_pod(root, model, base, runtime)
    placed = placed_document(pod)
    where = f"{runtime.root.start_mark.name}:{nodes.line(runtime.root)}"
    note = (f"spec.predictor.model runs on {runtime.kind} {runtime.name} ({where}): read as the pod KServe builds from "
            "both (the runtime's container, the model's fields over it, its args after the runtime's)")  # fmt: skip
    if (uri := nodes.text(nodes.get(model, "storageUri"))) is not None:
        note += f"; the model files are spec.predictor.model.storageUri {uri}, mounted at /mnt/models"
    return [replace(w, line_files=placed.line_files, notes=w.notes + (note,)) for w in read(placed, text)]


def used_runtime(root: yaml.Node, runtimes: list[Runtime]) -> tuple[str, str, str] | None:
    """(kind, name, file) of the scanned runtime the InferenceService's predictor model runs on, or None."""
    model = nodes.get(root, "spec", "predictor", "model")
    runtime = runtime_for(model, nodes.text(nodes.get(root, "metadata", "namespace")), runtimes) if model else None
    return (runtime.kind, runtime.name, runtime.root.start_mark.name) if runtime is not None else None


def runtime_for(model: yaml.Node, namespace: str | None, runtimes: list[Runtime]) -> Runtime | None:
    wanted = nodes.text(nodes.get(model, "runtime"))
    if wanted is not None:
        named = [r for r in runtimes if r.name == wanted and (r.kind == "ClusterServingRuntime" or r.namespace is None
                                                            or namespace is None or r.namespace == namespace)]  # fmt: skip
        return min(named, key=lambda r: r.kind != "ServingRuntime") if named else None
    fmt = nodes.text(nodes.get(model, "modelFormat", "name"))
    serving = [r for r in runtimes if fmt is not None and fmt in r.auto_formats]
    return serving[0] if len(serving) == 1 else None


def predictor_pod(isvc: yaml.Node, model: yaml.Node, base: yaml.Node, runtime: Runtime) -> yaml.Node:
    """The InferenceService with its predictor's containers the merged container, and the runtime's pod fields where
    the predictor sets none."""
    name = nodes.text(nodes.get(isvc, "metadata", "name")) or ""
    own = yaml.MappingNode(model.tag, [(k, v) for k, v in model.value if nodes.text(k) not in MODEL_FIELDS],
                           model.start_mark, model.end_mark)  # fmt: skip
    container = strategic_merge(copied(base), copied(own), None)
    runtime_args, model_args = nodes.items(nodes.get(base, "args")), nodes.items(nodes.get(own, "args"))
    if runtime_args and model_args:  # KServe appends the model's args to the runtime's (strategic merge would replace)
        set_key(container, "args", yaml.SequenceNode("tag:yaml.org,2002:seq", [copied(a) for a in runtime_args + model_args],
                                                     base.start_mark, base.end_mark))  # fmt: skip
    for arg in nodes.items(nodes.get(container, "args")):
        if nodes.is_scalar(arg) and NAME_PLACEHOLDER in arg.value:
            arg.value = arg.value.replace(NAME_PLACEHOLDER, name)
    _named(container, nodes.text(nodes.get(base, "name")) or RUNTIME_CONTAINER)  # an empty name is the runtime's
    pod = copied(isvc)
    predictor = nodes.get(pod, "spec", "predictor")
    predictor.value = [(k, v) for k, v in predictor.value if nodes.text(k) != "model"]
    set_key(predictor, "containers", yaml.SequenceNode("tag:yaml.org,2002:seq", [container], model.start_mark, model.end_mark))
    for field in POD_FIELDS:
        if nodes.get(predictor, field) is None and (value := nodes.get(runtime.root, "spec", field)) is not None:
            set_key(predictor, field, copied(value))
    return pod


def _named(container: yaml.Node, name: str = RUNTIME_CONTAINER) -> yaml.Node:
    """The container named as KServe names it when the manifest names none (or ""): kserve-container, or the runtime's."""
    if not nodes.text(nodes.get(container, "name")):
        set_key(container, "name", scalar(name, container))
    return container


def has_lone_container(root: yaml.Node) -> bool:
    """An InferenceService whose container is a single mapping: KFServing v1alpha2's custom predictor, or a v1beta1
    spec.predictor.container (no such field)."""
    return nodes.text(nodes.get(root, "kind")) == "InferenceService" and bool(_lone_containers(root))


def lone_container_workloads(doc: Document, source_text: str) -> list[Workload]:
    """v1alpha2's `spec.default|canary.predictor.custom.container` read as the predictor's container; a v1beta1
    `spec.predictor.container` read too, as the pod it was meant to be, never a PASS: KServe has no such field."""
    found: list[Workload] = []
    for path, container in _lone_containers(doc.root):
        pod = copied(doc.root)
        holder = nodes.get(pod, *path[:-1])
        holder.value = [(k, v) for k, v in holder.value if nodes.text(k) != path[-1]]
        set_key(holder, "containers", yaml.SequenceNode("tag:yaml.org,2002:seq", [_named(copied(container))],
                                                       container.start_mark, container.end_mark))  # fmt: skip
        spec = nodes.get(pod, "spec")
        spec.value = [(k, v) for k, v in spec.value if nodes.text(k) != "predictor"]
        set_key(spec, "predictor", holder)
        workloads = kubernetes.workloads(Document(doc.file, doc.index, pod, doc.line_files), source_text)
        if path[0] == "spec" and path[1] == "predictor":
            line = next(nodes.line(key) for name, key, _ in nodes.pairs(nodes.get(doc.root, "spec", "predictor"))
                        if name == "container")  # fmt: skip
            why = f"{doc.file}:{line}: {SINGULAR_NOT_RUN}"
            workloads = [replace(w, undecided=w.undecided + (why,)) for w in workloads]
        found += workloads
    return found


def _lone_containers(root: yaml.Node) -> list[tuple[tuple[str, ...], yaml.Node]]:
    api = nodes.text(nodes.get(root, "apiVersion")) or ""
    if api.startswith(KFSERVING_V1ALPHA2):
        paths = [("spec", end, "predictor", "custom", "container") for end in ("default", "canary")]
    elif api.startswith(KSERVE_API) and nodes.get(root, "spec", "predictor", "containers") is None:
        paths = [("spec", "predictor", "container")]
    else:
        return []
    return [(path, node) for path in paths if nodes.is_map(node := nodes.get(root, *path))]
