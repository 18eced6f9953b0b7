"""llmaz Playgrounds -> vLLM workloads: a Playground whose backend is vLLM (backendRuntimeConfig.backendName vllm,
llmaz's default) serves its main model claim, an OpenModel of the same file (spec.source.modelHub.modelID), with
backendRuntimeConfig.args and envs, on the OpenModel's first inference flavor (its GPU count, node selector and
name). The BackendRuntime's own arguments (host, port, served name) are not in the file and are not read."""

from __future__ import annotations

import yaml

from kvdoctor.base.yaml_safe import safe_loader
from kvdoctor.scan import nodes
from kvdoctor.scan.documents import Document
from kvdoctor.scan.kubernetes import GPU_RESOURCE
from kvdoctor.scan.workload import EnvVar, GpuSelector, Token, Workload

FLAVOR = "flavor"
"""An llmaz inference flavor's name (a10, t4): read as a GPU product name, like KubeAI's resource profile."""
VLLM_IMAGE = "vllm/vllm-openai"
"""The image of llmaz's vLLM BackendRuntime (its chart's backendRuntime.vllm.image.repository); version is its tag."""
BACKEND_RELEASE = "llmaz's vLLM BackendRuntime (its image tag, set where llmaz is installed)"
"""What decides the release of a Playground that names no version."""


def is_vllm_playground(root: yaml.Node) -> bool:
    api = nodes.text(nodes.get(root, "apiVersion")) or ""
    backend = nodes.text(nodes.get(root, "spec", "backendRuntimeConfig", "backendName")) or "vllm"
    return api.startswith("inference.llmaz.io/") and nodes.text(nodes.get(root, "kind")) == "Playground" \
        and backend.lower() == "vllm"  # fmt: skip


def workloads(doc: Document, source_text: str) -> list[Workload]:
    root, spec = doc.root, nodes.get(doc.root, "spec")
    claim = _main_claim(spec)
    model = _open_models(source_text).get(nodes.text(claim) or "")
    source = nodes.get(model, "spec", "source", "modelHub", "modelID") or nodes.get(model, "spec", "source", "uri")
    argv = [Token(nodes.text(source) or nodes.text(claim) or "", nodes.line(source) or nodes.line(claim))]
    config = nodes.get(spec, "backendRuntimeConfig")
    argv += [Token(t, nodes.line(item)) for item in nodes.items(nodes.get(config, "args")) if (t := nodes.text(item))]
    env = [EnvVar(nodes.text(nodes.get(item, "name")) or "", nodes.text(nodes.get(item, "value")), nodes.line(item))
           for item in nodes.items(nodes.get(config, "envs"))]  # fmt: skip
    version = nodes.get(config, "version")
    flavor = (nodes.items(nodes.get(model, "spec", "inferenceConfig", "flavors")) or [None])[0]
    selectors = tuple(GpuSelector(key, (nodes.text(value) or "",), nodes.line(value))
                      for key, _, value in nodes.pairs(nodes.get(flavor, "nodeSelector")))  # fmt: skip
    if nodes.text(nodes.get(flavor, "name")):
        selectors += (GpuSelector(FLAVOR, (str(nodes.text(nodes.get(flavor, "name"))),), nodes.line(flavor)),)
    count, count_line = _flavor_gpus(flavor)
    notes = [f"llmaz Playground: vLLM serves {argv[0].text or '?'} (the OpenModel {nodes.text(claim)}) with "
             "backendRuntimeConfig.args; the BackendRuntime's own arguments are not in this file"]  # fmt: skip
    if source is None:
        notes.append(f"no OpenModel {nodes.text(claim)} in this file: the model is its name, unknown here")
    return [Workload(
        file=doc.file, line=nodes.line(root), platform="kubernetes", kind="Playground",
        name=nodes.text(nodes.get(root, "metadata", "name")) or "(unnamed)", container="vllm",
        namespace=nodes.text(nodes.get(root, "metadata", "namespace")),
        image=f"{VLLM_IMAGE}:{nodes.text(version)}" if nodes.text(version) else None, image_line=nodes.line(version),
        argv=tuple(argv), command_line=argv[0].line, env=tuple(env), gpu_selectors=selectors, gpu_limit=count,
        gpu_limit_line=count_line, notes=tuple(notes),
        release_by=None if nodes.text(version) else BACKEND_RELEASE,
    )]  # fmt: skip


def _flavor_gpus(flavor: yaml.Node | None) -> tuple[int | None, int | None]:
    """The flavor's nvidia.com/gpu in limits (else requests), and its line."""
    for section in ("limits", "requests"):
        for key, _, value in nodes.pairs(nodes.get(flavor, section)):
            if GPU_RESOURCE.match(key) and (count := nodes.text(value) or "").isdigit():
                return int(count), nodes.line(value)
    return None, None


def _main_claim(spec: yaml.Node | None) -> yaml.Node | None:
    """modelClaim.modelName, else the modelClaims entry whose role is main (else the first)."""
    single = nodes.get(spec, "modelClaim", "modelName")
    if single is not None:
        return single
    claims = nodes.items(nodes.get(spec, "modelClaims", "models"))
    main = [c for c in claims if (nodes.text(nodes.get(c, "role")) or "main") == "main"] or claims
    return nodes.get(main[0], "name") if main else None


def _open_models(source_text: str) -> dict[str, yaml.Node]:
    """The file's OpenModels by name (the Playground's claim names one)."""
    try:
        roots = list(yaml.compose_all(source_text, Loader=safe_loader()))
    except yaml.YAMLError:
        return {}
    return {str(nodes.text(nodes.get(r, "metadata", "name"))): r for r in roots
            if r is not None and nodes.text(nodes.get(r, "kind")) == "OpenModel"}  # fmt: skip
