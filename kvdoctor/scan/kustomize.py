"""Kustomize overlays rendered as `kubectl kustomize DIR` renders them, for the subset real deployments use:
resources (files, directories with their own kustomization, recursively), components, patches (strategic merge
and JSON 6902, with or without a target; the older patchesStrategicMerge / patchesJson6902), images, namePrefix /
nameSuffix, namespace, replicas and configMapGenerator. Every node keeps its file and line, so a value a patch or
an `images` entry sets is on that line. What is not rendered (a remote base, helmCharts, a plugin) is named."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import yaml

from kvdoctor.base.yaml_safe import safe_loader
from kvdoctor.scan import nodes
from kvdoctor.scan.config_maps import ConfigMap, config_maps_of, with_config_maps
from kvdoctor.scan.documents import Document, ManifestError, SourceFile, compose_documents, display_path, read_source
from kvdoctor.scan.kustomize_patches import (KUSTOMIZE, MAP, PatchError, copied, json_patch, mapping_at, scalar,
                                             set_key, strategic_merge)  # fmt: skip
from kvdoctor.scan.marks import marked, placed_document
from kvdoctor.scan.result import UnreadFile
from kvdoctor.scan.workload import Workload, file_line

KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
RENDERED_FIELDS = frozenset(KUSTOMIZE["rendered_fields"])
UNRENDERED_FIELDS: dict[str, str] = KUSTOMIZE["unrendered_fields"]
CLUSTER_SCOPED = frozenset(KUSTOMIZE["cluster_scoped_kinds"])
REPLICA_KINDS = frozenset(KUSTOMIZE["replica_kinds"])
# A resource Kustomize fetches (a git repository, an HTTP URL): kvdoctor reads no network.
REMOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|git@|github\.com/|gitlab\.com/|bitbucket\.org/)|\?ref=|\.git(?:$|//)")
# Which kind a reference under a container or volume names (renamed with namePrefix / nameSuffix).
REFERENCE_KINDS = {"configMapKeyRef": "ConfigMap", "configMapRef": "ConfigMap", "configMap": "ConfigMap",
                   "secretKeyRef": "Secret", "secretRef": "Secret"}  # fmt: skip
HINT = "kvdoctor renders kustomizations itself; check it with: kubectl kustomize DIR"


@dataclass(frozen=True)
class KustomizationSource:
    """A root kustomization found by scan (none of the scanned tree's others takes it in): rendered, not its files."""

    path: str
    """The kustomization file, as scan shows it."""
    directory: Path


@dataclass
class Resource:
    root: yaml.Node
    original_name: str | None
    """The name as its file writes it: patches of an overlay name it so, whatever prefix a base added."""


@dataclass
class Rendered:
    """A root kustomization's output: its objects (each a Document whose other files' lines are encoded, see
    workload.LINE_FILE_STRIDE), what was not rendered ("FILE:LINE: why"), and what Kustomize would refuse."""

    documents: list[Document] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)
    errors: list[ManifestError] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    """Every file read, as scan shows it."""


def kustomization_file(directory: Path) -> Path | None:
    return next((directory / name for name in KUSTOMIZATION_NAMES if (directory / name).is_file()), None)


def is_kustomization_name(name: str) -> bool:
    return name in KUSTOMIZATION_NAMES


def is_remote(entry: str) -> bool:
    return REMOTE.search(entry) is not None


def takes_in(kustomization: Path) -> tuple[set[Path], set[Path]]:
    """(directories, files) a kustomization takes in locally, followed through the directories' own
    kustomizations: they are deployed through it, never alone. A file that cannot be read takes in nothing."""
    directories: set[Path] = set()
    files: set[Path] = set()
    pending = [kustomization]
    while pending:
        current = pending.pop()
        files.add(current.resolve())
        try:
            data = yaml.load(current.read_text(encoding="utf-8"), Loader=safe_loader())
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        for entry in _local_entries(data if isinstance(data, dict) else {}):
            path = (current.parent / entry).resolve()
            if path.is_dir() and path not in directories and (inner := kustomization_file(path)) is not None:
                directories.add(path)
                pending.append(inner)
            elif path.is_file():
                files.add(path)
    return directories, files


