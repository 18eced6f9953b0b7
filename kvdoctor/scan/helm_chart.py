"""Render a Helm chart directory as `helm template` would: Chart.yaml, values.yaml merged with the given values
files and --set style parameters, subcharts (charts/*/ and file:// dependencies) under their key, every template
under templates/ executed by the Go template engine; each output line keeps the template line that wrote it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import yaml

from kvdoctor.scan.gotemplate import ParseError, Renderer, TemplateError
from kvdoctor.scan.gotemplate.sourced import Origin, with_origin
from kvdoctor.scan.gotemplate.values import NO_VALUE, GoObject
from kvdoctor.scan.gotemplate.yaml_io import as_go

KUBE_VERSION = (1, 31, 0)
"""A recent Kubernetes the render assumes (.Capabilities.KubeVersion), as `helm template` without a cluster does."""
TEMPLATE_SUFFIXES = (".yaml", ".yml", ".tpl", ".txt", ".json")
VALUES_FILE = re.compile(r"^(?:.*[-_.])?values(?:[-_.].*)?\.ya?ml$")
MAX_SUBCHART_DEPTH = 5


NOT_FETCHED = "not rendered: dependency {} ("
"""How a dependency that charts/ lacks starts its render failure (then where from, and why)."""


class ChartError(Exception):
    """A chart that cannot be loaded at all (its Chart.yaml or values file is not YAML), one line."""


@dataclass(frozen=True)
class ChartSource:
    """A chart to render: its directory and the values files given over its values.yaml (helm -f)."""

    path: str
    """What the scan names as read: the values file, or the chart directory when rendered with its defaults."""
    chart: Path
    values_files: tuple[Path, ...] = ()


@dataclass(frozen=True)
class RenderedTemplate:
    template: Path
    """The template file (under the chart's or a subchart's templates/)."""
    name: str
    """Its name as Helm knows it (`CHART/templates/deployment.yaml`), as `origins` and `include` name it."""
    text: str
    """Its output, Helm's `<no value>` blanked as Helm blanks it."""
    origins: tuple[tuple[str, int], ...]
    """For each output line, the template (its Helm name) and line that wrote it."""
    value_sources: dict[int, list[tuple[Origin, str]]] = field(default_factory=dict)
    """Output line -> each value printed there with the values file line it was written on."""


@dataclass
class RenderedChart:
    chart: Path
    release: str
    templates: list[RenderedTemplate] = field(default_factory=list)
    failures: list[tuple[Path, int | None, str]] = field(default_factory=list)
    """Templates that could not be rendered: (file, line, why), e.g. `not rendered: function genCA`."""
    missing: list[tuple[str, str]] = field(default_factory=list)
    """Dependencies from a repository that charts/ lacks: (name, its key in the values: alias or name)."""


def chart_root(path: Path) -> Path | None:
    """The chart a file belongs to: the nearest directory above it (or itself) with Chart.yaml and templates/,
    unless the file is one of that chart's templates."""
    path = path.resolve()
    for directory in [path] + list(path.parents):
        if (directory / "Chart.yaml").is_file() and (directory / "templates").is_dir():
            return None if "templates" in path.relative_to(directory).parts[:1] else directory
    return None


def is_values_file(path: Path) -> bool:
    """values.yaml, values-prod.yaml, my-values.yml: a file a chart is rendered with (helm -f)."""
    return VALUES_FILE.match(path.name) is not None


