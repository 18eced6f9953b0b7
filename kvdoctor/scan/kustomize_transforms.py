"""Kustomize's transformers on rendered objects (node trees that keep their files and lines): which objects a patch
targets, namespace, namePrefix / nameSuffix with the references they rename, replicas and images."""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

from kvdoctor.scan import nodes
from kvdoctor.scan.kustomize_patches import KUSTOMIZE, copied, mapping_at, scalar, set_key

CLUSTER_SCOPED = frozenset(KUSTOMIZE["cluster_scoped_kinds"])
REPLICA_KINDS = frozenset(KUSTOMIZE["replica_kinds"])
# Which kind a reference under a container or volume names (renamed with namePrefix / nameSuffix).
REFERENCE_KINDS = {"configMapKeyRef": "ConfigMap", "configMapRef": "ConfigMap", "configMap": "ConfigMap",
                   "secretKeyRef": "Secret", "secretRef": "Secret"}  # fmt: skip


@dataclass
class Resource:
    root: yaml.Node
    original_name: str | None
    """The name as its file writes it: patches of an overlay name it so, whatever prefix a base added."""


def kind_of(root: yaml.Node) -> str | None:
    return nodes.text(nodes.get(root, "kind"))


def same_object(resource: Resource, patch: yaml.Node) -> bool:
    """A strategic-merge patch without a target patches the object of its kind and name (the base's own name too)."""
    name = nodes.text(nodes.get(patch, "metadata", "name"))
    namespace = nodes.text(nodes.get(patch, "metadata", "namespace"))
    current = nodes.text(nodes.get(resource.root, "metadata", "name"))
    return (kind_of(patch) == kind_of(resource.root) and name in (current, resource.original_name)
            and (namespace is None or namespace == nodes.text(nodes.get(resource.root, "metadata", "namespace"))))


def targets(resource: Resource, target: yaml.Node) -> bool:
    """Whether a patch's target selects the resource (group, version, kind, name, namespace: regular expressions
    matched whole; labelSelector / annotationSelector: `key=value` and `key` terms)."""
    root = resource.root
    group, _, version = (nodes.text(nodes.get(root, "apiVersion")) or "").rpartition("/")
    values = {"group": [group], "version": [version], "kind": [kind_of(root) or ""],
              "name": [nodes.text(nodes.get(root, "metadata", "name")) or "", resource.original_name or ""],
              "namespace": [nodes.text(nodes.get(root, "metadata", "namespace")) or ""]}  # fmt: skip
    for key, candidates in values.items():
        wanted = nodes.text(nodes.get(target, key))
        if wanted is not None and not any(_matches(wanted, c) for c in candidates):
            return False
    for key, field_name in (("labelSelector", "labels"), ("annotationSelector", "annotations")):
        selector = nodes.text(nodes.get(target, key))
        have = nodes.plain(nodes.get(root, "metadata", field_name)) or {}
        if selector is not None and not _selects(selector, have if isinstance(have, dict) else {}):
            return False
    return True


def _matches(pattern: str, value: str) -> bool:
    try:
        return re.fullmatch(pattern, value) is not None
    except re.error:
        return pattern == value


def _selects(selector: str, labels: dict) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        key, op, value = re.split(r"(!=|==|=)", term, maxsplit=1) if re.search("=", term) else (term, "", "")
        have = labels.get(key.strip())
        if op == "!=" and str(have) == value.strip():
            return False
        if op in ("=", "==") and str(have) != value.strip():
            return False
        if not op and key.startswith("!") and key[1:] in labels:
            return False
        if not op and not key.startswith("!") and key not in labels:
            return False
    return True


def described(patch: yaml.Node, target: yaml.Node | None) -> str:
    if target is not None:
        return ", ".join(f"{k}={nodes.text(v)}" for k, _, v in nodes.pairs(target))
    return f"{kind_of(patch)} {nodes.text(nodes.get(patch, 'metadata', 'name'))}"


def set_namespace(namespace: yaml.Node | None, resources: list[Resource]) -> None:
    if nodes.text(namespace) is None:
        return
    for resource in resources:
        if kind_of(resource.root) not in CLUSTER_SCOPED and nodes.is_map(resource.root):
            set_key(mapping_at(resource.root, "metadata", namespace), "namespace", scalar(nodes.text(namespace), namespace))


