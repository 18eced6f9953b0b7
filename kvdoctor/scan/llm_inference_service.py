"""KServe's LLMInferenceService whose container `main` gives no command (or that has no spec.template at all): the
controller runs its config template's vLLM command there (kvdoctor/data/llm_inference_service.yaml): /mnt/models
(spec.model.uri, downloaded or mounted there) served as spec.model.name, spec.parallelism.tensor as
--tensor-parallel-size, then the container's VLLM_ADDITIONAL_ARGS and its args. A Hugging Face uri (hf://org/name)
is read as that model; any other is the files at /mnt/models. The image is the platform's: its release is unknown."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from functools import lru_cache

import yaml

from kvdoctor.base.yaml_safe import load_yaml_cached
from kvdoctor.data import read_data
from kvdoctor.scan import nodes
from kvdoctor.scan.workload import Token, Workload

KIND = "LLMInferenceService"


@dataclass(frozen=True)
class ConfigTemplate:
    source: str
    container: str
    model_path: str
    port: str
    parallelism: dict[str, str]
    additional_args_env: str


@lru_cache(maxsize=1)
def config_template() -> ConfigTemplate:
    data = load_yaml_cached(read_data("llm_inference_service.yaml"), "llm_inference_service.yaml")
    return ConfigTemplate(**data)


def templated(root: yaml.Node, container: yaml.Node | None) -> bool:
    """Whether the controller's template gives this container (None: the object has no containers) its command: the
    container `main` with no command of its own (an image of its own replaces the template's, args add to its)."""
    if nodes.text(nodes.get(root, "kind")) != KIND:
        return False
    if container is None:
        return True
    return nodes.text(nodes.get(container, "name")) == config_template().container and nodes.get(container, "command") is None


def argv(root: yaml.Node, container: yaml.Node | None) -> list[Token]:
    """The words after `vllm serve` the controller's template runs in the container."""
    template = config_template()
    uri, model_name = nodes.get(root, "spec", "model", "uri"), nodes.get(root, "spec", "model", "name")
    uri_text = nodes.text(uri) or ""
    model = uri_text.split("://", 1)[1] if uri_text.startswith("hf://") else template.model_path
    words = [Token(model, nodes.line(uri) or nodes.line(root))]
    name = nodes.text(model_name) or nodes.text(nodes.get(root, "metadata", "name"))
    if name:
        words += [Token("--served-model-name", nodes.line(model_name)), Token(name, nodes.line(model_name))]
    words += [Token("--port", nodes.line(root)), Token(template.port, nodes.line(root))]
    for key, option in template.parallelism.items():
        value = nodes.get(root, "spec", "parallelism", key)
        if nodes.text(value):
            words += [Token(option, nodes.line(value)), Token(nodes.text(value), nodes.line(value))]
    for item in nodes.items(nodes.get(container, "env")) if container is not None else ():
        value = nodes.get(item, "value")
        if nodes.text(nodes.get(item, "name")) == template.additional_args_env and nodes.text(value):
            try:
                extra = shlex.split(nodes.text(value))
            except ValueError:
                extra = nodes.text(value).split()
            words += [Token(word, nodes.line(value)) for word in extra]
    words += [Token(nodes.text(a) or "", nodes.line(a)) for a in nodes.items(nodes.get(container, "args"))] \
        if container is not None else []
    return words


def note(root: yaml.Node) -> str:
    uri = nodes.text(nodes.get(root, "spec", "model", "uri")) or "(none)"
    return (f"{KIND}: the controller's config template runs vLLM in container {config_template().container} "
            f"({config_template().source}): vllm serve on spec.model.uri ({uri}) with the container's "
            f"{config_template().additional_args_env} and args; the image is the platform's, its vLLM release unknown")


def bare_workload(root: yaml.Node, file: str) -> Workload:
    """The workload of an LLMInferenceService with no containers of its own: the template's, no GPUs stated."""
    words = argv(root, None)
    return Workload(file=file, line=nodes.line(root), platform="kubernetes", kind=KIND,
                    name=nodes.text(nodes.get(root, "metadata", "name")) or "(unnamed)",
                    namespace=nodes.text(nodes.get(root, "metadata", "namespace")),
                    container=config_template().container, argv=tuple(words), command_line=words[0].line,
                    notes=(note(root),))  # fmt: skip