def render_chart(chart: Path, values_files: Sequence[Path] = (), values: dict | None = None,
                 release: str | None = None, namespace: str = "default") -> RenderedChart:  # fmt: skip
    """Every template of the chart and its subcharts rendered with its values.yaml, then each values file, then
    `values` (an Argo CD Application's inline values and parameters) over them. Raises ChartError."""
    metadata = _load_yaml(chart / "Chart.yaml")
    release = release or str(metadata.get("name") or chart.name)
    user: dict = {}
    for values_file in values_files:
        user = merge_values(user, _load_values(values_file))
    user = merge_values(user, as_go(values or {}))
    result = RenderedChart(chart, release)
    renderer = Renderer()
    jobs = _parse_templates(renderer, _charts(chart, metadata, merge_values(_load_values(chart / "values.yaml"), user),
                                              0), release, namespace, result)  # fmt: skip
    for name, where, key in missing_dependencies(chart, metadata, merge_values(_load_values(chart / "values.yaml"),
                                                                                 user)):  # fmt: skip
        result.missing.append((name, key))
        result.failures.append((chart / "Chart.yaml", None, f"{NOT_FETCHED.format(name)}{where}) is not in "
                                f"charts/: its templates are not here (`helm dependency build` fetches it)"))
    for template, key, dot in jobs:
        try:
            output = renderer.render(key, dot)
        except TemplateError as exc:
            result.failures.append((template, exc.line, f"not rendered: {exc.unknown or exc}"))
            continue
        except RecursionError:
            result.failures.append((template, None, "not rendered: templates include each other too deeply"))
            continue
        text, origins = _blank_no_value(output.text()), tuple(output.line_origins())
        result.templates.append(RenderedTemplate(template, key, text, origins, output.value_sources()))
    return result


def _parse_templates(renderer: Renderer, charts: list, release: str, namespace: str,
                     result: RenderedChart) -> list[tuple[Path, str, dict]]:  # fmt: skip
    """Every file under each chart's templates/ parsed into the renderer under its Helm name (partials too, for
    their defines); (file, name, dot) of each one Helm renders (not _partials, not NOTES.txt)."""
    jobs: list[tuple[Path, str, dict]] = []
    for directory, chart_meta, chart_values, prefix in charts:
        for template in sorted((directory / "templates").rglob("*")):
            if not template.is_file() or not template.name.endswith(TEMPLATE_SUFFIXES):
                continue
            key = prefix + "/" + template.relative_to(directory).as_posix()
            try:
                renderer.add(key, template.read_text(encoding="utf-8"))
            except ParseError as exc:
                result.failures.append((template, exc.line, f"not rendered: {exc.problem}"))
                continue
            except (UnicodeDecodeError, OSError) as exc:
                why = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else exc.strerror or str(exc)
                result.failures.append((template, None, f"not rendered: {why}"))
                continue
            if not template.name.startswith("_") and template.name != "NOTES.txt":
                jobs.append((template, key, _top_level(chart_meta, chart_values, release, namespace, directory, key,
                                                        prefix)))  # fmt: skip
    return jobs


def _charts(directory: Path, metadata: dict, values: dict, depth: int, prefix: str | None = None):
    """(chart dir, Chart.yaml, values, template name prefix) of the chart and each enabled subchart under it."""
    prefix = prefix or str(metadata.get("name") or directory.name)
    found = [(directory, metadata, values, prefix)]
    if depth >= MAX_SUBCHART_DEPTH:
        return found
    for sub_dir, alias in _subchart_dirs(directory, metadata, values):
        sub_meta = _load_yaml(sub_dir / "Chart.yaml")
        key = alias or str(sub_meta.get("name") or sub_dir.name)
        own = values.get(key) if isinstance(values.get(key), dict) else {}
        sub_values = merge_values(_load_values(sub_dir / "values.yaml"), own)
        # Helm gives every subchart a `global` map (the parent's merged into its own), and the parent sees the
        # subchart's coalesced values under the subchart's key (`.Values.common.rbac` of a library's defaults)
        sub_values["global"] = merge_values(sub_values.get("global") or {}, values.get("global") or {})
        found += _charts(sub_dir, sub_meta, sub_values, depth + 1, f"{prefix}/charts/{key}")
        values[key] = sub_values
    return found


