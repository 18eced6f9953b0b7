"""Terraform resources that deploy vLLM -> the Kubernetes objects (or job files) they create, read by the readers
for those. The Kubernetes provider's `kubernetes_deployment` (and `_v1`, StatefulSet, DaemonSet, Job, CronJob, Pod)
blocks are the object in snake_case blocks (registry.terraform.io/providers/hashicorp/kubernetes, "Nested
Blocks"): `container` blocks are `containers`, `env { name value }` entries, `node_selector` is `nodeSelector`.
`kubernetes_manifest.manifest` is the object itself; `kubectl_manifest.yaml_body` and a `nomad_job.jobspec` heredoc
are the YAML or job file they hold. Google's `google_cloud_run_service` / `google_cloud_run_v2_service` are Cloud Run
services (a Knative Service). The Docker provider's `docker_container` is the Compose service that runs the same
container. A `helm_release` of a chart in the tree is rendered (terraform_helm.py); one of a chart elsewhere that
names vLLM is named in the notes."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import yaml

from kvdoctor.scan import hcl, nodes, nomad, terraform_helm, terraform_templates
from kvdoctor.scan.cloud_run import ACCELERATOR_LABEL
from kvdoctor.scan.documents import Document
from kvdoctor.scan.workload import Workload

KUBERNETES_KINDS = {
    "kubernetes_deployment": ("apps/v1", "Deployment"), "kubernetes_stateful_set": ("apps/v1", "StatefulSet"),
    "kubernetes_daemonset": ("apps/v1", "DaemonSet"), "kubernetes_daemon_set": ("apps/v1", "DaemonSet"),
    "kubernetes_job": ("batch/v1", "Job"), "kubernetes_cron_job": ("batch/v1", "CronJob"),
    "kubernetes_pod": ("v1", "Pod"), "kubernetes_replication_controller": ("v1", "ReplicationController"),
}  # fmt: skip
"""The provider's resource type (without `_v1` / `_v2`) -> the object's apiVersion and kind."""
LIST_BLOCKS = {
    "container": "containers", "containers": "containers", "init_container": "initContainers", "env": "env",
    "env_from": "envFrom", "port": "ports", "ports": "ports", "volume": "volumes", "volume_mount": "volumeMounts",
    "volume_mounts": "volumeMounts", "toleration": "tolerations", "node_selector_term": "nodeSelectorTerms",
    "match_expressions": "matchExpressions", "image_pull_secrets": "imagePullSecrets", "host_aliases": "hostAliases",
    "topology_spread_constraint": "topologySpreadConstraints",
    "preferred_during_scheduling_ignored_during_execution": "preferredDuringSchedulingIgnoredDuringExecution",
}  # fmt: skip
"""Nested block types that repeat: each block one entry of the object's list of that name."""
VERSION_SUFFIX = re.compile(r"_v[0-9]+$")
CLOUD_RUN = {"google_cloud_run_service", "google_cloud_run_v2_service"}


def is_terraform(root: yaml.Node) -> bool:
    return bool(hcl.blocks(root, "resource"))


def documents(root: yaml.Node, file: str, defaults: dict[str, str],
              given: set[str] = frozenset()) -> list[tuple[Document, str | None]]:  # fmt: skip
    """The objects the resources create, each with the note naming the Terraform defaults filled into it (None when
    none were): `${var.x}` / `${local.x}` take their value in ``defaults`` (module_defaults: a module call's value,
    else the literal default of the module's `variable` / `locals`, what runs unless a .tfvars or -var overrides it);
    ``given``: the names a module call set, which its own note names."""
    found: list[tuple[Document, str | None]] = []
    for labels, body in hcl.blocks(root, "resource"):
        resource, name = (labels + ["", ""])[:2]
        note = fill_defaults(body, defaults, given)
        found += [(doc, note) for doc in _objects(resource, name, body, file)]
    return found


def module_defaults(root: yaml.Node, file: str, given: dict[str, str] | None = None) -> dict[str, str]:
    """`var.NAME` / `local.NAME` -> the literal defaults of the file's module (its sibling .tf files and itself), or
    the value a module call ``given`` the variable; a local built from others (`deployment_name =
    "vllm-${var.name_prefix}"`) with the ones known put in."""
    found = _module_defaults(file) | _defaults(root) | (given or {})
    for _ in range(MAX_PASSES):
        resolved = {name: REFERENCE.sub(lambda m: found.get(m.group(1), m.group(0)) if m.group(1) != name
                                        else m.group(0), value) for name, value in found.items()}  # fmt: skip
        if resolved == found:
            break
        found = resolved
    return found