def _local_entries(data: dict) -> list[str]:
    """Every local path a kustomization names: resources, bases, components, patch and generator files."""
    found: list[str] = []
    for key in ("resources", "bases", "components", "patchesStrategicMerge", "crds"):
        found += [e for e in data.get(key) or [] if isinstance(e, str) and "\n" not in e and not is_remote(e)]
    for key in ("patches", "patchesJson6902"):
        found += [e["path"] for e in data.get(key) or [] if isinstance(e, dict) and isinstance(e.get("path"), str)]
    for generator in (data.get("configMapGenerator") or []) + (data.get("secretGenerator") or []):
        if isinstance(generator, dict):
            named = list(generator.get("envs") or []) + [generator.get("env")] + list(generator.get("files") or [])
            found += [str(e).rpartition("=")[2] for e in named if isinstance(e, str)]
    return found


class _Render:
    """One root's render: what it read, what it could not render (undecided) and what Kustomize would refuse."""

    def __init__(self) -> None:
        self.undecided: list[str] = []
        self.errors: list[ManifestError] = []
        self.texts: dict[str, str] = {}

    def source(self, path: Path) -> SourceFile | None:
        try:
            source = read_source(path)
        except ManifestError as exc:
            self.errors.append(exc)
            return None
        self.texts[source.path] = source.text
        return source

    def documents(self, path: Path) -> list[yaml.Node]:
        source = self.source(path)
        return self.compose(source) if source is not None else []

    def compose(self, source: SourceFile, first_line: int = 1) -> list[yaml.Node]:
        """The file's (or an inline string's) documents, every node marked with the file and its text."""
        text = "\n" * (first_line - 1) + source.text
        try:
            documents = compose_documents(SourceFile(source.path, text))
        except ManifestError as exc:
            self.errors.append(ManifestError(exc.message, HINT))
            return []
        return [marked(doc.root, source.path, text) for doc in documents]

    def build(self, kustomization: Path, chain: tuple[Path, ...], inherited: list[Resource]) -> list[Resource]:
        """The resources a kustomization (a component: over its parent's ``inherited`` resources) outputs."""
        if kustomization.resolve() in chain:
            self.errors.append(ManifestError(f"{display_path(kustomization)}: takes itself in (a cycle of "
                                             "resources)", HINT))  # fmt: skip
            return inherited
        chain = chain + (kustomization.resolve(),)
        roots = self.documents(kustomization)
        root = roots[0] if roots else None
        if not nodes.is_map(root):
            return inherited
        shown = display_path(kustomization)
        self._name_unrendered(root, shown)
        resources = list(inherited)
        for entry in nodes.items(nodes.get(root, "resources")) + nodes.items(nodes.get(root, "bases")):
            resources += self._resource(entry, kustomization, shown, chain)
        for entry in nodes.items(nodes.get(root, "components")):
            resources = self._component(entry, kustomization, shown, chain, resources)
        resources = self._generated(root, kustomization, resources)
        return self._transformed(root, kustomization, shown, resources)

    def _name_unrendered(self, root: yaml.Node, shown: str) -> None:
        for key, key_node, _ in nodes.pairs(root):
            if key in RENDERED_FIELDS:
                continue
            why = UNRENDERED_FIELDS.get(key, "a field kvdoctor's Kustomize reader does not know")
            self.undecided.append(f"{shown}:{nodes.line(key_node)}: {key} ({why}) is not rendered by kvdoctor")

    def _resource(self, entry: yaml.Node, kustomization: Path, shown: str, chain) -> list[Resource]:
        name = nodes.text(entry)
        if name is None:
            return []
        if is_remote(name):
            self.undecided.append(f"{shown}:{nodes.line(entry)}: resource {name} is fetched from the network, not "
                                  "read by kvdoctor")  # fmt: skip
            return []
        path = _beside(kustomization, name)
        if path.is_dir():
            inner = kustomization_file(path)
            if inner is None:
                self.errors.append(ManifestError(f"{shown}:{nodes.line(entry)}: resource {name} is a directory "
                                                 "without a kustomization", HINT))  # fmt: skip
                return []
            return self.build(inner, chain, [])
        if not path.is_file():
            self.errors.append(ManifestError(f"{shown}:{nodes.line(entry)}: resource {name} is not there", HINT))
            return []
        found: list[Resource] = []
        for root in self.documents(path):
            kind = nodes.text(nodes.get(root, "kind")) or ""
            items = nodes.items(nodes.get(root, "items")) if kind.endswith("List") else [root]
            found += [Resource(item, nodes.text(nodes.get(item, "metadata", "name"))) for item in items]
        return found

    def _component(self, entry: yaml.Node, kustomization: Path, shown: str, chain, resources) -> list[Resource]:
        name = nodes.text(entry) or ""
        if is_remote(name):
            self.undecided.append(f"{shown}:{nodes.line(entry)}: component {name} is fetched from the network, not "
                                  "read by kvdoctor")  # fmt: skip
            return resources
        inner = kustomization_file(_beside(kustomization, name))
        if inner is None:
            self.errors.append(ManifestError(f"{shown}:{nodes.line(entry)}: component {name} has no kustomization",
                                             HINT))  # fmt: skip
            return resources
        return self.build(inner, chain, resources)

    def _generated(self, root: yaml.Node, kustomization: Path, resources: list[Resource]) -> list[Resource]:
        """configMapGenerator's ConfigMaps (literals, env files, files): a container's env reads their values."""
        namespace = nodes.get(root, "namespace")
        for generator in nodes.items(nodes.get(root, "configMapGenerator")):
            name = nodes.text(nodes.get(generator, "name"))
            if name is None:
                continue
            data = yaml.MappingNode(MAP, [], generator.start_mark, generator.end_mark)
            for literal in nodes.items(nodes.get(generator, "literals")):
                key, sep, value = (nodes.text(literal) or "").partition("=")
                if sep:
                    set_key(data, key.strip(), scalar(_unquoted(value), literal), literal)
            for env in nodes.items(nodes.get(generator, "envs")) + [n for n in [nodes.get(generator, "env")] if n]:
                self._env_file(_beside(kustomization, nodes.text(env) or ""), data, env)
            for entry in nodes.items(nodes.get(generator, "files")):
                key, sep, path = (nodes.text(entry) or "").rpartition("=")
                source = self.source(_beside(kustomization, path))
                if source is not None:
                    set_key(data, key if sep else Path(path).name, _file_value(source), entry)
            behavior = nodes.text(nodes.get(generator, "behavior")) or "create"
            existing = next((r for r in resources if _kind(r.root) == "ConfigMap" and r.original_name == name), None)
            if existing is not None and behavior in ("merge", "replace"):
                target = mapping_at(existing.root, "data", generator) if behavior == "merge" else None
                if target is None:
                    set_key(existing.root, "data", data)
                else:
                    for key, value in data.value:
                        set_key(target, key.value, value, key)
                continue
            config = yaml.MappingNode(MAP, [], generator.start_mark, generator.end_mark)
            set_key(config, "apiVersion", scalar("v1", generator))
            set_key(config, "kind", scalar("ConfigMap", generator))
            metadata = mapping_at(config, "metadata", generator)
            set_key(metadata, "name", scalar(name, nodes.get(generator, "name")))
            space = nodes.get(generator, "namespace") or namespace
            if nodes.text(space):
                set_key(metadata, "namespace", scalar(nodes.text(space), space))
            set_key(config, "data", data)
            resources.append(Resource(config, name))
        return resources

    def _env_file(self, path: Path, data: yaml.MappingNode, entry: yaml.Node) -> None:
        """KEY=VALUE lines of a generator's env file, each value on its own line of that file."""
        source = self.source(path)
        if source is None:
            return
        index = 0
        for number, line in enumerate(source.text.split("\n")):
            stripped = line.strip()
            if stripped and not stripped.startswith("#") and "=" in stripped:
                key, _, value = stripped.partition("=")
                mark = yaml.Mark(source.path, index, number, 0, source.text, None)
                set_key(data, key.strip(), yaml.ScalarNode("tag:yaml.org,2002:str", value, mark, mark), entry)
            index += len(line) + 1

    def _transformed(self, root: yaml.Node, kustomization: Path, shown: str, resources: list[Resource]) -> list[Resource]:
        for entry in nodes.items(nodes.get(root, "patchesStrategicMerge")):
            for patch in self._patch_documents(entry, None, kustomization):
                self._strategic(patch, None, resources, shown)
        for entry in nodes.items(nodes.get(root, "patches")):
            target = nodes.get(entry, "target")
            for patch in self._patch_documents(nodes.get(entry, "path"), nodes.get(entry, "patch"), kustomization):
                if nodes.is_seq(patch):
                    self._json6902(patch, target, resources, shown)
                else:
                    self._strategic(patch, target, resources, shown)
        _set_namespace(nodes.get(root, "namespace"), resources)
        _rename(nodes.get(root, "namePrefix"), nodes.get(root, "nameSuffix"), resources)
        for entry in nodes.items(nodes.get(root, "patchesJson6902")):
            for patch in self._patch_documents(nodes.get(entry, "path"), nodes.get(entry, "patch"), kustomization):
                self._json6902(patch, nodes.get(entry, "target"), resources, shown)
        _set_replicas(nodes.items(nodes.get(root, "replicas")), resources)
        for entry in nodes.items(nodes.get(root, "images")):
            _set_image(entry, resources)
        return resources

    def _patch_documents(self, path: yaml.Node | None, inline: yaml.Node | None, kustomization: Path) -> list[yaml.Node]:
        """A patch's documents: a file next to the kustomization, or YAML written inline (on its own lines)."""
        if path is not None and (name := nodes.text(path)) is not None and "\n" not in name \
                and _beside(kustomization, name).is_file():
            return self.documents(_beside(kustomization, name))
        node = inline if inline is not None else path
        text = nodes.text(node)
        if text is None:
            return []
        if inline is None and "\n" not in text and ": " not in text:  # a file name, not YAML written inline
            self.errors.append(ManifestError(f"{display_path(kustomization)}:{nodes.line(node)}: patch {text} is not "
                                             "there", HINT))  # fmt: skip
            return []
        first = nodes.line(node) + (1 if node.style in ("|", ">") else 0)
        return self.compose(SourceFile(display_path(kustomization), text), first)

    def _strategic(self, patch: yaml.Node, target: yaml.Node | None, resources: list[Resource], shown: str) -> None:
        if not nodes.is_map(patch):
            return
        matched = [r for r in resources if (_targets(r, target) if target is not None else _same_object(r, patch))]
        if not matched:
            self.undecided.append(f"{shown}:{nodes.line(patch)}: a patch that matches no resource kvdoctor rendered "
                                  f"({_described(patch, target)})")  # fmt: skip
        for resource in matched:
            merged = strategic_merge(resource.root, copied(patch))
            if merged is not None:
                resource.root = merged

    def _json6902(self, patch: yaml.Node, target: yaml.Node | None, resources: list[Resource], shown: str) -> None:
        where = f"{patch.start_mark.name}:{nodes.line(patch)}"
        if target is None:
            self.errors.append(ManifestError(f"{where}: a JSON 6902 patch without a target", HINT))
            return
        matched = [r for r in resources if _targets(r, target)]
        if not matched:
            self.undecided.append(f"{shown}:{nodes.line(target)}: a JSON 6902 patch whose target matches no resource "
                                  "kvdoctor rendered")  # fmt: skip
        for resource in matched:
            try:
                resource.root = json_patch(resource.root, copied(patch), where)
            except PatchError as exc:
                self.errors.append(ManifestError(exc.message, HINT))


