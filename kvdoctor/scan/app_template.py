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
from kvdoctor.scan.chart_reader import ReadDocument
from kvdoctor.scan.documents import Document
from kvdoctor.scan.workload import Workload

CHART = "app-template"
KINDS = {"deployment": ("apps/v1", "Deployment"), "statefulset": ("apps/v1", "StatefulSet"),
         "daemonset": ("apps/v1", "DaemonSet"), "job": ("batch/v1", "Job"), "cronjob": ("batch/v1", "CronJob")}  # fmt: skip
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
    containers = [_container(identifier, spec) for identifier, _, spec in nodes.pairs(nodes.get(controller, "containers"))
                  if nodes.is_map(spec) and nodes.plain(nodes.get(spec, "enabled")) is not False]  # fmt: skip
    own = nodes.get(controller, "pod")
    pod = [(_str(key, at), value) for key in POD_KEYS
           if (value := nodes.get(own, key) if nodes.get(own, key) is not None else nodes.get(defaults, key)) is not None]
    pod.append((_str("containers", at), yaml.SequenceNode("tag:yaml.org,2002:seq", containers, at.start_mark, at.end_mark)))
    template = _map([(_str("spec", at), _map(pod, at))], at)
    spec = [(_str("template", at), template)]
    if (replicas := nodes.get(controller, "replicas")) is not None:
        spec.insert(0, (_str("replicas", at), replicas))
    metadata = _map([(_str("name", at), _str(name, at)), (_str("namespace", at), _str(namespace, at))], at)
    return _map([(_str("apiVersion", at), _str(kind[0], at)), (_str("kind", at), _str(kind[1], at)),
                 (_str("metadata", at), metadata), (_str("spec", at), _map(spec, at))], at)  # fmt: skip


def _container(identifier: str, spec: yaml.Node) -> yaml.MappingNode:
    pairs = [(_str("name", spec), _str(identifier, spec))]
    image = nodes.get(spec, "image")
    repository, tag = nodes.text(nodes.get(image, "repository")), nodes.text(nodes.get(image, "tag"))
    if repository:
        at = nodes.get(image, "repository")
        pairs.append((_str("image", at), _str(f"{repository}:{tag}" if tag else repository, at)))
    for key in CONTAINER_KEYS:
        value = nodes.get(spec, key)
        if value is None:
            continue
        if key in ("command", "args") and nodes.is_scalar(value):  # a string is the one word the chart renders
            value = yaml.SequenceNode("tag:yaml.org,2002:seq", [value], value.start_mark, value.end_mark)
        pairs.append((_str(key, spec), value))
    if (env := _env(nodes.get(spec, "env"))) is not None:
        pairs.append((_str("env", spec), env))
    return _map(pairs, spec)


def _env(env: yaml.Node | None) -> yaml.Node | None:
    """The chart's env map (NAME: value, NAME: {value: ...}, NAME: {valueFrom: ...}) as a container's env list."""
    if not nodes.is_map(env):
        return env if nodes.is_seq(env) else None
    items = []
    for name, key_node, value in nodes.pairs(env):
        entry = [(_str("name", key_node), _str(name, key_node))]
        if nodes.is_map(value):
            entry += [(_str(k, key_node), v) for k, _, v in nodes.pairs(value) if k in ("value", "valueFrom")]
        else:
            entry.append((_str("value", key_node), value))
        items.append(_map(entry, key_node))
    return yaml.SequenceNode("tag:yaml.org,2002:seq", items, env.start_mark, env.end_mark)


def _map(pairs: list, at: yaml.Node) -> yaml.MappingNode:
    return yaml.MappingNode("tag:yaml.org,2002:map", pairs, at.start_mark, at.end_mark)


def _str(text: str, at: yaml.Node) -> yaml.ScalarNode:
    return yaml.ScalarNode("tag:yaml.org,2002:str", text, at.start_mark, at.start_mark)
