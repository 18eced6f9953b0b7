"""Kustomize in a scan: each root kustomization (one no other scanned kustomization takes in) is rendered
(kustomize_render.py) in place of the files it takes in, and its vLLM workloads are the kustomization's, each value on
the file and line that wrote it; what the render leaves out is each workload's undecided."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from kvdoctor.base.yaml_safe import YAMLError, load_yaml
from kvdoctor.scan.config_maps import ConfigMap, config_maps_of, with_config_maps
from kvdoctor.scan.documents import Document, SourceFile, display_path, read_source
from kvdoctor.scan.kustomize_render import Rendered, is_kustomization_name, is_remote, kustomization_file, object_text, render
from kvdoctor.scan.result import UnreadFile
from kvdoctor.scan.workload import Workload, file_line


@dataclass(frozen=True)
class KustomizationSource:
    """A root kustomization found by scan (none of the scanned tree's others takes it in): rendered, not its files."""

    path: str
    """The kustomization file, as scan shows it."""
    directory: Path


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
            data = load_yaml(current.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, YAMLError):
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
    for key in ("resources", "bases", "components", "patchesStrategicMerge", "crds", "configurations", "generators",
                "transformers", "validators"):
        found += [e for e in data.get(key) or [] if isinstance(e, str) and "\n" not in e and not is_remote(e)]
    for key in ("patches", "patchesJson6902"):
        found += [e["path"] for e in data.get(key) or [] if isinstance(e, dict) and isinstance(e.get("path"), str)]
    for generator in (data.get("configMapGenerator") or []) + (data.get("secretGenerator") or []):
        if isinstance(generator, dict):
            named = list(generator.get("envs") or []) + [generator.get("env")] + list(generator.get("files") or [])
            found += [str(e).rpartition("=")[2] for e in named if isinstance(e, str)]
    return found


ReadRendered = Callable[[Document, str, tuple[str, ...], tuple[str, ...]], tuple[list[Workload], list[str]]]
"""(document, its text, what the render left out (kustomize_render.Unrendered), notes for its workloads) ->
(workloads, notes)."""


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


def through_their_kustomization(sources: list, given: list[str]) -> tuple[list, list[str]]:
    """Each file given by path (the pre-commit hook passes the changed files) that a kustomization in its folder or a
    folder above takes in is replaced by that kustomization, rendered, as kubectl deploys it (a patch alone is no
    workload); and a note saying so."""
    wanted = {Path(p).resolve() for p in given if Path(p).is_file() and not is_kustomization_name(Path(p).name)}
    if not wanted:
        return sources, []
    kept: list = []
    notes: list[str] = []
    added: set[Path] = set()
    for source in sources:
        path = Path(source.path).resolve() if isinstance(source, SourceFile) else None
        kustomization = _taking_in(path) if path in wanted else None
        if kustomization is None:
            kept.append(source)
            continue
        notes.append(f"{source.path}: taken in by {display_path(kustomization)}: checked as it renders it")
        if kustomization.resolve() not in added:
            added.add(kustomization.resolve())
            kept.append(read_source(kustomization))
    return kept, notes


MAX_FOLDERS_UP = 8


def _taking_in(path: Path) -> Path | None:
    """The nearest kustomization, in the file's folder or one above (not above the working directory when the file
    is under it), that takes the file in."""
    top = Path.cwd().resolve()
    for folder in list(path.parents)[:MAX_FOLDERS_UP]:
        kustomization = kustomization_file(folder)
        if kustomization is not None and path in takes_in(kustomization)[1]:
            return kustomization
        if folder == top:
            return None
    return None


FLUX_API = re.compile(r"^apiVersion:\s*['\"]?kustomize\.toolkit\.fluxcd\.io/", re.MULTILINE)
"""A Flux Kustomization object (a file named kustomization.yaml too, sometimes): a Kubernetes object, read as one."""
ENCODED_PLACE = re.compile(r"(\S+):(\d{9,})\b")


def workloads_of(source: KustomizationSource, read: ReadRendered
                 ) -> tuple[list[Workload], list[UnreadFile], list[str], list[str]]:  # fmt: skip
    """The vLLM workloads of a root kustomization's render (each placed on the files and lines that wrote its values),
    what Kustomize would refuse, notes, and the files read; what is not rendered is each workload's undecided."""
    rendered = render(source.directory)
    undecided = tuple(replace(u, why=f"not rendered here: {u.why}; what it changes in this workload is unknown")
                      for u in rendered.undecided)  # fmt: skip
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
    if rendered.undecided or rendered.unmatched:
        notes.append(f"{source.path}: kustomization rendered without what kvdoctor does not read "
                     f"({'; '.join([u.why for u in rendered.undecided] + rendered.unmatched)}): its workloads may "
                     "not all be known")  # fmt: skip
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
