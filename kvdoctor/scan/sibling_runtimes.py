"""The KServe serving runtime an InferenceService given alone runs on, from the YAML files beside it: a folder of
manifests applied together (`kubectl apply -f DIR`, `oc apply -f DIR`) keeps the ServingRuntime next to the
InferenceService that names it, and a pre-commit hook or a user passes only the file that changed."""

from __future__ import annotations

from pathlib import Path

from kvdoctor.scan import nodes
from kvdoctor.scan.documents import YAML_SUFFIXES, ManifestError, SourceFile, compose_documents
from kvdoctor.scan.kserve_runtimes import RUNTIME_KINDS, Runtime, runtime_for, runtimes_of

SIBLING_NOTE = ("its {kind} {name} is not in the scanned files: read from {file}, beside it (a folder of manifests "
                "is applied together)")


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
    found: list[Runtime] = []
    for path in siblings:
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
