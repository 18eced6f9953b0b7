"""A Terraform `helm_release` of a chart in the scanned tree (`chart = "./vllm-chart"`): the chart rendered as the
helm provider installs it (registry.terraform.io/providers/hashicorp/helm, resource helm_release): its `name` and
`namespace`, its `values` list (heredocs, `file("...")` of a file in the tree; later entries win) and its `set` /
`set_string` entries (blocks, or the provider 3.x list of objects). A chart from a repository, or one not in the
tree, is named in a note instead (terraform.py)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import yaml

from kvdoctor.scan import hcl, nodes
from kvdoctor.scan.chart_reader import ChartRelease, chart_workloads
from kvdoctor.scan.documents import Document, ReadDocument
from kvdoctor.scan.helm_chart import ChartSource, chart_in_tree, merge_values, safe_yaml, set_value
from kvdoctor.scan.result import UnreadFile
from kvdoctor.scan.workload import Workload

FILE_CALL = re.compile(r'^\$\{\s*file\(\s*"(?P<path>[^"]+)"\s*\)\s*\}$')
ENCODED = re.compile(r"^\$\{\s*(?:yamlencode|jsonencode)\((?P<body>.*)\)\s*\}$", re.DOTALL)
"""`yamlencode({ servingEngineSpec = {...} })` as the HCL reader keeps it: an HCL object to read as the values."""
"""`file("${path.module}/values.yaml")` as the HCL reader keeps it (an expression it does not evaluate)."""
MODULE_PATH = re.compile(r"\$\{\s*path\.(?:module|root|cwd)\s*\}/?")


def local_chart(body: yaml.Node, file: str) -> Path | None:
    """The chart directory a helm_release installs when it is in the tree (no `repository`, a path)."""
    chart = nodes.text(nodes.get(body, "chart"))
    if not chart or nodes.text(nodes.get(body, "repository")) or hcl.is_unknown(chart):
        return None
    return chart_in_tree(Path(file).parent, MODULE_PATH.sub("", chart))


def release_workloads(labels: list[str], body: yaml.Node, file: str,
                      read_document: ReadDocument) -> tuple[list[Workload], list[UnreadFile]]:  # fmt: skip
    """The vLLM workloads of the chart a helm_release in the tree installs, and its templates that fail to render."""
    chart = local_chart(body, file)
    if chart is None:
        return [], []
    resource = labels[1] if len(labels) > 1 else ""
    name = nodes.text(nodes.get(body, "name"))
    release_name = name if name and not hcl.is_unknown(name) else resource
    namespace = nodes.text(nodes.get(body, "namespace"))
    namespace = namespace if namespace and not hcl.is_unknown(namespace) else "default"
    via = f"Terraform helm_release {resource} ({file}:{nodes.line(body)})"
    release = ChartRelease(release_name, namespace, _values(body, Path(file).parent), via)
    return chart_workloads(ChartSource(file, chart, ()), read_document, release=release)


def _values(body: yaml.Node, module: Path) -> dict:
    """The release's values over the chart's own: each `values` entry in order, then `set` / `set_string`."""
    values: dict = {}
    for item in nodes.items(nodes.get(body, "values")):
        text = nodes.text(item) or ""
        if (call := FILE_CALL.match(text)) is not None:
            path = module / MODULE_PATH.sub("", call["path"])
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
        if (encoded := ENCODED.match(text.strip())) is not None:
            values = merge_values(values, _hcl_object(encoded["body"]))
            continue
        values = merge_values(values, safe_yaml(text))
    for key, force_string in (("set", False), ("set_string", True)):
        entries = [entry for _, entry in hcl.blocks(body, key)] + nodes.items(nodes.get(body, key))
        for entry in entries:
            name, value = nodes.text(nodes.get(entry, "name")), nodes.text(nodes.get(entry, "value"))
            kind = nodes.text(nodes.get(entry, "type"))
            if name and value is not None and not hcl.is_unknown(name):
                set_value(values, name, value, force_string or kind == "string")
    return values


def _hcl_object(body: str) -> dict:
    """An HCL object expression as plain values; {} when it does not parse or holds expressions (unknown here)."""
    try:
        value = nodes.plain(nodes.get(hcl.parse("values = " + body), "values"))
    except hcl.HclError:
        return {}
    return value if isinstance(value, dict) else {}


def remote_values_workloads(labels: list[str], body: yaml.Node, file: str,
                            read_document: ReadDocument) -> list[Workload]:  # fmt: skip
    """A helm_release of a chart from a repository (not in the tree) whose values kvdoctor reads as that chart's
    (production-stack's servingEngineSpec, vLLM's own chart): the workloads those values give, noted; the values'
    lines are the helm_release's."""
    if local_chart(body, file) is not None or not nodes.text(nodes.get(body, "repository")):
        return []
    values = _values(body, Path(file).parent)
    if not values:
        return []
    line = nodes.line(body) or 1
    root = yaml.compose("\n" * (line - 1) + yaml.safe_dump({"placed": values}, default_flow_style=True, width=10**9),
                        Loader=yaml.SafeLoader)  # one line: every value on the helm_release's line
    chart = nodes.text(nodes.get(body, "chart")) or "?"
    resource = labels[1] if len(labels) > 1 else ""
    note = (f"Terraform helm_release {resource} ({file}:{line}) installs chart {chart} from "
            f"{nodes.text(nodes.get(body, 'repository'))}, not in the scanned tree: its values (values, set) read as "
            "that chart's, each placed at the helm_release")  # fmt: skip
    found = read_document(Document(file, 0, nodes.get(root, "placed")), "")
    return [replace(w, notes=w.notes + (note,)) for w in found]