def _subchart_dirs(directory: Path, metadata: dict, values: dict) -> list[tuple[Path, str | None]]:
    """charts/*/ directories, and dependencies on `file://` paths (as `helm dependency build` copies them), each
    skipped when its `condition` is false in the parent's values."""
    dependencies = [d for d in metadata.get("dependencies") or [] if isinstance(d, dict)]
    by_name = {str(d.get("name")): d for d in dependencies}
    found: list[tuple[Path, str | None]] = []
    seen: set[Path] = set()
    for dependency in dependencies:
        repository = str(dependency.get("repository") or "")
        if repository.startswith("file://"):
            path = (directory / repository[len("file://") :]).resolve()
            if (path / "Chart.yaml").is_file():
                seen.add(path)
                found.append((path, dependency.get("alias")))
    charts = directory / "charts"
    if charts.is_dir():
        for path in sorted(charts.iterdir()):
            if path.name.endswith(".tgz") and path.is_file():
                path = _unpacked(path)
                if path is None:
                    continue
            if (path / "Chart.yaml").is_file() and path.resolve() not in seen:
                dependency = by_name.get(path.name, {})
                found.append((path, dependency.get("alias")))
    return [(path, alias) for path, alias in found if _enabled(by_name.get(path.name) or
                                                               _by_alias(dependencies, alias), values)]  # fmt: skip


def missing_dependencies(directory: Path, metadata: dict, values: dict) -> list[tuple[str, str, str]]:
    """(name, where from, its key in the values: alias or name) of each enabled dependency from a chart repository or
    OCI registry that charts/ lacks (neither unpacked nor a .tgz): Helm refuses to render without it, and its
    templates may build the workloads."""
    charts = directory / "charts"
    present = {p.name for p in charts.iterdir()} if charts.is_dir() else set()
    missing = []
    for dependency in metadata.get("dependencies") or []:
        if not isinstance(dependency, dict) or str(dependency.get("repository") or "").startswith("file://"):
            continue
        name = str(dependency.get("name") or "")
        if not name or not _enabled(dependency, values):
            continue
        if name in present or any(p.startswith(f"{name}-") and p.endswith(".tgz") for p in present):
            continue
        version = f" {dependency['version']}" if dependency.get("version") else ""
        missing.append((name, f"{dependency.get('repository') or 'no repository'}{version}",
                        str(dependency.get("alias") or name)))
    return missing


@lru_cache(maxsize=None)
def _unpacked(archive: Path) -> Path | None:
    """A packed subchart (charts/NAME-VERSION.tgz, as `helm dependency build` leaves it) unpacked once per process
    into a temporary folder removed at exit (data files only, nothing outside it): the chart directory inside, or
    None when it holds none."""
    import atexit
    import shutil
    import tarfile
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="kvdoctor-subchart-"))
    atexit.register(shutil.rmtree, folder, True)
    try:
        with tarfile.open(archive, "r:gz") as packed:
            packed.extractall(folder, filter="data")
    except (tarfile.TarError, OSError, EOFError):
        return None
    return next((p for p in sorted(folder.iterdir()) if (p / "Chart.yaml").is_file()), None)


def _by_alias(dependencies: list[dict], alias: str | None) -> dict:
    return next((d for d in dependencies if alias and d.get("alias") == alias), {})


def _enabled(dependency: dict, values: dict) -> bool:
    for condition in str(dependency.get("condition") or "").split(","):
        value: Any = values
        for key in condition.strip().split("."):
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, bool):
            return value  # Helm takes the first condition path that holds a boolean
    return True


