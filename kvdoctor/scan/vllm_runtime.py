"""vLLM production-stack's own operator: a VLLMRuntime (production-stack.vllm.ai/v1alpha1) becomes a Deployment whose
container `vllm` runs `/opt/venv/bin/vllm serve MODEL` with arguments built from the spec, in this order
(operator/internal/controller/vllmruntime_controller.go, production-stack a6c01db, 2026-08-05): --host 0.0.0.0
--port PORT, --enable-lora, --enable-auto-tool-choice, --tool-call-parser, --enable-chunked-prefill or
--no-enable-chunked-prefill (always one), the same for prefix caching, --max-model-len, --dtype,
--tensor-parallel-size, --max-num-seqs, --gpu_memory_utilization, --max_loras, then vllmConfig.extraArgs; the image
is deploymentConfig.image registry/name, the GPUs deploymentConfig.resources.gpu. Each word sits on its field's line."""

from __future__ import annotations

import yaml

from kvdoctor.scan import nodes
from kvdoctor.scan.documents import Document
from kvdoctor.scan.workload import EnvVar, Token, Workload

API_GROUP = "production-stack.vllm.ai/"
DEFAULT_PORT = "8000"
"""vllmConfig.port's default in the CRD (kubebuilder default)."""


def is_vllm_runtime(root: yaml.Node) -> bool:
    return nodes.text(nodes.get(root, "kind")) == "VLLMRuntime" \
        and (nodes.text(nodes.get(root, "apiVersion")) or "").startswith(API_GROUP)


def workloads(doc: Document, source_text: str) -> list[Workload]:
    root, spec = doc.root, nodes.get(doc.root, "spec")
    model, config = nodes.get(spec, "model"), nodes.get(spec, "vllmConfig")
    url = nodes.get(model, "modelURL")
    if not nodes.text(url):
        return []
    argv = [Token(nodes.text(url), nodes.line(url))]
    port = nodes.get(config, "port")
    argv += _words(["--host", "0.0.0.0", "--port", nodes.text(port) or DEFAULT_PORT], port or config or url)
    for node, field, flag in ((model, "enableLoRA", "--enable-lora"), (model, "enableTool", "--enable-auto-tool-choice")):
        if _true(nodes.get(node, field)):
            argv += _words([flag], nodes.get(node, field))
    argv += _valued(model, "toolCallParser", "--tool-call-parser")
    for field, flag in (("enableChunkedPrefill", "chunked-prefill"), ("enablePrefixCaching", "prefix-caching")):
        node = nodes.get(config, field)
        argv += _words([f"--enable-{flag}" if _true(node) else f"--no-enable-{flag}"], node or config or url)
    argv += _valued(model, "maxModelLen", "--max-model-len", positive=True) + _valued(model, "dtype", "--dtype")
    argv += _valued(config, "tensorParallelSize", "--tensor-parallel-size", positive=True)
    argv += _valued(model, "maxNumSeqs", "--max-num-seqs", positive=True)
    argv += _valued(config, "gpuMemoryUtilization", "--gpu_memory_utilization")
    argv += _valued(config, "maxLoras", "--max_loras", positive=True)
    argv += [Token(t, nodes.line(item)) for item in nodes.items(nodes.get(config, "extraArgs")) if (t := nodes.text(item))]
    deployment = nodes.get(spec, "deploymentConfig")
    image = nodes.get(deployment, "image")
    registry, name = nodes.text(nodes.get(image, "registry")), nodes.text(nodes.get(image, "name"))
    gpu = nodes.get(deployment, "resources", "gpu")
    gpus = nodes.text(gpu)
    env = [EnvVar(nodes.text(nodes.get(item, "name")) or "", nodes.text(nodes.get(item, "value")), nodes.line(item))
           for item in nodes.items(nodes.get(config, "env")) if nodes.text(nodes.get(item, "name"))]  # fmt: skip
    return [Workload(
        file=doc.file, line=nodes.line(root), platform="kubernetes", kind="VLLMRuntime",
        name=nodes.text(nodes.get(root, "metadata", "name")) or "(unnamed)", container="vllm",
        namespace=nodes.text(nodes.get(root, "metadata", "namespace")),
        image=f"{registry}/{name}" if registry and name else name, image_line=nodes.line(image),
        argv=tuple(argv), command_line=nodes.line(url), env=tuple(env),
        gpu_limit=int(gpus) if gpus and gpus.isdigit() else None, gpu_limit_line=nodes.line(gpu),
        notes=("production-stack's VLLMRuntime: the operator's `vllm serve` arguments built from the spec "
               "(vllmruntime_controller.go), each on its field's line",),
    )]  # fmt: skip


def _valued(node: yaml.Node | None, field: str, flag: str, positive: bool = False) -> list[Token]:
    value = nodes.get(node, field)
    text = nodes.text(value)
    if not text or (positive and not (text.isdigit() and int(text) > 0)):
        return []
    return _words([flag, text], value)


def _true(node: yaml.Node | None) -> bool:
    return (nodes.text(node) or "").lower() == "true"


def _words(words: list[str], at: yaml.Node | None) -> list[Token]:
    return [Token(word, nodes.line(at)) for word in words]