def fill_defaults(body: yaml.Node, defaults: dict[str, str], given: set[str] = frozenset()) -> str | None:
    """Each `${var.x}` / `${local.x}` in the block's strings replaced by its value, in place; the note naming the
    defaults used (not the ``given`` values of a module call, which its own note names), None when none was."""
    used = _substitute(body, defaults) - given
    return DEFAULTS_NOTE.format(", ".join(sorted(used))) if used else None


def nomad_workloads(root: yaml.Node, file: str, defaults: dict[str, str]) -> list[Workload]:
    """The workloads of the job files `nomad_job` resources hold in a heredoc or render with templatefile() (with the
    module's values, module_defaults)."""
    found = []
    for labels, body in hcl.blocks(root, "resource"):
        if labels[:1] == ["nomad_job"] and nodes.text(spec := nodes.get(body, "jobspec")):
            rendered = _templatefile_nomad(str(nodes.text(spec)), file, defaults, nodes.line(spec))
            found += rendered if rendered is not None else _heredoc_nomad(spec, file)
    return found




def _templatefile_nomad(spec: str, file: str, defaults: dict[str, str], line: int | None) -> list[Workload] | None:
    """The workloads of a job file a `nomad_job` renders with `templatefile("${path.module}/x.nomad.hcl", {k = v})`
    (terraform_templates.py), read on its own lines; None when the jobspec is no such call."""
    rendered = terraform_templates.render(spec, file, defaults)
    if rendered is None or not spec.lstrip().startswith("${templatefile"):
        return None
    try:
        job = hcl.parse(rendered.text, str(rendered.path))
    except hcl.HclError:
        return []
    note = rendered.note(f"{file}:{line}")
    # read through the template: the job file's reading on its own gives way to this one (run.not_alone)
    return [replace(w, notes=w.notes + (note,), read_through=(str(rendered.path),))
            for w in nomad.workloads(job, str(rendered.path))]  # fmt: skip


def notes(root: yaml.Node, file: str, read_by_values: set[int | None] = frozenset()) -> list[str]:
    """A helm_release that names vLLM and whose chart is not in the tree (nor read by its values: the lines in
    ``read_by_values``), named so that its silence is no pass."""
    found = []
    for labels, body in hcl.blocks(root, "resource"):
        if labels[:1] != ["helm_release"] or not any("vllm" in t.lower() for t in nodes.scalars(body)):
            continue
        if nodes.line(body) in read_by_values:
            continue
        if terraform_helm.local_chart(body, file) is not None:  # rendered (terraform_helm.py)
            continue
        chart = nodes.text(nodes.get(body, "chart")) or "?"
        repository = nodes.text(nodes.get(body, "repository"))
        release = labels[1] if len(labels) > 1 else ""
        found.append(f"{file}:{nodes.line(body)}: Terraform helm_release {release} installs "
                     f"chart {chart}" + (f" from {repository}" if repository else "") + " and names vLLM: "
                     "not rendered here (helm template RELEASE CHART -f VALUES | kvdoctor scan -, or scan the chart "
                     "directory with --values)")  # fmt: skip
    return found


DEFAULTS_NOTE = "Terraform values read as the file's defaults ({}): a .tfvars file or -var may set others"
REFERENCE = hcl.REFERENCE
UNREFERENCED = re.compile(r"\$\$\{")  # `$${` is a literal `${` in HCL
MAX_PASSES = 5
"""Locals built from locals: five rounds settle any real chain (a cycle stops there, its references kept)."""


def _defaults(root: yaml.Node) -> dict[str, str]:
    """`var.NAME` -> the literal default of `variable "NAME"`, `local.NAME` -> a literal in `locals`."""
    found = {f"var.{labels[0]}": value for labels, body in hcl.blocks(root, "variable") if labels
             and (value := nodes.text(nodes.get(body, "default"))) is not None and not hcl.is_unknown(value)}  # fmt: skip
    for _, body in hcl.blocks(root, "locals"):  # a literal, or a string of literals and ${var.x} / ${local.x} only
        found |= {f"local.{key}": value for key, _, node in nodes.pairs(body) if key != hcl.LABELS
                  and (value := nodes.text(node)) is not None
                  and ("${" not in value or not UNREFERENCED.sub("", REFERENCE.sub("", value)).count("${"))}  # fmt: skip
    return found