def rename(prefix: yaml.Node | None, suffix: yaml.Node | None, resources: list[Resource]) -> None:
    """namePrefix / nameSuffix on every object's name (on its own line), and the ConfigMap / Secret references of the
    containers to objects renamed here."""
    before, after = nodes.text(prefix) or "", nodes.text(suffix) or ""
    if not before and not after:
        return
    renamed: dict[tuple[str, str], str] = {}
    for resource in resources:
        kind = kind_of(resource.root) or ""
        name_node = nodes.get(resource.root, "metadata", "name")
        if kind == "Namespace" or kind == "CustomResourceDefinition" or nodes.text(name_node) is None:
            continue
        new = f"{before}{nodes.text(name_node)}{after}"
        renamed[(kind, nodes.text(name_node))] = new
        set_key(nodes.get(resource.root, "metadata"), "name", scalar(new, name_node))
    for resource in resources:
        _renamed_references(resource.root, renamed)


def _renamed_references(node: yaml.Node, renamed: dict[tuple[str, str], str]) -> None:
    stack = [node]
    while stack:
        current = stack.pop()
        for key, _, value in nodes.pairs(current):
            kind = REFERENCE_KINDS.get(key)
            name = nodes.get(value, "name") if kind else None
            if kind and (new := renamed.get((kind, nodes.text(name) or ""))) is not None:
                set_key(value, "name", scalar(new, name))
            stack.append(value)
        stack += [item for item in nodes.items(current) if not nodes.is_scalar(item)]


def set_replicas(entries: list[yaml.Node], resources: list[Resource]) -> None:
    for entry in entries:
        name, count = nodes.text(nodes.get(entry, "name")), nodes.get(entry, "count")
        for resource in resources:
            current = nodes.text(nodes.get(resource.root, "metadata", "name"))
            if kind_of(resource.root) in REPLICA_KINDS and name in (current, resource.original_name) and count is not None:
                set_key(mapping_at(resource.root, "spec", entry), "replicas", copied(count))


def set_image(entry: yaml.Node, resources: list[Resource]) -> None:
    """An `images` entry on every container whose image is that name (any tag or digest): newName, newTag or
    digest, the new image on the line of the field that decides it (digest, newTag, newName)."""
    name = nodes.text(nodes.get(entry, "name"))
    if name is None:
        return
    decides = next((n for key in ("digest", "newTag", "newName") if (n := nodes.get(entry, key)) is not None), entry)
    for resource in resources:
        for container in _containers(resource.root):
            image = nodes.get(container, "image")
            repository, tag, digest = _image_parts(nodes.text(image) or "")
            if image is None or repository != name:
                continue
            repository = nodes.text(nodes.get(entry, "newName")) or repository
            if (new_digest := nodes.text(nodes.get(entry, "digest"))) is not None:
                text = f"{repository}@{new_digest}"
            elif (new_tag := nodes.text(nodes.get(entry, "newTag"))) is not None:
                text = f"{repository}:{new_tag}"
            else:
                text = repository + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")
            set_key(container, "image", scalar(text, decides))


def _containers(root: yaml.Node) -> list[yaml.Node]:
    """Every container and init container anywhere in an object (a Deployment's, a CRD's pod templates)."""
    found: list[yaml.Node] = []
    stack = [root]
    while stack:
        current = stack.pop()
        for key, _, value in nodes.pairs(current):
            if key in ("containers", "initContainers") and nodes.is_seq(value):
                found += [c for c in nodes.items(value) if nodes.is_map(c)]
            if nodes.is_map(value) or nodes.is_seq(value):
                stack.append(value)
        stack += [item for item in nodes.items(current) if not nodes.is_scalar(item)]
    return found


def _image_parts(image: str) -> tuple[str, str | None, str | None]:
    """(repository, tag, digest) of an image reference; a registry's port is no tag."""
    reference, _, digest = image.partition("@")
    slash, colon = reference.rfind("/"), reference.rfind(":")
    if colon > slash:
        return reference[:colon], reference[colon + 1 :], digest or None
    return reference, None, digest or None
