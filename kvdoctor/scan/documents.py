"""Read manifest files into YAML node trees that keep every value's line (safe composer only)."""

from __future__ import annotations

import bisect
import os
import re
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import yaml

from kvdoctor.base.errors import KvdoctorError
from kvdoctor.base.yaml_safe import (MAX_EXPANDED_NODES, MAX_FLOW_DEPTH, expands_too_far, has_aliases,
                                     load_yaml_cached, safe_loader, too_deeply_nested)
from kvdoctor.data import read_data
from kvdoctor.base.special_files import special_kind
from kvdoctor.scan.helm_chart import ChartSource, chart_data_files, chart_root, is_values_file
from kvdoctor.scan.nearby_charts import chart_for_values

MAX_MANIFEST_BYTES = 8 * 1024 * 1024
YAML_SUFFIXES = (".yaml", ".yml", ".yaml.tftpl", ".yml.tftpl")
SCRIPT_SUFFIXES = (".sh", ".bash", ".ps1")  # a PowerShell script's docker run reads as a shell's
JOB_SCRIPT_SUFFIXES = (".sbatch", ".slurm", ".pbs", ".qsub", ".lsf", ".job", ".sub", ".batch")
"""Batch-scheduler job scripts (Slurm, PBS, LSF, HTCondor): shell scripts a walk reads when they name vLLM; so is a
file with no suffix that starts with a shell's #! line (`serve_vllm`)."""
SHELL_SHEBANG = re.compile(rb"^#!\s*\S*(?:/|env\s+)(?:ba|da|z|k)?sh\b")
PYTHON_SUFFIX = ".py"
CODE_SUFFIXES = (".js", ".cjs", ".mjs", ".ts", ".mts", ".cts")
"""JavaScript and TypeScript: PM2's ecosystem files are read (scan/pm2.py), other programs that launch vLLM named."""
VLLM_LAUNCH_TEXT = re.compile(r"vllm\s+serve\b|vllm/vllm-openai|vllm\.entrypoints")
UNIT_SUFFIX = ".service"
"""A systemd service unit (scan/systemd_units.py)."""
UNIT_TEMPLATE_SUFFIXES = tuple(UNIT_SUFFIX + suffix for suffix in (".template", ".tmpl", ".tpl", ".in", ".example"))
"""A unit kept with placeholders for an installer to fill (`vllm.service.template`, autotools' `.service.in`)."""
QUADLET_SUFFIX = ".container"
"""A Podman Quadlet container unit (scan/quadlets.py)."""
APPTAINER_DEFINITION_SUFFIX = ".def"
"""An Apptainer/Singularity definition file (scan/apptainer_defs.py); a walk reads those whose `Bootstrap:` header
opens them and that name vLLM."""
BOOTSTRAP_HEADER = re.compile(r"^\s*Bootstrap:\s*(\S+)", re.IGNORECASE | re.MULTILINE)


def is_apptainer_definition(text: str) -> bool:
    """A definition file's text: its header names the bootstrap agent before any %section."""
    return BOOTSTRAP_HEADER.search(text.split("\n%", 1)[0]) is not None