def _module_defaults(file: str) -> dict[str, str]:
    """The defaults of the other .tf files of the file's directory (one Terraform module: variables.tf)."""
    found: dict[str, str] = {}
    for _, root in sibling_roots(file):
        found |= _defaults(root)
    return found


def sibling_roots(file: str) -> list[tuple[Path, yaml.Node]]:
    """The other .tf files of the file's directory (its Terraform module), each parsed; one that cannot be is left
    out."""
    found = []
    for sibling in sorted(Path(file).parent.glob("*.tf")) if file != "<stdin>" else []:
        if sibling.name == Path(file).name or not sibling.is_file() or sibling.stat().st_size > 1024 * 1024:
            continue
        try:
            found.append((sibling, hcl.parse(sibling.read_text(encoding="utf-8"), str(sibling))))
        except (OSError, UnicodeDecodeError, hcl.HclError):
            continue
    return found


def _substitute(node: yaml.Node, defaults: dict[str, str]) -> set[str]:
    """Each `${var.x}` in the resource's strings replaced by its default, in place; the names replaced."""
    used: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if nodes.is_scalar(current) and "${" in str(current.value):
            current.value = REFERENCE.sub(lambda m: used.add(m.group(1)) or defaults[m.group(1)]
                                          if m.group(1) in defaults else m.group(0), str(current.value))  # fmt: skip
        elif nodes.is_seq(current):
            stack += current.value
        elif nodes.is_map(current):
            stack += [value for _, value in current.value]
    return used


def is_read(resource: str) -> bool:
    """Whether the resource type is one kvdoctor reads as the objects it creates (or a chart / job it installs)."""
    return VERSION_SUFFIX.sub("", resource) in KUBERNETES_KINDS or resource in CLOUD_RUN or resource in {
        "kubernetes_manifest", "kubectl_manifest", "docker_container", "helm_release", "nomad_job"}


def _objects(resource: str, name: str, body: yaml.Node, file: str) -> list[Document]:
    base = VERSION_SUFFIX.sub("", resource)
    if base in KUBERNETES_KINDS:
        api, kind = KUBERNETES_KINDS[base]
        return [Document(file, 0, _object(api, kind, _k8s_shape(body), body))]
    if resource == "kubernetes_manifest" and nodes.is_map(manifest := nodes.get(body, "manifest")):
        return [Document(file, 0, manifest)]
    if resource == "kubectl_manifest" and (yaml_body := nodes.get(body, "yaml_body")) is not None:
        return _heredoc_yaml(yaml_body, file)
    if resource in CLOUD_RUN:
        return [Document(file, 0, _cloud_run(resource, name, body))]
    if resource == "docker_container":
        return [Document(file, 0, _compose_service(name, body))]
    return []


# The Docker provider's container attributes that are a Compose service's (registry.terraform.io/providers/
# kreuzwerker/docker, docker_container: `command` is the image's CMD, `entrypoint` its ENTRYPOINT, `env` "K=V" items)
DOCKER_CONTAINER_KEYS = {"image": "image", "command": "command", "entrypoint": "entrypoint", "env": "environment"}


def _compose_service(name: str, body: yaml.Node) -> yaml.MappingNode:
    """A `docker_container` as the one-service Compose file that runs the same container, named by its `name`."""
    named = nodes.text(nodes.get(body, "name"))
    service = yaml.MappingNode("tag:yaml.org,2002:map", [
        (_renamed(key_node, DOCKER_CONTAINER_KEYS[key]), value) for key, key_node, value in nodes.pairs(body)
        if key in DOCKER_CONTAINER_KEYS], body.start_mark, body.end_mark)  # fmt: skip
    services = yaml.MappingNode("tag:yaml.org,2002:map", [(_str(named if named and not hcl.is_unknown(named) else name,
                                                                body), service)], body.start_mark, body.end_mark)
    return yaml.MappingNode("tag:yaml.org,2002:map", [(_str("services", body), services)], body.start_mark,
                            body.end_mark)


