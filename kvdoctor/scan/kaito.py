"""KAITO Workspaces and InferenceSets (kaito.sh) -> the vLLM server the operator runs for a preset: the model is the
preset's Hugging Face repository (kvdoctor/data/kaito.yaml; a preset name holding "/" is a model id itself), the
engine arguments are the `vllm:` mapping of the ConfigMap `inference.config` names (when this file holds it), the
GPU is the node's instance type (`resource.instanceType`). The vLLM release is the KAITO operator's, which the
Workspace does not name: undecided. A Workspace annotated `kaito.sh/runtime: transformers` runs no vLLM."""

from __future__ import annotations

from functools import lru_cache

import yaml

from kvdoctor.base.yaml_safe import load_yaml_cached, safe_loader
from kvdoctor.data import read_data
from kvdoctor.scan import nodes
from kvdoctor.scan.documents import Document
from kvdoctor.scan.embedded_scripts import INSTANCE_TYPE_LABEL
from kvdoctor.scan.workload import GpuSelector, Token, Workload

KINDS = {"Workspace": (), "InferenceSet": ("spec", "template")}
"""KAITO's kinds that serve a preset, and the path to the Workspace-shaped body (an InferenceSet's template)."""


@lru_cache(maxsize=1)
def _data() -> dict:
    return load_yaml_cached(read_data("kaito.yaml"), "kaito.yaml")


def is_kaito_inference(root: yaml.Node) -> bool:
    api = nodes.text(nodes.get(root, "apiVersion")) or ""
    kind = nodes.text(nodes.get(root, "kind")) or ""
    # a custom pod template (inference.template) is read as the pod it is (scan/kubernetes.py)
    return api.startswith("kaito.sh/") and kind in KINDS \
        and nodes.get(_body(root, kind), "inference", "preset") is not None


def workloads(doc: Document, source_text: str) -> list[Workload]:
    root = doc.root
    kind = str(nodes.text(nodes.get(root, "kind")))
    body = _body(root, kind)
    name = nodes.text(nodes.get(root, "metadata", "name")) or "(unnamed)"
    data = _data()
    runtime = nodes.text(nodes.get(root, "metadata", "annotations", data["runtime_annotation"])) or "vllm"
    preset = nodes.get(body, "inference", "preset", "name")
    if runtime.lower() != "vllm":
        return []  # the Transformers runtime
    preset_name = str(nodes.text(preset) or "")
    model = preset_name if "/" in preset_name else data["presets"].get(preset_name.lower())
    notes = [f"KAITO {kind}: the operator runs vLLM's server for preset {preset_name}"
             + (f" ({model}, {data['source']})" if model and model != preset_name else "")]
    undecided = []
    if model is None:
        notes.append(f"preset {preset_name} is not among the presets kvdoctor read ({data['source']}): the model it "
                     "serves is unknown here")  # fmt: skip
    argv = [Token(model or preset_name, nodes.line(preset))]
    config = nodes.get(body, "inference", "config")
    if nodes.text(config):
        args, where = _config_args(str(nodes.text(config)), source_text, data["config_key"])
        argv += args
        if where is None:
            undecided.append(f"ConfigMap {nodes.text(config)} (inference.config) is not in this file: the vLLM "
                             "arguments it gives are unknown here")  # fmt: skip
        else:
            notes.append(f"vLLM arguments from ConfigMap {nodes.text(config)} ({where})")
    else:
        notes.append("no inference.config: KAITO probes max-model-len and sets the parallel sizes from the node's GPUs")
    versions = ", ".join(f"{v} (base {t})" for t, v in list(data["base_image_vllm"].items())[:3])
    notes.append(f"the vLLM release is the installed KAITO operator's base image (newest: {versions}; "
                 f"{data['source']}): name it with --vllm-version")  # fmt: skip
    instance = nodes.get(body, "resource", "instanceType")
    selectors = (GpuSelector(INSTANCE_TYPE_LABEL, (str(nodes.text(instance)),), nodes.line(instance)),) \
        if nodes.text(instance) else ()  # fmt: skip
    return [Workload(
        file=doc.file, line=nodes.line(root), platform="kubernetes", kind=kind, name=name, container="vllm",
        namespace=nodes.text(nodes.get(root, "metadata", "namespace")), image=None, argv=tuple(argv),
        command_line=nodes.line(preset), gpu_selectors=selectors, notes=tuple(notes), undecided=tuple(undecided),
        release_by="the installed KAITO operator's base image",
    )]  # fmt: skip


def is_config_read(root: yaml.Node, source_text: str) -> bool:
    """Whether ``root`` is a ConfigMap that a KAITO Workspace / InferenceSet of the same file takes as its
    inference.config (its `vllm:` items are then read as that workload's arguments, not left unread)."""
    name = nodes.text(nodes.get(root, "metadata", "name"))
    if nodes.text(nodes.get(root, "kind")) != "ConfigMap" or nodes.get(root, "data", _data()["config_key"]) is None:
        return False
    try:
        others = [r for r in yaml.compose_all(source_text, Loader=safe_loader()) if r is not None]
    except yaml.YAMLError:
        return False
    return any(is_kaito_inference(r) and nodes.text(nodes.get(
        _body(r, str(nodes.text(nodes.get(r, "kind")))), "inference", "config")) == name for r in others)


def _body(root: yaml.Node, kind: str) -> yaml.Node | None:
    return nodes.get(root, *KINDS[kind]) if KINDS.get(kind) else root


def _config_args(name: str, source_text: str, key: str) -> tuple[list[Token], str | None]:
    """The `vllm:` mapping of the file's ConfigMap `name` (its data key inference_config.yaml) as the serve words KAITO
    makes of it, on the file's lines, and where it is; ([], None) when the file holds no such ConfigMap."""
    try:
        roots = [r for r in yaml.compose_all(source_text, Loader=safe_loader()) if r is not None]
    except yaml.YAMLError:
        return [], None
    for root in roots:
        if nodes.text(nodes.get(root, "kind")) != "ConfigMap" or nodes.text(nodes.get(root, "metadata", "name")) != name:
            continue
        text = nodes.get(root, "data", key)
        if not nodes.text(text):
            return [], f"line {nodes.line(root)}, no {key}"
        offset = nodes.text_line(text) - 1
        try:
            config = yaml.compose(str(nodes.text(text)), Loader=safe_loader())
        except yaml.YAMLError:
            return [], f"line {nodes.line(root)}, its {key} unreadable"
        words: list[Token] = []
        for flag, _, value in nodes.pairs(nodes.get(config, "vllm")):
            # KAITO's inference_api.py appends `--{key}` and `str(value)` for every item, a boolean as True / False
            plain = yaml.safe_load(yaml.serialize(value)) if value is not None else None
            line = (nodes.line(value) or 1) + offset
            words += [Token(f"--{flag}", line), Token(str(plain), line)]
        return words, f"line {nodes.line(root)}"
    return [], None