SUPERVISORD_SUFFIXES = (".conf", ".ini")
"""supervisord's configuration (scan/supervisord.py); a walk reads those that hold a [program:] naming vLLM."""
JINJA_SUFFIXES = (".j2", ".jinja2", ".jinja")
JINJA_TEMPLATES = tuple(kind + suffix for kind in (UNIT_SUFFIX, ".yaml", ".yml", ".sh", ".bash") for suffix in JINJA_SUFFIXES)
"""An Ansible role's Jinja2 template of a file scan reads (scan/ansible_templates.py): a unit, YAML, a script. A bare
`.jinja` file is a chat template, not read."""
HCL_SUFFIXES = (".tf", ".nomad", ".hcl")
NIX_SUFFIX = ".nix"
"""A NixOS module (scan/nix_containers.py); a walk reads those that name vLLM, as for HCL."""
"""Terraform and Nomad job files (HCL); a walk reads those that name vLLM, the rest are infrastructure."""
# A Python file a walk reads: one that names vLLM or Ray Serve LLM (a Modal / Ray Serve app); the rest of a tree's
# Python is code, not deployment, and is skipped without a word.
PYTHON_DEPLOYMENT = re.compile(r"vllm|ray\.serve\.llm", re.IGNORECASE)
PYTHON_TESTS = re.compile(r"^(?:test_.*|.*_test|conftest)\.py$")
TEST_DIRS = {"test", "tests", "testing"}
MAKEFILE_NAMES = re.compile(r"^(?:GNUmakefile|[Mm]akefile)(?:\..+)?$|\.mk$")
# Dockerfile, Containerfile, Dockerfile.gpu, vllm.Dockerfile and the -/_ spellings: Dockerfile-cuda, vllm_Containerfile
DOCKERFILE_NAMES = re.compile(r"^(?:Dockerfile|Containerfile)(?:[._-].+)?$|[._-](?:Dockerfile|Containerfile)$")
TERRAFORM_TEMPLATE = ".tftpl"
# A Terraform templatefile() directive alone on its line (%{ for x in xs ~}, %{ endfor }): it repeats or drops the
# lines around it, so it is read as a blank line and the ${...} interpolations stay variables, unknown here.
TERRAFORM_DIRECTIVE_LINE = re.compile(r"^[ \t]*%\{[^\n]*\}[ \t]*$", re.MULTILINE)
WALKED_DOT_DIRS = {".github"}  # GitHub Actions workflows and composite actions; other dot directories are tooling
SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".tox", ".mypy_cache",
             ".pytest_cache", ".terraform", "vendor"}  # fmt: skip
# A Go/Helm template action; Jinja chat templates in ConfigMaps ({{ message['content'] }}) do not match.
TEMPLATE = re.compile(
    r"\{\{-?\s*(?:\.[A-Za-z]|\$|(?:include|template|toYaml|toJson|if|else|end|range|with|define|required|default"
    r"|tpl|printf|quote|nindent|indent)\b)"
)
STDIN = "-"
KUSTOMIZATION_WITHOUT_SUFFIX = "Kustomization"
"""The one kustomization file name without .yaml (kubectl kustomize reads it too)."""


if TYPE_CHECKING:
    from kvdoctor.scan.workload import Workload


class ManifestError(KvdoctorError):
    """A manifest kvdoctor cannot read; the message starts with file:line."""


@dataclass(frozen=True)
class SourceFile:
    path: str
    """As given or found (relative to the working directory when under it); '-' for stdin is named '<stdin>'."""
    text: str
    data_of: str | None = None
    """The chart whose templates read this file as data (.Files.Get / .Files.Glob), when it lies in one."""


@dataclass(frozen=True)
class Document:
    file: str
    index: int
    """0-based position in a multi-document file."""
    root: yaml.Node
    line_files: tuple[str, ...] = ()
    """Other files some of its nodes are written in (a Kustomize render): see workload.LINE_FILE_STRIDE."""


ReadDocument = Callable[["Document", str], "list[Workload]"]
"""The scan's reader of one parsed document (scan/run.py read_document), handed to the readers of charts and
releases that read the documents they render."""


def discover(paths: list[str]) -> tuple[list[SourceFile | ChartSource | ManifestError], list[str]]:
    """Files to scan (a ManifestError in place of each one that cannot be read; a Helm chart to render for a chart
    directory and for a values file in one) and notes on what a directory walk skipped; raises ManifestError for a
    path that does not exist."""
    files: list[SourceFile | ChartSource | ManifestError] = []
    notes: list[str] = []
    roots = tuple(Path(given).resolve() for given in paths if given != STDIN)
    for given in paths:
        if given == STDIN:
            files.append(_or_error(lambda: SourceFile("<stdin>", _checked_text("<stdin>", sys.stdin.read()))))
            continue
        path = Path(given)
        if path.is_dir():
            files += _walk(path, notes)
        elif path.is_file() and (chart := _values_chart(path, roots)) is not None:
            files.append(chart)
        elif path.is_file():
            files.append(_or_error(lambda: _read(path)))
        elif kind := special_kind(path):  # a FIFO, a socket, a device: named, never read
            raise ManifestError(f"{given}: not a regular file ({kind})")
        else:
            raise ManifestError(f"{given}: no such file or directory")
    return files, notes