def _top_level(metadata: dict, values: dict, release: str, namespace: str, directory: Path, key: str,
               prefix: str) -> dict:  # fmt: skip
    """The dot a template sees: .Values, .Release, .Chart, .Capabilities, .Files, .Template."""
    chart = GoObject("*chart.Metadata", {
        "Name": metadata.get("name"), "Version": str(metadata.get("version") or ""),
        "AppVersion": str(metadata.get("appVersion") or ""), "Description": metadata.get("description") or "",
        "Type": metadata.get("type") or "application", "APIVersion": metadata.get("apiVersion") or "v2",
        "Home": metadata.get("home") or "", "Icon": metadata.get("icon") or "",
        "Keywords": metadata.get("keywords") or [], "Sources": metadata.get("sources") or [],
        "Maintainers": metadata.get("maintainers") or [], "Annotations": metadata.get("annotations") or {},
        "KubeVersion": metadata.get("kubeVersion") or "", "Dependencies": metadata.get("dependencies") or [],
        "Deprecated": bool(metadata.get("deprecated")),
    }, {"IsRoot": lambda: "/charts/" not in key})  # fmt: skip
    major, minor, patch = KUBE_VERSION
    version = f"v{major}.{minor}.{patch}"
    kube = GoObject("chartutil.KubeVersion", {"Version": version, "Major": str(major), "Minor": str(minor),
                                              "GitVersion": version})  # fmt: skip
    api_versions = GoObject("chartutil.VersionSet", {}, {"Has": lambda _: False})
    capabilities = GoObject("*chartutil.Capabilities", {"KubeVersion": kube, "APIVersions": api_versions,
                                                        "HelmVersion": {"Version": "v3.16.0"}})  # fmt: skip
    release_object = {"Name": release, "Namespace": namespace, "Service": "Helm", "IsInstall": True,
                      "IsUpgrade": False, "Revision": 1}  # fmt: skip
    return {"Values": values, "Release": release_object, "Chart": chart, "Capabilities": capabilities,
            "Files": chart_files(directory), "Template": {"Name": key, "BasePath": prefix + "/templates"}}


# A quoted path or glob in a chart's templates (`.Files.Get "files/x.yaml"`, "patchGlob" "files/kserve/*-patch.yaml").
QUOTED_PATH = re.compile(r'"([\w.\-*?\[\]]+(?:/[\w.\-*?\[\]]+)+|[\w\-*?]+\.(?:ya?ml|json|sh|tpl|txt|conf))"')


def chart_data_files(directory: Path) -> list[Path]:
    """The chart's files that its templates name as data (.Files.Get / .Files.Glob paths written as strings in
    templates/): read through its render, where `tpl` fills their actions, never as manifests of their own."""
    import fnmatch

    patterns = set()
    for template in (directory / "templates").rglob("*"):
        if template.is_file():
            patterns |= set(QUOTED_PATH.findall(template.read_text(encoding="utf-8", errors="replace")))
    if not patterns:
        return []
    found = []
    for path in sorted(directory.rglob("*")):
        relative = path.relative_to(directory).as_posix()
        if path.is_file() and relative.split("/")[0] not in ("templates", "charts") and relative != "Chart.yaml" \
                and not is_values_file(path) and any(fnmatch.fnmatchcase(relative, pattern) for pattern in patterns):
            found.append(path)
    return found


def chart_files(directory: Path) -> GoObject:
    """.Files: the chart's files other than Chart.yaml, values*, templates/ and charts/ (Get, Glob, Lines)."""
    root = directory.resolve()

    def inside(name: str) -> Path | None:
        path = (root / name).resolve()
        if root not in path.parents or not path.is_file():
            return None
        relative = path.relative_to(root).parts
        if relative[0] in ("templates", "charts") or relative == ("Chart.yaml",) or relative == ("values.yaml",):
            return None
        return path

    def get(name: str) -> str:
        path = inside(name)
        return path.read_text(encoding="utf-8", errors="replace") if path else ""

    def glob(pattern: str) -> GoObject:
        names = sorted(p.relative_to(root).as_posix() for p in root.glob(pattern) if inside(str(p.relative_to(root))))
        contents = {n: get(n) for n in names}
        methods = {"Get": lambda n: contents.get(n, ""), "AsConfig": lambda: _as_yaml(contents),
                   "AsSecrets": lambda: _as_yaml(contents, encode=True)}  # fmt: skip
        return GoObject("files", contents, methods)

    return GoObject("files", {}, {"Get": get, "Glob": glob, "Lines": lambda n: get(n).split("\n"),
                                  "GetBytes": get, "AsConfig": lambda: "", "AsSecrets": lambda: ""})  # fmt: skip


