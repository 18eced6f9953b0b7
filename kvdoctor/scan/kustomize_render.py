"""A kustomization rendered as `kubectl kustomize DIR` renders it, for the subset real deployments use: resources
(files, directories with their own kustomization, recursively), components, configMapGenerator, patches (strategic
merge and JSON 6902; the older patchesStrategicMerge / patchesJson6902), namespace, namePrefix / nameSuffix, replicas
and images. Every node keeps its file and line (marks.py); what is not rendered is named, what Kustomize refuses is an
error."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from kvdoctor.scan import nodes
from kvdoctor.scan.documents import (PODLESS_KINDS, Document, ManifestError, SourceFile, compose_documents, display_path,
                                     read_source)  # fmt: skip
from kvdoctor.scan.kustomize_patches import (KUSTOMIZE, MAP, PatchError, copied, json_patch, mapping_at, scalar,
                                             set_key, strategic_merge)  # fmt: skip
from kvdoctor.scan.kustomize_transforms import (Resource, described, kind_of, rename, same_object, set_image,
                                                set_namespace, set_replicas, targets)  # fmt: skip
from kvdoctor.scan.marks import marked, placed_document
from kvdoctor.scan.workload import Workload

KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
RENDERED_FIELDS = frozenset(KUSTOMIZE["rendered_fields"])
UNRENDERED_FIELDS: dict[str, str] = KUSTOMIZE["unrendered_fields"]
# A resource Kustomize fetches (a git repository, an HTTP URL): kvdoctor reads no network.
REMOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|git@|github\.com/|gitlab\.com/|bitbucket\.org/)|\?ref=|\.git(?:$|//)")
HINT = "kvdoctor renders kustomizations itself; check it with: kubectl kustomize DIR"
NAME_SPEC_FIELDS = frozenset(KUSTOMIZE["name_spec_fields"])


@dataclass(frozen=True)
class Unrendered:
    """A part of a kustomization kvdoctor does not render, and which workloads it may change."""

    why: str
    """FILE:LINE: what it is."""
    selects: tuple[tuple[str | None, str | None], ...] | None = None
    """(kind, name) of the objects it may change (a replacement's targets; none for a configuration of name and var
    paths); None: any."""
    variables: tuple[str, ...] = ()
    """vars: it changes only the words that name one of these as $(NAME)."""

    def may_change(self, workload: Workload) -> bool:
        if self.variables:
            words = [t.text for t in workload.argv] + [e.value or "" for e in workload.env]
            return any(f"$({name})" in word for name in self.variables for word in words)
        if self.selects is None:
            return True
        return any((kind is None or kind == workload.kind) and (name is None or name in workload.name)
                   for kind, name in self.selects)  # fmt: skip


@dataclass
class Rendered:
    """A root kustomization's output: its objects (each a Document whose other files' lines are encoded, see
    workload.LINE_FILE_STRIDE), what was not rendered ("FILE:LINE: why"), and what Kustomize would refuse."""

    documents: list[Document] = field(default_factory=list)
    undecided: list[Unrendered] = field(default_factory=list)
    errors: list[ManifestError] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    """Every file read, as scan shows it."""
    unmatched: list[str] = field(default_factory=list)
    """Patches that match no object rendered (of a kind that may run a pod): a base kvdoctor could not read?"""


def kustomization_file(directory: Path) -> Path | None:
    return next((directory / name for name in KUSTOMIZATION_NAMES if (directory / name).is_file()), None)


def is_kustomization_name(name: str) -> bool:
    return name in KUSTOMIZATION_NAMES


def is_remote(entry: str) -> bool:
    return REMOTE.search(entry) is not None


class _Render:
    """One root's render: what it read, what it could not render (undecided) and what Kustomize would refuse."""

    def __init__(self) -> None:
        self.undecided: list[Unrendered] = []
        self.unmatched: list[str] = []
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
        self._name_unrendered(root, shown, kustomization)
        resources = list(inherited)
        for entry in nodes.items(nodes.get(root, "resources")) + nodes.items(nodes.get(root, "bases")):
            resources += self._resource(entry, kustomization, shown, chain)
        for entry in nodes.items(nodes.get(root, "components")):
            resources = self._component(entry, kustomization, shown, chain, resources)
        resources = self._generated(root, kustomization, resources)
        return self._transformed(root, kustomization, shown, resources)

    def _name_unrendered(self, root: yaml.Node, shown: str, kustomization: Path) -> None:
        for key, key_node, value in nodes.pairs(root):
            if key in RENDERED_FIELDS:
                continue
            why = UNRENDERED_FIELDS.get(key, "a field kvdoctor's Kustomize reader does not know")
            selects = _selects(key, value)
            if key == "configurations" and self._only_name_specs(value, kustomization):
                selects = ()  # no container value: where vars go matters only with vars, named on their own
            self.undecided.append(Unrendered(f"{shown}:{nodes.line(key_node)}: {key} ({why}) is not rendered by kvdoctor",
                                             selects, _variables(key, value)))  # fmt: skip

    def _only_name_specs(self, files: yaml.Node, kustomization: Path) -> bool:
        """Whether every transformer configuration file lists only where names, namespaces, labels and vars go
        (nameReference, varReference...), none of the image or container fields the checks read."""
        for entry in nodes.items(files):
            path = _beside(kustomization, nodes.text(entry) or "")
            roots = self.documents(path) if path.is_file() else []
            if not roots or not all(key in NAME_SPEC_FIELDS for root in roots for key, _, _ in nodes.pairs(root)):
                return False
        return True

    def _resource(self, entry: yaml.Node, kustomization: Path, shown: str, chain) -> list[Resource]:
        name = nodes.text(entry)
        if name is None:
            return []
        if is_remote(name):
            self.undecided.append(Unrendered(f"{shown}:{nodes.line(entry)}: resource {name} is fetched from the "
                                             "network, not read by kvdoctor"))  # fmt: skip
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
            self.undecided.append(Unrendered(f"{shown}:{nodes.line(entry)}: component {name} is fetched from the "
                                             "network, not read by kvdoctor"))  # fmt: skip
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
            existing = next((r for r in resources if kind_of(r.root) == "ConfigMap" and r.original_name == name), None)
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
        set_namespace(nodes.get(root, "namespace"), resources)
        rename(nodes.get(root, "namePrefix"), nodes.get(root, "nameSuffix"), resources)
        for entry in nodes.items(nodes.get(root, "patchesJson6902")):
            for patch in self._patch_documents(nodes.get(entry, "path"), nodes.get(entry, "patch"), kustomization):
                self._json6902(patch, nodes.get(entry, "target"), resources, shown)
        set_replicas(nodes.items(nodes.get(root, "replicas")), resources)
        for entry in nodes.items(nodes.get(root, "images")):
            set_image(entry, resources)
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
        first = nodes.text_line(node)
        return self.compose(SourceFile(display_path(kustomization), text), first)

    def _strategic(self, patch: yaml.Node, target: yaml.Node | None, resources: list[Resource], shown: str) -> None:
        if not nodes.is_map(patch):
            return
        matched = [r for r in resources if (targets(r, target) if target is not None else same_object(r, patch))]
        if not matched and kind_of(patch) not in PODLESS_KINDS:  # a patch of no rendered object changes none of them
            self.unmatched.append(f"{shown}:{nodes.line(patch)}: a patch that matches no resource kvdoctor rendered "
                                  f"({described(patch, target)})")  # fmt: skip
        for resource in matched:
            merged = strategic_merge(resource.root, copied(patch))
            if merged is not None:
                resource.root = merged

    def _json6902(self, patch: yaml.Node, target: yaml.Node | None, resources: list[Resource], shown: str) -> None:
        where = f"{patch.start_mark.name}:{nodes.line(patch)}"
        if target is None:
            self.errors.append(ManifestError(f"{where}: a JSON 6902 patch without a target", HINT))
            return
        matched = [r for r in resources if targets(r, target)]
        if not matched and nodes.text(nodes.get(target, "kind")) not in PODLESS_KINDS:
            self.unmatched.append(f"{shown}:{nodes.line(target)}: a JSON 6902 patch whose target matches no resource "
                                  f"kvdoctor rendered ({described(patch, target)})")  # fmt: skip
        for resource in matched:
            try:
                resource.root = json_patch(resource.root, copied(patch), where)
            except PatchError as exc:
                self.errors.append(ManifestError(exc.message, HINT))