def _or_error(read) -> SourceFile | ManifestError:
    try:
        return read()
    except ManifestError as exc:
        return exc


def names_vllm_deployment(text: str) -> bool:
    return PYTHON_DEPLOYMENT.search(text) is not None


LOCAL_MODULE_CALL = re.compile(r'^\s*module\s+"[^"]*"\s*\{[^}]*?\bsource\s*=\s*"\.\.?/', re.MULTILINE)


def calls_local_module(text: str) -> bool:
    """A Terraform file calling a module of its own tree (`module "x" { source = "./modules/vllm" ... }`)."""
    return LOCAL_MODULE_CALL.search(text) is not None


def _kept_if(path: Path, wanted: Callable[[str], bool]) -> list[SourceFile | ManifestError]:
    """The file a walk keeps when its text is one it reads (an unreadable one is kept, to be reported), else none."""
    source = _or_error(lambda: _read(path))
    return [source] if isinstance(source, ManifestError) or wanted(source.text) else []


def _walk(root: Path, notes: list[str]) -> list[SourceFile | ChartSource | ManifestError]:
    found: list[SourceFile | ChartSource | ManifestError] = []
    chart_data: dict[Path, str] = {}  # a chart's data file -> the chart
    for directory, subdirs, names in os.walk(root):
        here = Path(directory)
        subdirs[:] = sorted(d for d in subdirs if d not in SKIP_DIRS and (not d.startswith(".") or d in WALKED_DOT_DIRS))
        is_chart = "Chart.yaml" in names and "templates" in subdirs
        if is_chart:  # rendered as a whole: its templates, its subcharts under charts/ with it
            subdirs[:] = [d for d in subdirs if d not in ("templates", "charts")]
            found.append(ChartSource(_display(here), here))
            chart_data.update((path, _display(here)) for path in chart_data_files(here))
        for name in sorted(names):
            if (here / name) in chart_data:
                found.append(_or_error(lambda: replace(_read(here / name), data_of=chart_data[here / name])))
                continue
            readable = (name.endswith(YAML_SUFFIXES + SCRIPT_SUFFIXES + (UNIT_SUFFIX, QUADLET_SUFFIX) + JINJA_TEMPLATES
                                      + UNIT_TEMPLATE_SUFFIXES)
                        or DOCKERFILE_NAMES.search(name)
                        or MAKEFILE_NAMES.search(name) or name == KUSTOMIZATION_WITHOUT_SUFFIX)
            if name.endswith(PYTHON_SUFFIX):
                if PYTHON_TESTS.search(name) or TEST_DIRS & set(here.relative_to(root).parts):
                    continue  # a test suite's Python, not a deployment
                found += _kept_if(here / name, names_vllm_deployment)
                continue
            if name.endswith(".json"):  # an ECS task definition, a PM2 ecosystem or a Kubernetes object (`kubectl
                # apply -f x.json`; JSON is YAML) that names vLLM; other JSON is data
                found += _kept_if(here / name, lambda t: ('"containerDefinitions"' in t or '"apps"' in t
                                                          or _kubernetes_json(t))
                                  and "vllm" in t.lower())  # fmt: skip
                continue
            if name.endswith(CODE_SUFFIXES):  # a PM2 ecosystem file; a Pulumi / CDK program that launches vLLM is named
                found += _kept_if(here / name, lambda t: VLLM_LAUNCH_TEXT.search(t) is not None
                                  or ("apps" in t and "vllm" in t.lower()))  # fmt: skip
                continue
            if name.endswith(JOB_SCRIPT_SUFFIXES) or ("." not in name and _starts_as_shell(here / name)):
                found += _kept_if(here / name, names_vllm_deployment)
                continue
            if name.endswith(APPTAINER_DEFINITION_SUFFIX):
                found += _kept_if(here / name, lambda t: is_apptainer_definition(t) and names_vllm_deployment(t))
                continue
            if name.endswith(SUPERVISORD_SUFFIXES):
                found += _kept_if(here / name, lambda t: "[program:" in t and names_vllm_deployment(t))
                continue
            if name.endswith(HCL_SUFFIXES + (NIX_SUFFIX,)):  # a root module calls the module that names vLLM
                found += _kept_if(here / name, lambda t: names_vllm_deployment(t) or calls_local_module(t))
                continue
            if name.endswith(TERRAFORM_TEMPLATE) and not readable:
                readable = _is_kubernetes_template(here / name)
            if not readable or name == "Chart.yaml" or (is_chart and name == "values.yaml"):
                continue
            chart = _values_chart(here / name, (root.resolve(),))
            found.append(chart if chart is not None else _or_error(lambda: _read(here / name)))
    return found


