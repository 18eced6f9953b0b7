"""Helm values -> vLLM workloads: the production-stack chart (one per servingEngineSpec.modelSpec[] entry) and vLLM's
own chart (examples/online_serving/chart-helm: image.command, resources, gpuModels).

The argv is built the way the chart's deployment template builds it (helm/templates/deployment-vllm-multi.yaml:
`vllm serve <modelURL>`, --enable-lora, the tool-call flags, then flags from vllmConfig, vllmConfig.extraArgs,
--revision and --chat-template); each word carries the line
of the value it comes from."""

from __future__ import annotations

import yaml

from kvdoctor.scan import nodes
from kvdoctor.scan.documents import Document
from kvdoctor.scan.kubernetes import container_env, gpu_limit, node_selector_term, pod_gpu_selectors
from kvdoctor.scan.workload import EnvVar, GpuSelector, Token, Workload

# vllmConfig key -> the flag the chart passes (its own spelling), in the template's order.
VALUED_KEYS = (
    ("maxModelLen", "--max-model-len"),
    ("dtype", "--dtype"),
    ("tensorParallelSize", "--tensor-parallel-size"),
    ("maxNumSeqs", "--max-num-seqs"),
    ("gpuMemoryUtilization", "--gpu_memory_utilization"),
    ("maxLoras", "--max_loras"),
    ("runner", "--runner"),
    ("convert", "--convert"),
)


# Keys only the chart's RayCluster template (helm/templates/ray-cluster.yaml, for raySpec.enabled) passes on.
RAY_ONLY_KEYS = (("pipelineParallelSize", "--pipeline-parallel-size"),)


def is_production_stack_values(root: yaml.Node) -> bool:
    return _engine_spec(root) is not None


def _engine_spec(root: yaml.Node) -> yaml.Node | None:
    """The values' servingEngineSpec: at the top, or under a subchart's key (an umbrella chart, or an Argo CD / Flux
    wrapper chart, that depends on production-stack under its name or alias: `vllm-stack: {servingEngineSpec: ...}`)."""
    if nodes.is_seq(nodes.get(root, "servingEngineSpec", "modelSpec")):
        return nodes.get(root, "servingEngineSpec")
    for _, _, value in nodes.pairs(root):
        if nodes.is_seq(nodes.get(value, "servingEngineSpec", "modelSpec")):
            return nodes.get(value, "servingEngineSpec")
    return None


def workloads(doc: Document, source_text: str) -> list[Workload]:
    engine = _engine_spec(doc.root)
    found = []
    for spec in nodes.items(nodes.get(engine, "modelSpec")):
        if nodes.plain(nodes.get(spec, "enabled")) is False:
            continue  # the chart deploys nothing for it
        found.append(_model_spec(doc.file, engine, spec))
    return found


def _model_spec(file: str, engine: yaml.Node, spec: yaml.Node) -> Workload:
    name = nodes.text(nodes.get(spec, "name")) or "(unnamed)"
    repository, tag = nodes.text(nodes.get(spec, "repository")), nodes.text(nodes.get(spec, "tag"))
    image = f"{repository}:{tag}" if repository and tag else repository
    env, env_from = container_env(spec)
    global_env, _ = container_env(engine)
    secret = nodes.text(nodes.get(spec, "envFromSecret", "name"))
    if secret:
        env_from.append(f"Secret {secret!r}")
    notes = []
    limit, limit_line = _gpu_request(spec)
    if nodes.plain(nodes.get(spec, "raySpec", "enabled")) is True:
        notes.append("raySpec.enabled: a multi-node Ray cluster; GPUs per node are not compared with -tp x -pp")
        limit, limit_line = None, None
    return Workload(
        file=file, line=nodes.line(spec), platform="helm", kind="modelSpec", name=name, container="vllm",
        image=image, image_line=nodes.line(nodes.get(spec, "tag")) or nodes.line(nodes.get(spec, "repository")),
        argv=tuple(_argv(spec)), command_line=nodes.line(nodes.get(spec, "modelURL")) or nodes.line(spec),
        env=tuple(_v0_env(spec) + global_env + env), env_from=tuple(env_from), gpu_selectors=_selectors(spec),
        gpu_limit=limit, gpu_limit_line=limit_line, notes=tuple(notes),
    )  # fmt: skip


