"""A Helm chart found by scan, rendered (helm_chart.py) and read by the Kubernetes readers: each workload placed
on the template lines that wrote it, each template that cannot be rendered reported on its own."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from kvdoctor.scan.documents import (ManifestError, ReadDocument, SourceFile, compose_documents,
                                     display_path)
from kvdoctor.scan.helm_chart import NOT_FETCHED, ChartError, ChartSource, render_chart
from kvdoctor.scan.result import UnreadFile
from kvdoctor.scan.workload import LINE_FILE_STRIDE, EnvVar, GpuSelector, Workload

RENDER_HINT = "kvdoctor renders charts itself; check it with: helm template RELEASE CHART -f values.yaml"


@dataclass(frozen=True)
class ChartRelease:
    """How the chart is installed: the release name and namespace, inline values, and who asks (Argo CD...)."""

    name: str | None = None
    namespace: str = "default"
    values: dict | None = None
    via: str | None = None
    """e.g. "Argo CD Application vllm (apps/vllm.yaml:1)"."""




def chart_workloads(source: ChartSource, read_document: ReadDocument, extra_values: tuple[Path, ...] = (),
                    release: ChartRelease = ChartRelease()) -> tuple[list[Workload], list[UnreadFile]]:  # fmt: skip
    """The vLLM workloads of the chart's rendered templates, and each template that could not be rendered."""
    values_files = source.values_files + tuple(extra_values)
    try:
        rendered = render_chart(source.chart, list(values_files), release.values, release.name, release.namespace)
    except ChartError as exc:
        return [], [UnreadFile.of(ManifestError(str(exc), RENDER_HINT))]
    failures = rendered.failures
    by_values: list[Workload] = []
    if rendered.missing:  # a dependency kvdoctor reads by its values alone (production-stack, app-template)
        from kvdoctor.scan import dependency_values

        by_values, read = dependency_values.workloads(source.chart, values_files, rendered.missing, rendered.release,
                                                      release.namespace, read_document)  # fmt: skip
        failures = [f for f in failures if not any(f[2].startswith(NOT_FETCHED.format(n)) for n in read)]
    unread = [UnreadFile.of(ManifestError(f"{display_path(file)}{f':{line}' if line else ''}: {why}", RENDER_HINT))
              for file, line, why in failures]  # fmt: skip
    shown_values = ", ".join(display_path(v) for v in values_files) or "its values.yaml"
    note = (f"rendered from Helm chart {display_path(source.chart)} (release {rendered.release}) with "
            f"{shown_values}{f', by {release.via}' if release.via else ''}")  # fmt: skip
    found: list[Workload] = list(by_values)
    for template in rendered.templates:
        shown = display_path(template.template)
        try:
            documents = compose_documents(SourceFile(shown, template.text))
        except ManifestError as exc:
            unread.append(UnreadFile.of(ManifestError(f"{shown}: rendered, but the output is not YAML "
                                                      f"({exc.message.split(': ', 1)[-1]})", RENDER_HINT)))  # fmt: skip
            continue
        lines = _line_map(template.origins, template.name)
        for doc in documents:
            for workload in read_document(doc, template.text):
                behind = _values_behind(workload, template.value_sources)
                found.append(replace(_relocated(workload, lines), notes=workload.notes + (note,) + behind))
    return found, unread


def _values_behind(workload: Workload, sources: dict[int, list[tuple[tuple[str, int], str]]]) -> tuple[str, ...]:
    """A note naming the values file line of each value the command, image and GPU request were printed from."""
    lines = [t.line for t in workload.argv] + [workload.image_line, workload.gpu_limit_line] + \
        [s.line for s in workload.gpu_selectors]  # fmt: skip
    seen: list[str] = []
    for line in lines:
        for (file, at), text in sources.get(line, []) if line is not None else []:
            shown = f"{text.strip()} ({file}:{at})"
            if text.strip() and shown not in seen:
                seen.append(shown)
    return (f"values behind it: {', '.join(seen)}",) if seen else ()


def _line_map(origins: tuple[tuple[str, int], ...], template: str) -> Callable[[int | None], int | None]:
    """Rendered line -> the template's line that wrote it (None when another file wrote it)."""

    def line(rendered: int | None) -> int | None:
        if rendered is not None and rendered >= LINE_FILE_STRIDE:
            return rendered  # a line of another file the workload reads (a script its image copies in), kept as it is
        if rendered is None or not origins:
            return None
        file, at = origins[min(rendered, len(origins)) - 1]
        return at if file == template else None

    return line


def _relocated(workload: Workload, line: Callable[[int | None], int | None]) -> Workload:
    """The workload with every line moved from the rendered output to the template."""
    return replace(
        workload, line=line(workload.line), image_line=line(workload.image_line),
        argv=tuple(replace(t, line=line(t.line)) for t in workload.argv), command_line=line(workload.command_line),
        env=tuple(EnvVar(e.name, e.value, line(e.line), e.source) for e in workload.env),
        gpu_selectors=tuple(GpuSelector(s.key, s.values, line(s.line), s.required) for s in workload.gpu_selectors),
        gpu_limit_line=line(workload.gpu_limit_line), vllm_pin_line=line(workload.vllm_pin_line),
    )  # fmt: skip