def _k8s_shape(node: yaml.Node) -> yaml.Node:
    """A provider block as the Kubernetes object's fields: snake_case names camelCase, repeated blocks lists; an
    attribute's map keeps its keys (`limits = {"nvidia.com/gpu" = 1}`)."""
    if not hcl.is_block(node):
        return node
    pairs: list[tuple[yaml.Node, yaml.Node]] = []
    lists: dict[str, yaml.SequenceNode] = {}
    for key, key_node, value in nodes.pairs(node):
        if key == hcl.LABELS:
            continue
        if hcl.is_block(value) and key in LIST_BLOCKS:
            name = LIST_BLOCKS[key]
            if name not in lists:
                lists[name] = yaml.SequenceNode("tag:yaml.org,2002:seq", [], value.start_mark, value.end_mark)
                pairs.append((_renamed(key_node, name), lists[name]))
            lists[name].value.append(_k8s_shape(value))
        else:
            pairs.append((_renamed(key_node, _camel(key)), _k8s_shape(value)))
    return yaml.MappingNode("tag:yaml.org,2002:map", pairs, node.start_mark, node.end_mark)


def _object(api: str, kind: str, shaped: yaml.Node, at: yaml.Node) -> yaml.MappingNode:
    head = [(_str("apiVersion", at), _str(api, at)), (_str("kind", at), _str(kind, at))]
    return yaml.MappingNode("tag:yaml.org,2002:map", head + list(shaped.value), at.start_mark, at.end_mark)


def _cloud_run(resource: str, name: str, body: yaml.Node) -> yaml.MappingNode:
    """A Cloud Run service as the Knative Service its YAML is: v1's template.spec is the pod spec; v2's template holds
    the containers and node_selector { accelerator }."""
    shaped = _k8s_shape(body)
    template = nodes.get(shaped, "template")
    if resource == "google_cloud_run_v2_service":
        accelerator = nodes.get(template, "nodeSelector", "accelerator")
        pod = [pair for pair in (template.value if nodes.is_map(template) else []) if pair[0].value != "nodeSelector"]
        if accelerator is not None:
            selector = yaml.MappingNode("tag:yaml.org,2002:map", [(_str(ACCELERATOR_LABEL, accelerator), accelerator)],
                                        accelerator.start_mark, accelerator.end_mark)  # fmt: skip
            pod.append((_str("nodeSelector", accelerator), selector))
        template = yaml.MappingNode("tag:yaml.org,2002:map", [(_str("spec", body), yaml.MappingNode(
            "tag:yaml.org,2002:map", pod, body.start_mark, body.end_mark))], body.start_mark, body.end_mark)  # fmt: skip
    metadata = nodes.get(shaped, "metadata") or yaml.MappingNode("tag:yaml.org,2002:map", [], body.start_mark,
                                                                 body.start_mark)  # fmt: skip
    if nodes.get(metadata, "name") is None:
        named = nodes.get(shaped, "name") or _str(name, body)
        metadata = yaml.MappingNode("tag:yaml.org,2002:map", [(_str("name", body), named)] + list(metadata.value),
                                    metadata.start_mark, metadata.end_mark)  # fmt: skip
    spec = yaml.MappingNode("tag:yaml.org,2002:map", [(_str("template", body), template)] if template is not None
                            else [], body.start_mark, body.end_mark)  # fmt: skip
    return yaml.MappingNode("tag:yaml.org,2002:map", [
        (_str("apiVersion", body), _str("serving.knative.dev/v1", body)), (_str("kind", body), _str("Service", body)),
        (_str("metadata", body), metadata), (_str("spec", body), spec)], body.start_mark, body.end_mark)  # fmt: skip


def _heredoc_yaml(value: yaml.Node, file: str) -> list[Document]:
    """The YAML a heredoc holds, composed on the file's own lines; none when it is not plain YAML (a template)."""
    from kvdoctor.scan.documents import ManifestError, SourceFile, compose_documents

    text = nodes.text(value) or ""
    if hcl.is_unknown(text):
        return []
    try:
        return compose_documents(SourceFile(file, "\n" * (nodes.line(value) or 1) + text))
    except ManifestError:
        return []


def _heredoc_nomad(value: yaml.Node, file: str) -> list[Workload]:
    text = nodes.text(value) or ""
    if hcl.is_unknown(text):
        return []
    try:
        return nomad.workloads(hcl.parse("\n" * (nodes.line(value) or 1) + text, file), file)
    except hcl.HclError:
        return []


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _renamed(key: yaml.Node, name: str) -> yaml.ScalarNode:
    return yaml.ScalarNode("tag:yaml.org,2002:str", name, key.start_mark, key.end_mark)


_str = nodes.str_node