def _argv(spec: yaml.Node) -> list[Token]:
    model = nodes.get(spec, "modelURL")
    argv = [Token(nodes.text(model) or "", nodes.line(model))] if nodes.text(model) else []
    if nodes.plain(nodes.get(spec, "enableLoRA")) is True:
        argv.append(Token("--enable-lora", nodes.line(nodes.get(spec, "enableLoRA"))))
    if nodes.plain(nodes.get(spec, "enableTool")):
        argv.append(Token("--enable-auto-tool-choice", nodes.line(nodes.get(spec, "enableTool"))))
    parser = nodes.get(spec, "toolCallParser")
    if nodes.text(parser):
        argv += [Token("--tool-call-parser", nodes.line(parser)), Token(str(nodes.text(parser)), nodes.line(parser))]
    config = nodes.get(spec, "vllmConfig")
    if nodes.is_map(config):
        chunked = nodes.get(config, "enableChunkedPrefill")
        if chunked is not None:
            on = nodes.plain(chunked) is True
            argv.append(Token("--enable-chunked-prefill" if on else "--no-enable-chunked-prefill", nodes.line(chunked)))
        prefix = nodes.get(config, "enablePrefixCaching")
        on = nodes.plain(prefix) is True
        argv.append(Token("--enable-prefix-caching" if on else "--no-enable-prefix-caching",
                          nodes.line(prefix) or nodes.line(config)))  # fmt: skip
        ray = nodes.plain(nodes.get(spec, "raySpec", "enabled")) is True
        for key, flag in VALUED_KEYS + ((RAY_ONLY_KEYS) if ray else ()):
            value = nodes.get(config, key)
            if value is not None and nodes.text(value) is not None:
                argv += [Token(flag, nodes.line(value)), Token(str(nodes.text(value)), nodes.line(value))]
        argv += [Token(t, nodes.line(item)) for item in nodes.items(nodes.get(config, "extraArgs"))
                 if (t := nodes.text(item)) is not None]  # fmt: skip
    revision = nodes.get(spec, "modelRevision")
    if nodes.text(revision):
        argv += [Token("--revision", nodes.line(revision)), Token(str(nodes.text(revision)), nodes.line(revision))]
    template = nodes.get(spec, "chatTemplate")
    if nodes.text(template):  # the Deployment template prefixes /templates (its ConfigMap's mount), Ray's does not
        path = str(nodes.text(template)) if nodes.plain(nodes.get(spec, "raySpec", "enabled")) is True \
            else f"/templates/{nodes.text(template)}"
        argv += [Token("--chat-template", nodes.line(template)), Token(path, nodes.line(template))]
    return argv


def _v0_env(spec: yaml.Node) -> list[EnvVar]:
    """vllmConfig.v0: "1" makes the chart set VLLM_USE_V1=0 (the V0 engine)."""
    v0 = nodes.get(spec, "vllmConfig", "v0")
    return [EnvVar("VLLM_USE_V1", "0", nodes.line(v0))] if str(nodes.text(v0)) == "1" else []


def _gpu_request(spec: yaml.Node) -> tuple[int | None, int | None]:
    if nodes.get(spec, "resources") is not None and nodes.plain(nodes.get(spec, "resources")):
        return gpu_limit(spec)  # a raw resources block wins over the request* fields in the chart
    request = nodes.get(spec, "requestGPU")
    try:
        return int(float(str(nodes.text(request)))), nodes.line(request)
    except ValueError:
        return None, None


def _selectors(spec: yaml.Node) -> tuple[GpuSelector, ...]:
    if nodes.plain(nodes.get(spec, "affinity")):
        return pod_gpu_selectors(spec)  # the chart uses affinity as given and then ignores nodeSelectorTerms
    found: list[GpuSelector] = []
    for term in nodes.items(nodes.get(spec, "nodeSelectorTerms")):
        found += node_selector_term(term, required=True)
    return tuple(found)


def is_vllm_chart_values(root: yaml.Node) -> bool:
    """vLLM's own chart's values: image.command runs vLLM (its deployment template uses it as the command)."""
    from kvdoctor.scan.command import serve_argv, words_of

    command = nodes.get(root, "image", "command")
    return (nodes.get(root, "kind") is None and nodes.is_seq(command)
            and serve_argv(words_of(command, ""), [], False, "") is not None)  # fmt: skip


def vllm_chart_workloads(doc: Document, source_text: str) -> list[Workload]:
    """The one Deployment vLLM's chart renders (templates/deployment.yaml): container `vllm`, image
    repository:tag, command image.command, env image.env, resources, and when it requests GPUs a required node
    affinity on nvidia.com/gpu.product In gpuModels (plus nodeSelector)."""
    from kvdoctor.scan.command import serve_argv, words_of

    root, image = doc.root, nodes.get(doc.root, "image")
    repository, tag = nodes.text(nodes.get(image, "repository")), nodes.text(nodes.get(image, "tag"))
    command = nodes.get(image, "command")
    argv = serve_argv(words_of(command, source_text), [], False, source_text) or []
    env, env_from = container_env(image)
    for key, label in (("configs", "ConfigMap"), ("secrets", "Secret")):
        if nodes.plain(nodes.get(root, key)):
            env_from.append(f"{label} '<release>-{key}'")
    limit, limit_line = gpu_limit(root)
    selectors = [GpuSelector(key, (nodes.text(value) or "",), nodes.line(value))
                 for key, _, value in nodes.pairs(nodes.get(root, "nodeSelector"))]  # fmt: skip
    models = nodes.get(root, "gpuModels")
    if limit and nodes.is_seq(models):
        values = tuple(t for item in nodes.items(models) if (t := nodes.text(item)))
        selectors.append(GpuSelector("nvidia.com/gpu.product", values, nodes.line(models)))
    return [Workload(
        file=doc.file, line=nodes.line(root), platform="helm", kind="vLLM chart values", name="vllm", container="vllm",
        image=f"{repository}:{tag}" if repository and tag else repository,
        image_line=nodes.line(nodes.get(image, "tag")) or nodes.line(nodes.get(image, "repository")),
        argv=tuple(argv), command_line=nodes.line(command), env=tuple(env), env_from=tuple(env_from),
        gpu_selectors=tuple(selectors), gpu_limit=limit, gpu_limit_line=limit_line,
    )]  # fmt: skip