def render(directory: Path) -> Rendered:
    """A root kustomization rendered: its objects, what was not rendered, and what Kustomize would refuse."""
    state = _Render()
    kustomization = kustomization_file(directory)
    if kustomization is None:
        return Rendered(errors=[ManifestError(f"{display_path(directory)}: no kustomization file", HINT)])
    resources = state.build(kustomization, (), [])
    documents = []
    home = display_path(kustomization)  # what kubectl apply -k deploys: each object is the kustomization's
    for index, resource in enumerate(resources):
        documents.append(placed_document(resource.root, index, home))
    return Rendered(documents, state.undecided, state.errors, list(state.texts), state.unmatched)


def object_text(document: Document) -> str:
    """The text of the file a rendered document's object is written in."""
    buffer = document.root.start_mark.buffer
    return buffer if isinstance(buffer, str) else ""


def _selects(key: str, value: yaml.Node) -> tuple[tuple[str | None, str | None], ...] | None:
    """The (kind, name) of every object a `replacements` list writes into; None (any) for other fields, or when a
    target selects by other means."""
    if key != "replacements":
        return None
    chosen = [nodes.get(target, "select") for entry in nodes.items(value) for target in nodes.items(nodes.get(entry, "targets"))]
    if not chosen or any(nodes.text(nodes.get(c, "kind")) is None and nodes.text(nodes.get(c, "name")) is None
                         for c in chosen):  # fmt: skip
        return None
    return tuple((nodes.text(nodes.get(c, "kind")), nodes.text(nodes.get(c, "name"))) for c in chosen)


def _variables(key: str, value: yaml.Node) -> tuple[str, ...]:
    """The names a `vars` list declares: Kustomize substitutes only $(NAME) words that use one."""
    if key != "vars":
        return ()
    return tuple(name for entry in nodes.items(value) if (name := nodes.text(nodes.get(entry, "name"))))


def _beside(kustomization: Path, name: str) -> Path:
    """A path a kustomization names, relative to its folder, with `..` folded (base/x.yaml, not overlay/../base/x.yaml)."""
    return Path(os.path.normpath(kustomization.parent / name))


def _unquoted(value: str) -> str:
    value = value.strip()
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"" else value


def _file_value(source: SourceFile) -> yaml.Node:
    mark = yaml.Mark(source.path, 0, 0, 0, source.text, None)
    return yaml.ScalarNode("tag:yaml.org,2002:str", source.text, mark, mark)
