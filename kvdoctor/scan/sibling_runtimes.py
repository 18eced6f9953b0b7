"""The KServe serving runtime an InferenceService given alone runs on, from the YAML files beside it: a folder of
manifests applied together (`kubectl apply -f DIR`, `oc apply -f DIR`) keeps the ServingRuntime next to the
InferenceService that names it, and a pre-commit hook or a user passes only the file that changed."""

from __future__ import annotations

import os
from pathlib import Path

from kvdoctor.scan import nodes
from kvdoctor.scan.documents import SKIP_DIRS, YAML_SUFFIXES, ManifestError, SourceFile, compose_documents
from kvdoctor.scan.kserve_runtimes import RUNTIME_KINDS, Runtime, runtime_for, runtimes_of

SIBLING_NOTE = ("its {kind} {name} is not in the scanned files: read from {file}, in the same repository (a folder "
                "of manifests is applied together, a GitOps tree installs its platform's runtimes)")
MAX_UP = 3
"""How far up from the InferenceService's folder the repository's root is looked for."""
MAX_FILES = 2000
"""YAML files read at most when the runtime is looked for in the repository."""


def sibling_runtime(file: str, model, namespace: str | None, scanned: set[str]) -> Runtime | None:
    """The runtime the model's predictor runs on, from a YAML file in the InferenceService's folder that was not
    scanned; None when no such file holds it (an unreadable or malformed sibling is passed over: it is not the
    input)."""
    if not Path(file).is_file():  # standard input, a chart's render: no folder to look in
        return None
    folder = Path(file).parent
    try:
        siblings = sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(YAML_SUFFIXES))
    except OSError:
        return None
    runtime = _runtime_in(siblings, file, model, namespace, scanned)
    if runtime is None and (name := nodes.text(nodes.get(model, "runtime"))):
        # a runtime the platform folder of the same repository holds (GitOps trees keep ClusterServingRuntimes apart)
        runtime = _runtime_in(_repository_yaml(folder, name), file, model, namespace, scanned)
    return runtime


def _repository_yaml(folder: Path, name: str) -> list[Path]:
    """The YAML files of the git checkout the folder lies in (its .git at most MAX_UP folders up; none outside a
    checkout) that mention `name`, at most MAX_FILES of them read."""
    root = next((p for p in [folder, *folder.parents][: MAX_UP + 1] if (p / ".git").exists()), None)
    if root is None:
        return []
    found, read = [], 0
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in SKIP_DIRS and not d.startswith("."))
        for entry in sorted(names):
            if not entry.endswith(YAML_SUFFIXES) or Path(directory) == folder:
                continue
            read += 1
            if read > MAX_FILES:
                return found
            path = Path(directory) / entry
            try:
                if name in path.read_text(encoding="utf-8", errors="replace"):
                    found.append(path)
            except OSError:
                continue
    return found


def _runtime_in(paths: list[Path], file: str, model, namespace: str | None, scanned: set[str]) -> Runtime | None:
    found: list[Runtime] = []
    for path in paths:
        if str(path) in scanned or path.resolve() == Path(file).resolve():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if not any(kind in text for kind in RUNTIME_KINDS):
            continue
        try:
            documents = compose_documents(SourceFile(str(path), text))
        except ManifestError:
            continue
        found += [r for doc in documents for r in runtimes_of(doc, text)]
    return runtime_for(model, namespace, found)


def model_of(root) -> tuple[object, str | None]:
    """(spec.predictor.model, metadata.namespace) of an InferenceService."""
    return nodes.get(root, "spec", "predictor", "model"), nodes.text(nodes.get(root, "metadata", "namespace"))