def _kubernetes_json(text: str) -> bool:
    """A Kubernetes object (or a List of them) written as JSON: an object with "apiVersion" and "kind" keys."""
    return text.lstrip().startswith("{") and '"apiVersion"' in text and '"kind"' in text


# A Kubernetes object's first lines: `apiVersion:` and `kind:` at the top level.
KUBERNETES_HEAD = re.compile(r"^apiVersion:.*\n(?:.*\n)*?kind:|^kind:.*\n(?:.*\n)*?apiVersion:", re.MULTILINE)


def _starts_as_shell(path: Path) -> bool:
    """A file whose first line is a shell's #! line, or a small one that reads as a shell script launching vLLM
    without one (reads_as_shell)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(MAX_UNMARKED_SCRIPT_BYTES + 1)
    except OSError:
        return False
    if SHELL_SHEBANG.match(head):
        return True
    return len(head) <= MAX_UNMARKED_SCRIPT_BYTES and reads_as_shell(head.decode("utf-8", "replace"))


MAX_UNMARKED_SCRIPT_BYTES = 64 * 1024


# A shell script kept without a suffix or a #! line (`start-container`: `export TAG=...` then `docker run ... vllm
# serve ...`): its first command sets a variable or pulls or runs a container, and a line of it launches vLLM (prose
# that starts with `vllm serve` is no script).
_FIRST_SHELL_LINE = re.compile(r"^(?:export\s+)?[A-Za-z_][A-Za-z0-9_]*=\S*\s*$|^(?:sudo\s+)?(?:docker|podman|nerdctl)\s+"
                               r"(?:pull|run)\s")
_LAUNCH_LINE = re.compile(r"^\s*(?:sudo\s+)?(?:(?:docker|podman|nerdctl)\s+run\b.*\bvllm|(?:exec\s+)?vllm\s+serve\b|"
                          r"python3?\s+-m\s+vllm\.entrypoints)", re.MULTILINE)


def reads_as_shell(text: str) -> bool:
    """Whether a file with no suffix and no #! line is a shell script that launches vLLM (see _FIRST_SHELL_LINE)."""
    first = next((line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")), "")
    return bool(_FIRST_SHELL_LINE.match(first)) and _LAUNCH_LINE.search(text) is not None


def _is_kubernetes_template(path: Path) -> bool:
    """A Terraform template named without .yaml (vllm.tftpl) whose text is a Kubernetes manifest."""
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            return KUBERNETES_HEAD.search(handle.read(64 * 1024)) is not None
    except OSError:
        return False


def _values_chart(path: Path, roots: tuple[Path, ...] = ()) -> ChartSource | None:
    """A values file inside a chart's directory (values.yaml, values-prod.yaml, examples/x/values.yaml): the chart
    rendered with it, as `helm template CHART -f FILE` (its own values.yaml: the defaults alone); a YAML file outside
    any chart that names vLLM and sets most of the keys a nearby chart's values.yaml declares: that chart rendered
    with it (scan/nearby_charts.py)."""
    chart = chart_root(path)
    if chart is not None:
        if not is_values_file(path):
            return None
        own = path.resolve() == (chart / "values.yaml").resolve()
        return ChartSource(_display(path), chart, () if own else (path,))
    if not path.name.endswith(YAML_SUFFIXES) or not path.is_file():  # a FIFO named x.yaml is never opened
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if "vllm" not in text.lower() or KUBERNETES_HEAD.search(text):
        return None
    nearby = chart_for_values(path, text, roots or (path.resolve().parent,))
    return ChartSource(_display(path), nearby, (path,)) if nearby is not None else None


def display_path(path: Path) -> str:
    """The path as scan shows it: relative to the working directory when under it."""
    return _display(path)


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def read_source(path: Path) -> SourceFile:
    """A file's text as scan reads it; raises ManifestError (too large, not UTF-8, not a regular file)."""
    return _read(path)


def _read(path: Path) -> SourceFile:
    shown = _display(path)
    try:
        if kind := special_kind(path):  # a FIFO or a device would block the read or never end
            raise ManifestError(f"{shown}: not a regular file ({kind}), not read")
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            raise ManifestError(f"{shown}: over {MAX_MANIFEST_BYTES // 2**20} MiB, not read")
        raw = path.read_bytes()
    except OSError as exc:
        raise ManifestError(f"{shown}: cannot read it ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ManifestError(f"{shown}: not UTF-8 text (byte {exc.start})") from None
    return SourceFile(shown, _checked_text(shown, text))


def _checked_text(shown: str, text: str) -> str:
    if len(text.encode("utf-8", "replace")) > MAX_MANIFEST_BYTES:
        raise ManifestError(f"{shown}: over {MAX_MANIFEST_BYTES // 2**20} MiB, not read")
    return text


def compose_documents(source: SourceFile) -> list[Document]:
    """Every YAML document of a file as a node tree; raises ManifestError with the file and line. Go template
    actions inside a string value (KServe's `--model_name={{.Name}}`, `"{{ ... }}"`) are values, not templating."""
    text = source.text
    if source.path.endswith(TERRAFORM_TEMPLATE):
        text = TERRAFORM_DIRECTIVE_LINE.sub(lambda m: " " * len(m.group(0)), text)  # same offsets, same lines
    text = _without_podless_documents(text)
    templates = [m.start() for m in TEMPLATE.finditer(text) if not _in_comment(text, m.start())]
    if too_deeply_nested(text):
        raise ManifestError(f"{source.path}: nested more than {MAX_FLOW_DEPTH} levels deep")
    try:
        roots = list(yaml.compose_all(text, Loader=safe_loader()))
    except yaml.MarkedYAMLError as exc:
        if templates:
            raise _template_error(source, templates[0]) from None
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = exc.problem or exc.context or "malformed YAML"
        raise ManifestError(f"{source.path}{line}: malformed YAML: {problem}") from None
    except (yaml.YAMLError, RecursionError) as exc:
        if templates:
            raise _template_error(source, templates[0]) from None
        raise ManifestError(f"{source.path}: malformed YAML ({type(exc).__name__})") from None
    if has_aliases(text) and expands_too_far(roots):
        raise ManifestError(f"{source.path}: YAML aliases expand past {MAX_EXPANDED_NODES:,} nodes (a 'billion"
                            " laughs' document?), not read")
    outside = _outside_strings(templates, roots)
    if outside is not None:
        raise _template_error(source, outside)
    return [Document(source.path, i, root) for i, root in enumerate(roots) if root is not None]


PODLESS_KINDS = frozenset(load_yaml_cached(read_data("podless_kinds.yaml"), "podless_kinds.yaml")["kinds"])
"""Kinds that never hold a running container (kvdoctor/data/podless_kinds.yaml)."""
DOCUMENT_SEPARATOR = re.compile(r"^---[ \t]*(?:#[^\n]*)?$", re.MULTILINE)
TOP_LEVEL_KIND = re.compile(r"^kind:[ \t]*[\"']?([A-Za-z0-9]+)[\"']?[ \t]*(?:#[^\n]*)?$", re.MULTILINE)
TOP_LEVEL_API_VERSION = re.compile(r"^apiVersion:", re.MULTILINE)
POD_TEMPLATE_API_GROUPS = ("serving.knative.dev/",)
"""API groups whose `kind: Service` holds a pod template (a Knative Service: Cloud Run's service YAML, KServe's
serverless mode), unlike core v1's Service, which runs nothing."""
TOP_LEVEL_POD_TEMPLATE_API = re.compile(r"^apiVersion:[ \t]*[\"']?(?:" + "|".join(map(re.escape, POD_TEMPLATE_API_GROUPS))
                                        + ")", re.MULTILINE)  # fmt: skip


def _without_podless_documents(text: str) -> str:
    """The text with each document of a kind that runs nothing (a 1.5 MB CustomResourceDefinition) made a null
    document of the same length and lines, so that it is not composed node by node; offsets and lines stay."""
    if "\nkind:" not in text and not text.startswith("kind:"):
        return text
    pieces, start = [], 0
    for separator in [*DOCUMENT_SEPARATOR.finditer(text), None]:
        end = separator.start() if separator else len(text)
        chunk = text[start:end]
        kind = TOP_LEVEL_KIND.search(chunk)
        if kind and kind.group(1) in PODLESS_KINDS and TOP_LEVEL_API_VERSION.search(chunk) and "\n..." not in chunk \
                and not TOP_LEVEL_POD_TEMPLATE_API.search(chunk):
            chunk = _null_document(chunk)
        pieces.append(chunk)
        if separator:
            pieces.append(separator.group(0))
            start = separator.end()
    return "".join(pieces)


def _null_document(chunk: str) -> str:
    """A chunk of the same length and lines that is the null document `~`."""
    blank = "\n".join(" " * len(line) for line in chunk.split("\n"))  # a regex sub per character is slow
    at = blank.find(" ")
    return blank if at < 0 else blank[:at] + "~" + blank[at + 1 :]


def _in_comment(text: str, offset: int) -> bool:
    """Whether the offset is in a whole-line YAML comment."""
    return text[text.rfind("\n", 0, offset) + 1 : offset].lstrip().startswith("#")


def _template_error(source: SourceFile, offset: int) -> ManifestError:
    line = source.text.count("\n", 0, offset) + 1
    return ManifestError(
        f"{source.path}:{line}: Helm/Go template syntax ({{{{ }}}}), not YAML yet",
        "render it first: helm template RELEASE CHART -f values.yaml | kvdoctor scan -",
    )


def _outside_strings(offsets: list[int], roots: list[yaml.Node | None]) -> int | None:
    """The first template action that is not inside a string value (it shapes the YAML itself), or None."""
    if not offsets:
        return None
    spans: list[tuple[int, int]] = []
    stack = [r for r in roots if r is not None]
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.ScalarNode):
            spans.append((node.start_mark.index, node.end_mark.index))
        elif isinstance(node, yaml.SequenceNode):
            stack += node.value
        elif isinstance(node, yaml.MappingNode):
            stack += [n for pair in node.value for n in pair]
    spans.sort()
    starts = [a for a, _ in spans]
    for offset in offsets:
        index = bisect.bisect_right(starts, offset) - 1
        if index < 0 or not (spans[index][0] <= offset < spans[index][1]):
            return offset
    return None