def render(source: KustomizationSource) -> Rendered:
    """A root kustomization rendered: its objects, what was not rendered, and what Kustomize would refuse."""
    state = _Render()
    kustomization = kustomization_file(source.directory)
    if kustomization is None:
        return Rendered(errors=[ManifestError(f"{source.path}: no kustomization file", HINT)])
    resources = state.build(kustomization, (), [])
    documents = []
    home = display_path(kustomization)  # what kubectl apply -k deploys: each object is the kustomization's
    for index, resource in enumerate(resources):
        documents.append(placed_document(resource.root, index, home))
    return Rendered(documents, state.undecided, state.errors, list(state.texts))


def object_text(document: Document) -> str:
    """The text of the file a rendered document's object is written in."""
    buffer = document.root.start_mark.buffer
    return buffer if isinstance(buffer, str) else ""


def _beside(kustomization: Path, name: str) -> Path:
    """A path a kustomization names, relative to its folder, with `..` folded (base/x.yaml, not overlay/../base/x.yaml)."""
    return Path(os.path.normpath(kustomization.parent / name))


def _unquoted(value: str) -> str:
    value = value.strip()
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"" else value


def _file_value(source: SourceFile) -> yaml.Node:
    mark = yaml.Mark(source.path, 0, 0, 0, source.text, None)
    return yaml.ScalarNode("tag:yaml.org,2002:str", source.text, mark, mark)


