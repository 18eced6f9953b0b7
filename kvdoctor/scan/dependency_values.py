"""An umbrella chart whose dependency is not in charts/ (`helm dependency build` fetches it from its repository) but
is a chart kvdoctor reads by its values alone: production-stack's `vllm-stack` (helm_values.py) and bjw-s
`app-template` (app_template.py). The values under the dependency's key (its alias, else its name), from the last
values file that sets it, are read as that chart's; its workloads sit on those lines."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import yaml

from kvdoctor.scan import app_template, helm_values, nodes
from kvdoctor.scan.documents import Document, ReadDocument, display_path
from kvdoctor.scan.workload import Workload

READ_BY_VALUES = ("vllm-stack", app_template.CHART)


def workloads(chart: Path, values_files: tuple[Path, ...], missing: list[tuple[str, str]], release: str,
              namespace: str, read_document: ReadDocument) -> tuple[list[Workload], list[str]]:  # fmt: skip
    """The workloads of the missing dependencies ((name, key in the values)) read by their values, and the names of
    those read."""
    found: list[Workload] = []
    read: list[str] = []
    for name, key in missing:
        if name not in READ_BY_VALUES:
            continue
        located = _values_node(chart, values_files, key)
        if located is None:
            continue
        file, text, node = located
        doc = Document(file, 0, node)
        if name == app_template.CHART:
            workloads_here = app_template.workloads(node, release, namespace, doc, text, read_document)
        else:
            workloads_here = helm_values.workloads(doc, text) if helm_values.is_production_stack_values(node) else []
        if workloads_here:
            read.append(name)
            note = (f"dependency {name} of chart {display_path(chart)} is not in its charts/: its values "
                    f"(`{key}:` in {display_path(Path(file))}) read as {name}'s")  # fmt: skip
            found += [replace(w, notes=w.notes + (note,)) for w in workloads_here]
    return found, read


def _values_node(chart: Path, values_files: tuple[Path, ...], key: str) -> tuple[str, str, yaml.Node] | None:
    for path in reversed((chart / "values.yaml",) + tuple(values_files)):
        try:
            text = path.read_text(encoding="utf-8")
            root = yaml.compose(text, Loader=yaml.SafeLoader)
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        node = nodes.get(root, key)
        if nodes.is_map(node):
            return str(path), text, node
    return None