def _as_yaml(contents: dict[str, str], encode: bool = False) -> str:
    import base64

    from kvdoctor.scan.gotemplate.yaml_io import to_yaml

    return to_yaml({Path(k).name: base64.b64encode(v.encode()).decode() if encode else v for k, v in contents.items()})


def merge_values(base: dict, override: dict) -> dict:
    """Helm's coalescing: the override wins, maps merge key by key, a null in the override deletes the key."""
    merged = dict(base)
    for key, value in override.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_values(merged[key], value)
        else:
            merged[key] = value
    return merged


def set_value(values: dict, key: str, text: str, force_string: bool = False) -> None:
    """`--set a.b[0].c=text` (Argo CD's helm.parameters): the value typed as Helm's --set types it (an integer,
    true/false, null, else a string) unless force_string."""
    value: Any = text
    if not force_string:
        value = {"true": True, "false": False, "null": None}.get(text, text)
        if isinstance(value, str) and re.fullmatch(r"[-+]?[0-9]+", text) and not re.fullmatch(r"[-+]?0[0-9]+", text):
            value = int(text)
    parts = re.findall(r"([^.\[\]]+)|\[(\d+)\]", key.replace("\\.", "\0"))
    target: Any = values
    steps = [(name.replace("\0", "."), int(index) if index else None) for name, index in parts]
    for at, (name, index) in enumerate(steps):
        last = at == len(steps) - 1
        if index is not None:
            while len(target) <= index:
                target.append(None)
            if last:
                target[index] = value
            else:
                target[index] = target[index] if isinstance(target[index], (dict, list)) else \
                    ([] if steps[at + 1][1] is not None else {})  # fmt: skip
                target = target[index]
            continue
        if last:
            target[name] = value
        else:
            nxt_is_index = steps[at + 1][1] is not None and not steps[at + 1][0]
            if not isinstance(target.get(name), (dict, list)):
                target[name] = [] if nxt_is_index else {}
            target = target[name]


def _load_yaml(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError, OSError) as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ChartError(f"{path}{f':{mark.line + 1}' if mark else ''}: malformed YAML") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ChartError(f"{path}: not a mapping of values")
    return as_go(loaded) if path.name != "Chart.yaml" else loaded


def _load_values(path: Path) -> dict:
    """A values file as Helm holds it (numbers float64), each string and number remembering its line."""
    plain = _load_yaml(path)
    if not plain:
        return plain
    try:
        root = yaml.compose(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return plain
    return _traced_values(plain, root, (_shown(path), 0))


def _traced_values(value: Any, node: yaml.Node | None, where: Origin) -> Any:
    """`value` (from safe_load) with its scalars given the lines of the matching nodes (merge keys: untraced)."""
    if isinstance(value, dict) and isinstance(node, yaml.MappingNode):
        by_key = {k.value: v for k, v in node.value if isinstance(k, yaml.ScalarNode)}
        return {k: _traced_values(v, by_key.get(k), where) for k, v in value.items()}
    if isinstance(value, list) and isinstance(node, yaml.SequenceNode) and len(node.value) == len(value):
        return [_traced_values(v, n, where) for v, n in zip(value, node.value)]
    if isinstance(node, yaml.ScalarNode):
        return with_origin(value, (where[0], node.start_mark.line + 1))
    return value


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _blank_no_value(text: str) -> str:
    """Helm's engine replaces every `<no value>` in the output with nothing."""
    return text.replace(NO_VALUE, "")


def chart_in_tree(start: Path, chart_path: str) -> Path | None:
    """The chart directory at `chart_path` from the repository root: the nearest directory above the object's
    file under which that path is a chart."""
    relative = chart_path.strip().lstrip("./") if not chart_path.startswith("../") else chart_path
    for directory in [start.resolve()] + list(start.resolve().parents):
        candidate = directory / relative
        if (candidate / "Chart.yaml").is_file() and (candidate / "templates").is_dir():
            return candidate
    return None


def safe_yaml(text: str) -> dict:
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError:
        return {}
    return loaded if isinstance(loaded, dict) else {}
