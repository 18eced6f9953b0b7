"""bjw-s app-template (the homelab chart most Flux and Argo CD repositories run their apps with) installed from its
Helm repository, not in the tree: its values are the pods, so each controller's containers are read as the
Deployment (StatefulSet, DaemonSet) the chart renders. From bjw-s common 3.x/4.x (charts/library/common): a
controller is named by the release (`names.fullname`), suffixed `-IDENTIFIER` when more than one controller is
enabled (or `-nameOverride`; `forceRename` wins); each container by its identifier; `image.repository:tag`,
`command` / `args` (a string or a list), `env` (a map of values, `{value: ...}`, or a list), `resources`, and the
pod options of `defaultPodOptions` under the controller's own `pod`."""

from __future__ import annotations

import yaml

from kvdoctor.scan import nodes
from kvdoctor.scan.documents import Document, ReadDocument
from kvdoctor.scan.workload import Workload

CHART = "app-template"
KINDS = {"deployment": ("apps/v1", "Deployment"), "statefulset": ("apps/v1", "StatefulSet"),
         "daemonset": ("apps/v1", "DaemonSet"), "job": ("batch/v1", "Job"),
         "cronjob": ("batch/v1", "CronJob")}  # fmt: skip
POD_KEYS = ("nodeSelector", "affinity", "tolerations", "runtimeClassName", "hostIPC", "volumes")
CONTAINER_KEYS = ("command", "args", "resources", "workingDir", "securityContext", "volumeMounts")


def is_app_template(chart: str | None) -> bool:
    """A chart reference that names app-template (`app-template`, `bjw-s/app-template`, an OCI reference)."""
    return bool(chart) and chart.rstrip("/").rsplit("/", 1)[-1].split(":")[0] == CHART


def workloads(values: yaml.Node, release: str, namespace: str, doc: Document, text: str,
              read_document: ReadDocument) -> list[Workload]:  # fmt: skip
    """The vLLM workloads of the controllers the values define."""
    controllers = [(name, c) for name, _, c in nodes.pairs(nodes.get(values, "controllers"))
                   if nodes.is_map(c) and nodes.plain(nodes.get(c, "enabled")) is not False]  # fmt: skip
    defaults = nodes.get(values, "defaultPodOptions")
    found: list[Workload] = []
    for identifier, controller in controllers:
        name = _controller_name(release, identifier, controller, len(controllers))
        kind = KINDS.get((nodes.text(nodes.get(controller, "type")) or "deployment").lower())
        if kind is None:
            continue
        obj = _object(kind, name, namespace, controller, defaults)
        found += read_document(Document(doc.file, doc.index, obj), text)
    return found


def _controller_name(release: str, identifier: str, controller: yaml.Node, count: int) -> str:
    if (forced := nodes.text(nodes.get(controller, "forceRename"))) and "{{" not in forced:
        return forced
    if (override := nodes.text(nodes.get(controller, "nameOverride"))) and override != release:
        return f"{release}-{override}"
    return f"{release}-{identifier}" if count > 1 and identifier != release else release


def _object(kind: tuple[str, str], name: str, namespace: str, controller: yaml.Node,
            defaults: yaml.Node | None) -> yaml.MappingNode:  # fmt: skip
    at = controller
    containers = [_container(identifier, spec) for identifier, _, spec in nodes.pairs(nodes.get(at, "containers"))
                  if nodes.is_map(spec) and nodes.plain(nodes.get(spec, "enabled")) is not False]  # fmt: skip
    own = nodes.get(controller, "pod")  # the controller's pod options over defaultPodOptions, key by key
    pod = {key: value for key in POD_KEYS if (value := _first(nodes.get(own, key), nodes.get(defaults, key)))}
    pod["containers"] = yaml.SequenceNode("tag:yaml.org,2002:seq", containers, at.start_mark, at.end_mark)
    spec = {"replicas": nodes.get(controller, "replicas")} if nodes.get(controller, "replicas") is not None else {}
    spec["template"] = _keyed({"spec": _keyed(pod, at)}, at)
    metadata = _keyed({"name": nodes.str_node(name, at), "namespace": nodes.str_node(namespace, at)}, at)
    return _keyed({"apiVersion": nodes.str_node(kind[0], at), "kind": nodes.str_node(kind[1], at),
                   "metadata": metadata, "spec": _keyed(spec, at)}, at)  # fmt: skip


def _container(identifier: str, spec: yaml.Node) -> yaml.MappingNode:
    fields: dict[str, yaml.Node] = {"name": nodes.str_node(identifier, spec)}
    image = nodes.get(spec, "image")
    repository, tag = nodes.text(nodes.get(image, "repository")), nodes.text(nodes.get(image, "tag"))
    if repository:
        fields["image"] = nodes.str_node(f"{repository}:{tag}" if tag else repository, nodes.get(image, "repository"))
    for key in CONTAINER_KEYS:
        value = nodes.get(spec, key)
        if value is None:
            continue
        if key in ("command", "args") and nodes.is_scalar(value):  # a string is the one word the chart renders
            value = yaml.SequenceNode("tag:yaml.org,2002:seq", [value], value.start_mark, value.end_mark)
        fields[key] = value
    if (env := _env(nodes.get(spec, "env"))) is not None:
        fields["env"] = env
    return _keyed(fields, spec)


def _env(env: yaml.Node | None) -> yaml.Node | None:
    """The chart's env map (NAME: value, NAME: {value: ...}, NAME: {valueFrom: ...}) as a container's env list."""
    if not nodes.is_map(env):
        return env if nodes.is_seq(env) else None
    items = []
    for name, key_node, value in nodes.pairs(env):
        entry = {"name": nodes.str_node(name, key_node)}
        if nodes.is_map(value):
            entry |= {k: v for k, _, v in nodes.pairs(value) if k in ("value", "valueFrom")}
        else:
            entry["value"] = value
        items.append(_keyed(entry, key_node))
    return yaml.SequenceNode("tag:yaml.org,2002:seq", items, env.start_mark, env.end_mark)


def _first(*found: yaml.Node | None) -> yaml.Node | None:
    return next((node for node in found if node is not None), None)


def _keyed(fields: dict[str, yaml.Node], at: yaml.Node) -> yaml.MappingNode:
    """A mapping node of string keys placed where ``at`` is."""
    return nodes.map_node([(nodes.str_node(key, at), value) for key, value in fields.items()], at)