def _kind(root: yaml.Node) -> str | None:
    return nodes.text(nodes.get(root, "kind"))


def _same_object(resource: Resource, patch: yaml.Node) -> bool:
    """A strategic-merge patch without a target patches the object of its kind and name (the base's own name too)."""
    name = nodes.text(nodes.get(patch, "metadata", "name"))
    namespace = nodes.text(nodes.get(patch, "metadata", "namespace"))
    current = nodes.text(nodes.get(resource.root, "metadata", "name"))
    return (_kind(patch) == _kind(resource.root) and name in (current, resource.original_name)
            and (namespace is None or namespace == nodes.text(nodes.get(resource.root, "metadata", "namespace"))))


def _targets(resource: Resource, target: yaml.Node) -> bool:
    """Whether a patch's target selects the resource (group, version, kind, name, namespace: regular expressions
    matched whole; labelSelector / annotationSelector: `key=value` and `key` terms)."""
    root = resource.root
    group, _, version = (nodes.text(nodes.get(root, "apiVersion")) or "").rpartition("/")
    values = {"group": [group], "version": [version], "kind": [_kind(root) or ""],
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


def _described(patch: yaml.Node, target: yaml.Node | None) -> str:
    if target is not None:
        return ", ".join(f"{k}={nodes.text(v)}" for k, _, v in nodes.pairs(target))
    return f"{_kind(patch)} {nodes.text(nodes.get(patch, 'metadata', 'name'))}"


def _set_namespace(namespace: yaml.Node | None, resources: list[Resource]) -> None:
    if nodes.text(namespace) is None:
        return
    for resource in resources:
        if _kind(resource.root) not in CLUSTER_SCOPED and nodes.is_map(resource.root):
            set_key(mapping_at(resource.root, "metadata", namespace), "namespace", scalar(nodes.text(namespace), namespace))


def _rename(prefix: yaml.Node | None, suffix: yaml.Node | None, resources: list[Resource]) -> None:
    """namePrefix / nameSuffix on every object's name (on its own line), and the ConfigMap / Secret references of the
    containers to objects renamed here."""
    before, after = nodes.text(prefix) or "", nodes.text(suffix) or ""
    if not before and not after:
        return
    renamed: dict[tuple[str, str], str] = {}
    for resource in resources:
        kind = _kind(resource.root) or ""
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


def _set_replicas(entries: list[yaml.Node], resources: list[Resource]) -> None:
    for entry in entries:
        name, count = nodes.text(nodes.get(entry, "name")), nodes.get(entry, "count")
        for resource in resources:
            current = nodes.text(nodes.get(resource.root, "metadata", "name"))
            if _kind(resource.root) in REPLICA_KINDS and name in (current, resource.original_name) and count is not None:
                set_key(mapping_at(resource.root, "spec", entry), "replicas", copied(count))


def _set_image(entry: yaml.Node, resources: list[Resource]) -> None:
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


ReadRendered = Callable[[Document, str, tuple[str, ...], tuple[str, ...]], tuple[list[Workload], list[str]]]
"""(document, its text, what the render left undecided, notes for its workloads) -> (workloads, notes)."""


def rendered_instead(sources: list) -> list:
    """The scan's sources with each root kustomization (one no other scanned kustomization takes in) in place of its
    file, and without the files and kustomizations it takes in: kubectl deploys them only through it."""
    found = [s for s in sources if isinstance(s, SourceFile) and is_kustomization_name(Path(s.path).name)
             and not FLUX_API.search(s.text)]  # fmt: skip
    if not found:
        return sources
    taken_dirs: set[Path] = set()
    taken_files: set[Path] = set()
    for source in found:
        directories, files = takes_in(Path(source.path))
        taken_dirs |= directories
        taken_files |= files - {Path(source.path).resolve()}
    kept = []
    roots = {id(s) for s in found}
    for source in sources:
        if id(source) in roots:
            directory = Path(source.path).parent
            if directory.resolve() not in taken_dirs:
                kept.append(KustomizationSource(source.path, directory))
        elif not (isinstance(source, SourceFile) and Path(source.path).resolve() in taken_files):
            kept.append(source)
    return kept


FLUX_API = re.compile(r"^apiVersion:\s*['\"]?kustomize\.toolkit\.fluxcd\.io/", re.MULTILINE)
"""A Flux Kustomization object (a file named kustomization.yaml too, sometimes): a Kubernetes object, read as one."""
ENCODED_PLACE = re.compile(r"(\S+):(\d{9,})\b")


def workloads_of(source: KustomizationSource, read: ReadRendered
                 ) -> tuple[list[Workload], list[UnreadFile], list[str], list[str]]:  # fmt: skip
    """The vLLM workloads of a root kustomization's render (each placed on the files and lines that wrote its values),
    what Kustomize would refuse, notes, and the files read; what is not rendered is each workload's undecided."""
    rendered = render(source)
    undecided = tuple(f"not rendered here: {why}; what it changes in this workload is unknown"
                      for why in rendered.undecided)  # fmt: skip
    note = f"rendered from kustomization {source.path} (as kubectl kustomize {display_path(source.directory)} renders it)"
    found: list[Workload] = []
    notes: list[str] = []
    for doc in rendered.documents:
        workloads, why = read(doc, object_text(doc), undecided, (note,))
        notes += [_decoded(n, doc) for n in why]
        # a workload of another file is a chart's that an Argo CD Application or Flux HelmRelease here renders
        found += [replace(w, line=KUSTOMIZATION_LINE, line_files=doc.line_files,
                          notes=tuple(_decoded(n, doc) for n in w.notes) + (_written_at(w, doc),))
                  if w.file == doc.file else w for w in workloads]  # fmt: skip
    found = with_config_maps(found, _config_maps(rendered))  # its own ConfigMaps first (another overlay's differ)
    if found:  # the files it read, each deployed through it (none is checked alone)
        notes.append(f"{source.path}: its vLLM workloads rendered from {len(rendered.files)} file(s): "
                     f"{', '.join(rendered.files)}")  # fmt: skip
    if rendered.undecided:
        notes.append(f"{source.path}: kustomization rendered without what kvdoctor does not read "
                     f"({'; '.join(rendered.undecided)}): its workloads are not fully known")  # fmt: skip
    return found, [UnreadFile.of(e) for e in rendered.errors], notes, rendered.files


def _config_maps(rendered: Rendered) -> dict[str, list[ConfigMap]]:
    maps: dict[str, list[ConfigMap]] = {}
    for doc in rendered.documents:
        for name, found in config_maps_of(doc.root, doc.file, doc.line_files).items():
            maps.setdefault(name, []).extend(found)
    return maps


KUSTOMIZATION_LINE = 1
"""A rendered workload is the root kustomization's (kubectl apply -k DIR), placed at its first line; where its object
is written is a note, and each value keeps its own file and line."""


def _written_at(workload: Workload, doc: Document) -> str:
    file, line = file_line(doc.file, doc.line_files, workload.line)
    return f"the object is written at {file}:{line}"


def _decoded(text: str, doc: Document) -> str:
    """A note's FILE:LINE places with the line of another file (a patch's) said as that file's."""
    def place(match: re.Match) -> str:
        file, line = file_line(doc.file, doc.line_files, int(match.group(2)))
        return f"{file}:{line}"

    return ENCODED_PLACE.sub(place, text) if doc.line_files else text
