"""An Argo CD Application, a Flux HelmRelease or a helmfile's release whose chart is in the scanned tree: the chart
rendered as that controller installs it (its release name, namespace, value files, inline values and parameters)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import yaml

from kvdoctor.scan import app_template, hcl, nodes, terraform_helm
from kvdoctor.scan.chart_reader import ChartRelease, chart_workloads
from kvdoctor.scan.documents import (HCL_SUFFIXES, Document, ManifestError, ReadDocument, SourceFile,
                                     compose_documents)
from kvdoctor.scan.helm_chart import ChartSource, chart_in_tree, merge_values, safe_yaml, set_value
from kvdoctor.scan.result import UnreadFile
from kvdoctor.scan.workload import Workload


RELEASE_APIS = re.compile(r"\bargoproj\.io/|\bhelm\.toolkit\.fluxcd\.io/")


def is_helm_release(root: yaml.Node, file: str = "") -> bool:
    """An Argo CD Application (spec.source or spec.sources), a Flux HelmRelease, or a helmfile (its releases)."""
    api = nodes.text(nodes.get(root, "apiVersion")) or ""
    kind = nodes.text(nodes.get(root, "kind"))
    return (kind == "Application" and api.startswith("argoproj.io/")) or \
        (kind == "HelmRelease" and api.startswith("helm.toolkit.fluxcd.io/")) or is_helmfile(root, file)  # fmt: skip


def is_helmfile(root: yaml.Node, file: str) -> bool:
    """A helmfile (helmfile.yaml, helmfile.d/*.yaml): a `releases` list whose items name a chart."""
    named = Path(file).name.startswith("helmfile") or Path(file).parent.name == "helmfile.d"
    return named and any(nodes.get(item, "chart") is not None for item in nodes.items(nodes.get(root, "releases")))


def _controller(doc: Document) -> tuple[str, str]:
    """(the words for what installs the chart, its name) of an Argo CD Application, a Flux HelmRelease, a helmfile."""
    kind = nodes.text(nodes.get(doc.root, "kind"))
    name = nodes.text(nodes.get(doc.root, "metadata", "name")) or "(unnamed)"
    if is_helmfile(doc.root, doc.file):
        return "helmfile", Path(doc.file).name
    return f"{'Argo CD' if kind == 'Application' else 'Flux'} {kind}", name


def _plans(doc: Document, name: str) -> list[tuple[str, list[str], ChartRelease]]:
    if is_helmfile(doc.root, doc.file):
        return _helmfile_plans(doc)
    kind = nodes.text(nodes.get(doc.root, "kind"))
    return _argo_plans(doc, name) if kind == "Application" else _flux_plans(doc, name)


def release_workloads(doc: Document, read_document: ReadDocument,
                      text: str = "") -> tuple[list[Workload], list[UnreadFile], list[str]]:  # fmt: skip
    """The workloads of the chart the object installs, its render failures, and a note when its chart is not in
    the scanned tree (a chart repository or another Git repository): its inline values are read when they are a
    chart's kvdoctor reads by its values (production-stack's servingEngineSpec, vLLM's own chart, bjw-s app-template),
    else not checked."""
    kind = nodes.text(nodes.get(doc.root, "kind"))
    what, name = _controller(doc)
    via = f"{what} {name} ({doc.file}:{nodes.line(doc.root)})"
    plans = _plans(doc, name)
    found: list[Workload] = []
    unread: list[UnreadFile] = []
    notes: list[str] = []
    for chart_path, values_files, release in plans:
        chart = chart_in_tree(Path(doc.file).parent, chart_path)
        if chart is None:
            inline = _inline_values(doc, kind, release.name)
            if inline is None:
                by_values = []
            elif app_template.is_app_template(chart_path.split(" from ")[0]):
                by_values = app_template.workloads(inline, release.name or name, release.namespace, doc, text,
                                                   read_document)  # fmt: skip
            else:
                by_values = read_document(Document(doc.file, doc.index, inline), text)
            if by_values:
                note = (f"{via} installs chart {chart_path}, which is not in the scanned tree: its inline values "
                        "read as that chart's values")  # fmt: skip
                found += [replace(w, notes=w.notes + (note,)) for w in by_values]
                continue
            notes.append(f"{via} installs chart {chart_path}, which is not in the scanned tree: not checked (scan the "
                         "chart's directory with --values)")  # fmt: skip
            continue
        files = tuple(p for f in values_files if (p := (chart / f)).is_file())
        notes += [f"{via}: value file {f} is not in the scanned tree (relative to {chart_path}): rendered without it"
                  for f in values_files if not (chart / f).is_file()]  # fmt: skip
        installed = ChartRelease(release.name, release.namespace, release.values, via)
        workloads, failures = chart_workloads(ChartSource(doc.file, chart, files), read_document, release=installed)
        found += workloads
        unread += failures
    return found, unread, notes


def _inline_values(doc: Document, kind: str | None, release: str | None = None) -> yaml.Node | None:
    """The values an Argo CD Application (helm.valuesObject, or helm.values on the file's lines), a Flux
    HelmRelease (spec.values) or a helmfile's release (a map in its values list) gives inline, as a node; None when
    it gives none."""
    if is_helmfile(doc.root, doc.file):
        for item in nodes.items(nodes.get(doc.root, "releases")):
            if nodes.text(nodes.get(item, "name")) == release:
                return next((v for v in nodes.items(nodes.get(item, "values")) if nodes.is_map(v)), None)
        return None
    spec = nodes.get(doc.root, "spec")
    if kind != "Application":
        values = nodes.get(spec, "values")
        return values if nodes.is_map(values) else None
    sources = nodes.items(nodes.get(spec, "sources")) or [s for s in [nodes.get(spec, "source")] if s is not None]
    for source in sources:
        helm = nodes.get(source, "helm")
        if nodes.is_map(obj := nodes.get(helm, "valuesObject")):
            return obj
        text = nodes.get(helm, "values")
        if nodes.is_scalar(text) and isinstance(text.value, str):
            first = nodes.text_line(text)
            try:
                root = yaml.compose("\n" * (first - 1) + text.value, Loader=yaml.SafeLoader)
            except yaml.YAMLError:
                continue
            if nodes.is_map(root):
                return root
    return None


def _argo_plans(doc: Document, app_name: str) -> list[tuple[str, list[str], ChartRelease]]:
    spec = nodes.get(doc.root, "spec")
    namespace = nodes.text(nodes.get(spec, "destination", "namespace")) or "default"
    sources = nodes.items(nodes.get(spec, "sources")) or [s for s in [nodes.get(spec, "source")] if s is not None]
    plans = []
    for source in sources:
        path = nodes.text(nodes.get(source, "path"))
        if path is None:
            chart = nodes.text(nodes.get(source, "chart"))
            if chart is not None:  # from a chart repository: its inline values may still be read (app-template)
                release = nodes.text(nodes.get(source, "helm", "releaseName")) or app_name
                plans.append((f"{chart} from {nodes.text(nodes.get(source, 'repoURL'))}", [],
                              ChartRelease(release, namespace)))  # fmt: skip
            continue
        helm = nodes.get(source, "helm")
        values: dict = {}
        inline = nodes.plain(nodes.get(helm, "values"))
        if isinstance(inline, str):
            loaded = safe_yaml(inline)
            values = merge_values(values, loaded)
        obj = nodes.plain(nodes.get(helm, "valuesObject"))
        if isinstance(obj, dict):
            values = merge_values(values, obj)
        for parameter in nodes.items(nodes.get(helm, "parameters")):
            key, value = nodes.text(nodes.get(parameter, "name")), nodes.text(nodes.get(parameter, "value"))
            if key:
                set_value(values, key, value or "", nodes.text(nodes.get(parameter, "forceString")) == "true")
        value_files = [t for item in nodes.items(nodes.get(helm, "valueFiles")) if (t := nodes.text(item))]
        release = nodes.text(nodes.get(helm, "releaseName")) or app_name
        plans.append((path, value_files, ChartRelease(release, namespace, values)))
    return plans


def _flux_plans(doc: Document, name: str) -> list[tuple[str, list[str], ChartRelease]]:
    spec = nodes.get(doc.root, "spec")
    chart = nodes.text(nodes.get(spec, "chart", "spec", "chart")) or nodes.text(nodes.get(spec, "chartRef", "name"))
    if chart is None:
        return []
    target = nodes.text(nodes.get(spec, "targetNamespace"))
    namespace = target or nodes.text(nodes.get(doc.root, "metadata", "namespace")) or "default"
    release = nodes.text(nodes.get(spec, "releaseName")) or (f"{target}-{name}" if target else name)
    values = nodes.plain(nodes.get(spec, "values"))
    listed = nodes.items(nodes.get(spec, "chart", "spec", "valuesFiles"))
    value_files = [t for item in listed if (t := nodes.text(item))]
    return [(chart, value_files, ChartRelease(release, namespace, values if isinstance(values, dict) else {}))]


def _helmfile_plans(doc: Document) -> list[tuple[str, list[str], ChartRelease]]:
    """Each release of a helmfile: its chart, its value files (relative to the helmfile, given as absolute paths),
    and its name, namespace, inline values and `set` items (a templated .gotmpl value file is not read)."""
    here = Path(doc.file).parent
    default_namespace = nodes.text(nodes.get(doc.root, "helmDefaults", "namespace")) or "default"
    plans = []
    for item in nodes.items(nodes.get(doc.root, "releases")):
        chart = nodes.text(nodes.get(item, "chart"))
        if chart is None:
            continue
        name = nodes.text(nodes.get(item, "name")) or Path(chart).name
        values: dict = {}
        files = []
        for entry in nodes.items(nodes.get(item, "values")):
            if nodes.is_map(entry) and isinstance(plain := nodes.plain(entry), dict):
                values = merge_values(values, plain)
            elif (path := nodes.text(entry)) is not None:
                files.append(str(here / path))
        for entry in nodes.items(nodes.get(item, "set")):
            key, value = nodes.text(nodes.get(entry, "name")), nodes.text(nodes.get(entry, "value"))
            if key:
                set_value(values, key, value or "")
        namespace = nodes.text(nodes.get(item, "namespace")) or default_namespace
        plans.append((chart, files, ChartRelease(name, namespace, values)))
    return plans


def installed_charts_left_out(sources: list) -> tuple[list, list[str], set[Path]]:
    """The scan's sources without the charts that an Argo CD Application, a Flux HelmRelease, a helmfile or a
    Terraform helm_release in the scan installs (their values are the release's; the chart's defaults alone run
    nowhere), a note for each chart left out so, and the value files (resolved) those releases give: read through
    the release, not as documents of their own."""
    installed: dict[Path, str] = {}
    used: set[Path] = set()  # the value files those releases give
    for source in sources:
        if isinstance(source, SourceFile):
            charts, files = _charts_installed_by(source)
            installed |= charts
            used |= files
    if not installed:
        return sources, [], used
    kept, notes = [], []
    for source in sources:
        by = installed.get(source.chart.resolve()) if isinstance(source, ChartSource) else None
        if by is None or any(Path(f).resolve() not in used for f in source.values_files):
            kept.append(source)
            continue
        alone = "with the value files it gives" if source.values_files else "not with its defaults alone"
        notes.append(f"{source.path}: the chart is rendered as {by} installs it, {alone}")
    return kept, notes, used


def _charts_installed_by(source: SourceFile) -> tuple[dict[Path, str], set[Path]]:
    """Chart directory -> the release in this file that installs it (only charts in the tree), and the value files
    those releases give."""
    found: dict[Path, str] = {}
    files: set[Path] = set()
    if source.path.endswith(HCL_SUFFIXES) and "helm_release" in source.text:
        try:
            root = hcl.parse(source.text, source.path)
        except hcl.HclError:
            return {}, files
        for labels, body in hcl.blocks(root, "resource"):
            if labels[:1] == ["helm_release"] and (chart := terraform_helm.local_chart(body, source.path)):
                found[chart.resolve()] = f"Terraform helm_release {labels[1] if len(labels) > 1 else ''}"
        return found, files
    if not RELEASE_APIS.search(source.text) and not Path(source.path).name.startswith("helmfile") \
            and Path(source.path).parent.name != "helmfile.d":
        return {}, files
    try:
        documents = compose_documents(source)
    except ManifestError:
        return {}, files
    for doc in documents:
        if not is_helm_release(doc.root, doc.file):
            continue
        what, name = _controller(doc)
        for chart_path, values_files, _ in _plans(doc, name):
            if (chart := chart_in_tree(Path(doc.file).parent, chart_path)) is not None:
                found[chart.resolve()] = f"{what} {name}"
                files |= {(chart / f).resolve() for f in values_files}
    return found, files
