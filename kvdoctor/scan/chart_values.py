"""A chart's raw values, its chart not in the scanned files: the container a values mapping describes.

Charts written with `helm create` and most charts for one model server take the container from their values as they
are: `image.repository`/`image.tag` (or one `image` string), `command`, `args` (and `extraArgs` after them), `env`
(a list or a name -> value map), `nodeSelector`, and keys named for vLLM's options (`maxModelLen: 8192`). A values
file (no `kind`) holding such a mapping whose image is vLLM's, or a build of it, with a command, arguments or two
such keys is read as that container; what the chart's templates add is not known, so the workload says so, and its
GPU count (`resources`, times the pods of a group in a LeaderWorkerSet chart) is left to them: unknown here. A chart
scanned with its templates is rendered instead (scan/helm_chart.py): this reader only sees values whose chart is
elsewhere.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import yaml

from kvdoctor.scan import nodes
from kvdoctor.scan.command import shell_split
from kvdoctor.scan.documents import Document
from kvdoctor.scan.image import is_vllm_build, runs_vllm_entrypoint
from kvdoctor.scan.kubernetes import container_workload, names_no_model, pod_gpu_selectors
from kvdoctor.scan.workload import Token, Workload

ARGUMENT_KEYS = ("args", "extraArgs", "extra_args", "additionalArgs")
"""Keys whose words the container gets after `args`, in this order (charts name the extra ones differently)."""
CONTAINER_KEYS = ("command",) + ARGUMENT_KEYS
NAME_KEYS = ("fullnameOverride", "nameOverride", "name")
MODEL_KEYS = (("model",), ("model", "name"), ("model", "id"), ("model", "repository"), ("modelName",), ("modelId",),
              ("model_id",), ("modelURL",), ("hfModel",), ("servedModel",))
"""Where values name the model a template passes to vLLM when the arguments do not
(`--model {{ .Values.model.name }}`)."""
MIN_KEYED_OPTIONS = 2
"""One key named like an option (`port`, `dtype`) is any chart's; two, with a vLLM image, are vLLM's."""
NOT_KEYED = frozenset({"--model", "--host", "--port", "--name", "--image"})
"""Keys that are no setting kvdoctor judges (the model comes from MODEL_KEYS)."""
_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")
MAX_DEPTH = 3  # values nest the server under a key or two (`vllm:`, `server.deployment:`), not deeper
NOTE = ("read from a chart's values whose chart is not in the scanned files, as the container its templates make of "
        "image, command, args and env; what the templates add, and how many GPUs a pod gets, are not known (scan the "
        "chart with --values FILE for what it renders)")


def is_container_values(root: yaml.Node) -> bool:
    return bool(_servers(root))


def workloads(doc: Document, source_text: str) -> list[Workload]:
    found = []
    for path, values in _servers(doc.root):
        selectors = pod_gpu_selectors(values) or pod_gpu_selectors(doc.root)
        container = _container(values, doc.root, path)
        workload = container_workload(container, source_text, file=doc.file, line=nodes.line(values),
                                      platform="helm", kind="Helm values (chart not scanned)",
                                      name=_name(values, doc.root, path, doc.file), selectors=selectors)
        if workload is not None and names_no_model(workload.argv):
            workload = _with_model_key(workload, values, doc.root)
        if workload is not None:
            found.append(replace(workload, notes=workload.notes + (NOTE,)))
    return found


def _with_model_key(workload: Workload, values: yaml.Node, root: yaml.Node) -> Workload | None:
    """Arguments that name no model: the model a values key names, which the templates must pass (vLLM's own default
    model is never what such a chart serves); None when no key names one (the values are then named unread)."""
    for mapping in (values, root):
        for path in MODEL_KEYS:
            node = nodes.get(mapping, *path)
            model = (nodes.text(node) or "").removeprefix("hf://") if nodes.is_scalar(node) else ""
            if model and "{{" not in model and ("/" in model or model.startswith("/")):
                note = (f"the model is values key {'.'.join(path)} ({model}): the arguments name none, so the chart's "
                        "templates pass it")
                return replace(workload, argv=(Token(model, nodes.line(node)),) + workload.argv,
                               notes=workload.notes + (note,))
    return None


def _servers(root: yaml.Node) -> list[tuple[tuple[str, ...], yaml.Node]]:
    """(key path, mapping) of each values mapping that describes a vLLM container: not a Kubernetes object, and no
    mapping inside one already taken."""
    if not nodes.is_map(root) or nodes.get(root, "kind") is not None or nodes.get(root, "apiVersion") is not None:
        return []
    found: list[tuple[tuple[str, ...], yaml.Node]] = []

    def walk(node: yaml.Node, path: tuple[str, ...]) -> None:
        if _describes_vllm_container(node):
            found.append((path, node))
            return
        if len(path) < MAX_DEPTH:
            for key, _, value in nodes.pairs(node):
                if nodes.is_map(value):
                    walk(value, path + (key,))

    walk(root, ())
    return found


def _image(values: yaml.Node) -> str | None:
    """`image: repo:tag`, or `image: {registry, repository, tag}` as the chart joins them."""
    image = nodes.get(values, "image")
    if nodes.is_scalar(image):
        return nodes.text(image)
    repository = nodes.text(nodes.get(image, "repository")) or nodes.text(nodes.get(image, "name"))
    if not repository:
        return None
    registry = nodes.text(nodes.get(image, "registry"))
    tag = nodes.text(nodes.get(image, "tag"))
    return (f"{registry}/" if registry else "") + repository + (f":{tag}" if tag else "")


def _describes_vllm_container(values: yaml.Node) -> bool:
    image = _image(values)
    if not image or not (runs_vllm_entrypoint(image) or is_vllm_build(image)):
        return False
    return any(nodes.is_seq(nodes.get(values, key)) or nodes.text(nodes.get(values, key)) for key in CONTAINER_KEYS) \
        or len(_keyed_options(values)) >= MIN_KEYED_OPTIONS


def _keyed_options(values: yaml.Node) -> list[list[yaml.Node]]:
    """The words of each values key named for vLLM's options (`maxModelLen: 8192` -> [--max-model-len, 8192],
    `enforceEager: true` -> [--enforce-eager]), which a chart's templates turn into its flags; options of the newest
    release read."""
    options = _newest_options()
    keyed: list[list[yaml.Node]] = []
    for key, key_node, value in nodes.pairs(values):
        flag = "--" + _CAMEL.sub(r"-\1", key).replace("_", "-").lower()
        if flag in NOT_KEYED or flag not in options or not nodes.is_scalar(value):
            continue
        text = (nodes.text(value) or "").strip()
        if options[flag].takes_value and text and "{{" not in text:
            keyed.append([nodes.str_node(flag, key_node), value])
        elif not options[flag].takes_value and text.lower() in ("true", "yes", "on"):
            keyed.append([nodes.str_node(flag, key_node)])
    return keyed


def _newest_options():
    from kvdoctor.vllm_pack.release import load_release
    from kvdoctor.vllm_pack.store import newest_release

    release = load_release(newest_release() or "")
    return release.serve_args if release is not None else {}


def _words(node: yaml.Node | None) -> list[yaml.Node]:
    """A list's items, or a string's words (each placed at the string)."""
    if nodes.is_seq(node):
        return nodes.items(node)
    text = nodes.text(node)
    if not text:
        return []
    try:
        words = shell_split(text)
    except ValueError:
        words = text.split()
    return [nodes.str_node(word, node) for word in words]


def _sequence(items: list[yaml.Node], at: yaml.Node) -> yaml.SequenceNode:
    return yaml.SequenceNode("tag:yaml.org,2002:seq", items, at.start_mark, at.end_mark)


def _env(node: yaml.Node | None) -> yaml.Node | None:
    """`env` as Kubernetes has it: a list of name/value items stays; a name -> value map becomes one."""
    if not nodes.is_map(node):
        return node
    items = [nodes.map_node([(nodes.str_node("name", key_node), nodes.str_node(key, key_node)),
                             (nodes.str_node("value", key_node), value if nodes.is_scalar(value)
                              else nodes.str_node("", key_node))], key_node)
             for key, key_node, value in nodes.pairs(node)]
    return _sequence(items, node)


def _container(values: yaml.Node, root: yaml.Node, path: tuple[str, ...]) -> yaml.MappingNode:
    """The container the chart makes of these values; `env` at the top serves a nested server too."""
    key = nodes.str_node
    pairs = [(key("name", values), key(path[-1] if path else "vllm", values)),
             (key("image", values), key(_image(values) or "", nodes.get(values, "image")))]
    command = _words(nodes.get(values, "command"))
    arguments = [item for name in ARGUMENT_KEYS for item in _words(nodes.get(values, name))] + \
        [word for words in _keyed_options(values) for word in words]
    if command and (nodes.text(command[0]) or "").startswith("-"):  # options: the template puts them after the
        arguments, command = command + arguments, []                 # entrypoint, or the chart would never run
    if command:
        pairs.append((key("command", values), _sequence(command, values)))
    if arguments:
        pairs.append((key("args", values), _sequence(arguments, values)))
    for name in ("env", "envFrom"):  # not `resources`: how many GPUs a pod gets, and how many pods a group has
        node = nodes.get(values, name)  # (a LeaderWorkerSet chart), is the templates' to say
        if node is None and path:
            node = nodes.get(root, name)
        if node is not None:
            pairs.append((key(name, node), _env(node) if name == "env" else node))
    return nodes.map_node(pairs, values)


def _name(values: yaml.Node, root: yaml.Node, path: tuple[str, ...], file: str) -> str:
    for mapping in (values, root):
        for key in NAME_KEYS:
            if (name := nodes.text(nodes.get(mapping, key))) and "{{" not in name and "/" not in name:  # not a model
                return name
    if path:
        return path[-1]
    chart_dir = Path(file).parent.name
    return chart_dir if chart_dir and chart_dir not in {".", "values", "helm", "charts"} else Path(file).stem
