"""Serving resources that give vLLM its arguments as data rather than as a container command: KubeAI's `Model`
(spec.url, spec.args, spec.env, spec.resourceProfile) and Ray Serve LLM's `llm_configs` inside a KubeRay
RayService (spec.serveConfigV2: model_loading_config, engine_kwargs, runtime_env, accelerator_type). Each becomes
the `vllm serve` argv the operator starts, every word on the manifest line it comes from."""

from __future__ import annotations

import yaml

from kvdoctor.base.yaml_safe import safe_loader
from kvdoctor.scan import nodes, ray_cluster_gpus, slurm_jobs
from kvdoctor.scan.documents import Document
from kvdoctor.scan.engine_kwargs import flag_words
from kvdoctor.scan.scripts import PIP_PIN
from kvdoctor.scan.workload import EnvVar, GpuSelector, Token, Workload

KUBEAI_PROFILE = "resourceProfile"
"""KubeAI's resource profile (nvidia-gpu-l4:1): a GPU named in a profile, read as a product name."""
RAY_SERVE_LLM = "ray.serve.llm"
"""Ray Serve LLM's module (build_openai_app): it serves with vLLM's engine."""
RAY_ACCELERATOR = "accelerator_type"
"""Ray Serve LLM's accelerator_type (H100, L4, L40S): a GPU product name."""
PROFILE_PREFIXES = {KUBEAI_PROFILE: "nvidia-gpu-", RAY_ACCELERATOR: "", "accelerators": "", "flavor": "", "gpu": "",
                    slurm_jobs.GPU_TYPE_KEY: ""}
"""Selector keys that are no node label but name a GPU after this prefix (read by scan/facts.py)."""


def is_kubeai_vllm_model(root: yaml.Node) -> bool:
    api = nodes.text(nodes.get(root, "apiVersion")) or ""
    engine = (nodes.text(nodes.get(root, "spec", "engine")) or "").lower()
    return api.startswith("kubeai.org/") and nodes.text(nodes.get(root, "kind")) == "Model" and engine == "vllm"


def kubeai_workloads(doc: Document, source_text: str) -> list[Workload]:
    """A KubeAI Model with engine VLLM: KubeAI runs `vllm serve <model> <spec.args>` on the profile's GPUs."""
    root, spec = doc.root, nodes.get(doc.root, "spec")
    url = nodes.get(spec, "url")
    argv = [Token(_model_of(nodes.text(url) or ""), nodes.line(url))] if nodes.text(url) else []
    argv += [Token(t, nodes.line(item)) for item in nodes.items(nodes.get(spec, "args")) if (t := nodes.text(item))]
    env = [EnvVar(name, nodes.text(value), nodes.line(value)) for name, _, value in nodes.pairs(nodes.get(spec, "env"))]
    profile = nodes.get(spec, "resourceProfile")
    name_part, _, count = (nodes.text(profile) or "").partition(":")
    named = name_part.startswith("nvidia-")
    selectors = (GpuSelector(KUBEAI_PROFILE, (name_part,), nodes.line(profile)),) if named else ()
    return [Workload(
        file=doc.file, line=nodes.line(root), platform="kubernetes", kind="Model",
        name=nodes.text(nodes.get(root, "metadata", "name")) or "(unnamed)", container="vllm",
        namespace=nodes.text(nodes.get(root, "metadata", "namespace")), image=None, argv=tuple(argv),
        command_line=nodes.line(url), env=tuple(env), gpu_selectors=selectors,
        gpu_limit=int(count) if count.isdigit() else None, gpu_limit_line=nodes.line(profile),
        notes=(f"KubeAI Model: vllm serve {argv[0].text if argv else '?'} with spec.args; the image comes from "
               "KubeAI's configuration (modelServers.VLLM), so the vLLM version is unknown here",),
    )]  # fmt: skip


def _model_of(url: str) -> str:
    """hf://org/name -> org/name; other stores (pvc://, s3://, gs://) stay as written: not readable here."""
    return url.split("://", 1)[1] if url.startswith("hf://") else url


def is_ray_serve_llm(root: yaml.Node) -> bool:
    serves = nodes.text(nodes.get(root, "kind")) == "RayService" or is_serve_config_file(root)
    return serves and bool(_llm_configs(root) or _engine_args(root))


def is_serve_config_file(root: yaml.Node) -> bool:
    """A Ray Serve config file (`serve deploy config.yaml`: top-level applications, each with an import_path) that
    names vLLM or Ray Serve LLM (vLLM's engine): what a RayService holds in spec.serveConfigV2."""
    apps = nodes.items(nodes.get(root, "applications"))
    return nodes.get(root, "apiVersion") is None and bool(apps) \
        and all(nodes.text(nodes.get(app, "import_path")) for app in apps) \
        and any("vllm" in text.lower() or text.startswith(RAY_SERVE_LLM) for text in nodes.scalars(root))  # fmt: skip


def _owner(doc: Document) -> tuple[str, str]:
    """(kind, name) the workloads of a RayService or a Serve config file are titled with."""
    if is_serve_config_file(doc.root):
        return "Ray Serve config", doc.file.rsplit("/", 1)[-1]
    return "RayService", nodes.text(nodes.get(doc.root, "metadata", "name")) or "(unnamed)"


def ray_serve_workloads(doc: Document, source_text: str) -> list[Workload]:
    """Each Ray Serve LLM `llm_configs` entry of a RayService: Ray Serve builds vLLM's engine from engine_kwargs."""
    root = doc.root
    head = nodes.items(nodes.get(root, "spec", "rayClusterConfig", "headGroupSpec", "template", "spec", "containers"))
    image_node = nodes.get(head[0], "image") if head else None
    found = []
    for index, (config, offset, held_by) in enumerate(_llm_configs(root)):
        loading = nodes.get(config, "model_loading_config")
        source = nodes.get(loading, "model_source") or nodes.get(loading, "model_id")
        model_id = nodes.text(nodes.get(loading, "model_id")) or nodes.text(source) or f"{held_by}[{index}]"
        argv = [Token(nodes.text(source) or "", _at(source, offset))] if nodes.text(source) else []
        for key, _, value in nodes.pairs(nodes.get(config, "engine_kwargs")):
            argv += _flag(key, value, _at(value, offset))
        env = [EnvVar(name, nodes.text(value), _at(value, offset))
               for name, _, value in nodes.pairs(nodes.get(config, "runtime_env", "env_vars"))]  # fmt: skip
        accelerator = nodes.get(config, "accelerator_type")
        selectors = ((GpuSelector(RAY_ACCELERATOR, (str(nodes.text(accelerator)),), _at(accelerator, offset)),)
                     if nodes.text(accelerator) else ())  # fmt: skip
        kind, owner = _owner(doc)
        pin = _runtime_env_pin(nodes.get(config, "runtime_env"), offset)
        found.append(Workload(
            file=doc.file, line=_at(config, offset), platform="kubernetes", kind=kind,
            name=owner, container=f"{held_by} {model_id}",
            namespace=nodes.text(nodes.get(root, "metadata", "namespace")), image=nodes.text(image_node),
            image_line=nodes.line(image_node), argv=tuple(argv), command_line=_at(config, offset), env=tuple(env),
            gpu_selectors=selectors, cluster_gpus=ray_cluster_gpus.cluster_gpus(root),
            vllm_pin=pin[0] if pin else None, vllm_pin_line=pin[1] if pin else None,
            notes=("Ray Serve LLM: vLLM's engine arguments from engine_kwargs, read as vllm serve flags; " + RAY_PLACES,)
            + ((PIN_NOTE.format(release=pin[0]),) if pin else ()),
        ))  # fmt: skip
    return found + [_engine_args_workload(doc, root, image_node, *found_args) for found_args in _engine_args(root)]


def _engine_args_workload(doc: Document, root: yaml.Node, image_node, app: yaml.Node, engine: yaml.Node,
                          offset: int) -> Workload:  # fmt: skip
    """A Ray Serve application of its own (vLLM's example VLLMDeployment) whose engine arguments are data in the
    config: the mapping is read as AsyncEngineArgs' fields, i.e. the `vllm serve` flags of the same names."""
    from_env = engine is nodes.get(app, "runtime_env", "env_vars")
    model = next((nodes.get(engine, n) for n in MODEL_ENV if nodes.text(nodes.get(engine, n))), None) if from_env \
        else nodes.get(engine, "model")
    argv = [Token(nodes.text(model) or "", _at(model, offset))]
    for key, _, value in nodes.pairs(engine):
        if value is model:
            continue
        if not from_env:
            argv += _flag(key, value, _at(value, offset))
        elif _is_serve_field(field := ENV_ALIASES.get(key, key.lower())):  # MAX_MODEL_LEN -> --max-model-len
            text = nodes.text(value) or ""
            plain = {"true": True, "false": False}.get(text.lower(), text)
            argv += flag_words(field, plain, _at(value, offset))
    env = [EnvVar(name, nodes.text(value), _at(value, offset))
           for name, _, value in nodes.pairs(nodes.get(app, "runtime_env", "env_vars"))]  # fmt: skip
    name = nodes.text(nodes.get(app, "name")) or "(unnamed)"
    kind, owner = _owner(doc)
    pin = _runtime_env_pin(nodes.get(app, "runtime_env"), offset)
    return Workload(
        file=doc.file, line=_at(engine, offset), platform="kubernetes", kind=kind,
        name=owner, container=f"serve app {name}",
        namespace=nodes.text(nodes.get(root, "metadata", "namespace")), image=nodes.text(image_node),
        image_line=nodes.line(image_node), argv=tuple(argv), command_line=_at(engine, offset), env=tuple(env),
        notes=(f"Ray Serve application {name}: its own deployment class builds vLLM's engine; " + (
            "its code is not in this file: runtime_env variables named after vLLM's engine arguments (MODEL_ID, "
            "MAX_MODEL_LEN, TENSOR_PARALLEL_SIZE, ...) are read as those arguments, by that common convention"
            if from_env else "the mapping with a `model` key in its args / user_config is read as vLLM's engine "
            "arguments (vllm serve flags of the same names)") + "; " + RAY_PLACES,)
        + ((PIN_NOTE.format(release=pin[0]),) if pin else ()),
        cluster_gpus=ray_cluster_gpus.cluster_gpus(root),
        vllm_pin=pin[0] if pin else None, vllm_pin_line=pin[1] if pin else None,
    )  # fmt: skip


PIN_NOTE = "vLLM {release} installed by the application's runtime_env pip list: read as that release"


def _runtime_env_pin(runtime_env: yaml.Node | None, offset: int) -> tuple[str, int | None] | None:
    """The release a Ray runtime_env installs (`pip: ["vllm==0.5.4"]`, or `pip: {packages: [...]}`), and its line."""
    pip = nodes.get(runtime_env, "pip")
    packages = nodes.get(pip, "packages") if nodes.is_map(pip) else pip
    for item in nodes.items(packages) if nodes.is_seq(packages) else ():
        found = PIP_PIN.match((nodes.text(item) or "").strip())
        if found:
            return found.group(1), _at(item, offset)
    return None


RAY_PLACES = ("Ray places its workers anywhere in the cluster, so only the cluster's most GPUs are compared with "
              "-tp x -pp: fewer than one engine needs cannot be placed")
ENV_ALIASES = {"TENSOR_PARALLELISM": "tensor_parallel_size", "PIPELINE_PARALLELISM": "pipeline_parallel_size"}
"""Variables of KubeRay's and GKE's vLLM sample app (its serve.py: "tensor-parallel-size":
os.environ.get('TENSOR_PARALLELISM'), "pipeline-parallel-size": os.environ.get('PIPELINE_PARALLELISM')), which copies
of it keep; other variables are the app's own unless named after an engine argument."""
MODEL_ENV = ("MODEL_ID", "MODEL_NAME", "MODEL")
"""Environment variables a Ray Serve vLLM app conventionally reads its model from (os.environ['MODEL_ID'])."""


def _is_serve_field(name: str) -> bool:
    """Whether some release's `vllm serve` has the flag of this EngineArgs field name."""
    from kvdoctor.vllm_pack.candidates import all_serve_options

    return "--" + name.replace("_", "-") in all_serve_options()


def _engine_args(root: yaml.Node) -> list[tuple[yaml.Node, yaml.Node, int]]:
    """(application, engine-argument mapping, line offset) of each serveConfigV2 application that is not Ray
    Serve LLM's and gives vLLM's engine arguments as data: a mapping with a string `model` key in the application's
    `args` (or one level below it) or in a deployment's `user_config` (or one level below it); or, for an app without
    args, its runtime_env variables when one names the model (MODEL_ID)."""
    inner, offset = _serve_config_of(root)
    found = []
    for app in nodes.items(nodes.get(inner, "applications")):
        if any(nodes.get(app, "args", name) is not None for name in ("llm_configs", *_ONE_CONFIG_ARGS)):
            continue
        env = nodes.get(app, "runtime_env", "env_vars")
        if any(nodes.text(nodes.get(env, name)) for name in MODEL_ENV) and nodes.get(app, "args") is None:
            found.append((app, env, offset))  # the app reads its engine arguments from its environment
            continue
        places = [nodes.get(app, "args")] + [nodes.get(d, "user_config")
                                             for d in nodes.items(nodes.get(app, "deployments"))]  # fmt: skip
        for place in places:
            candidates = [place] + [value for _, _, value in nodes.pairs(place)] if nodes.is_map(place) else []
            engine = next((c for c in candidates if nodes.is_map(c) and nodes.text(nodes.get(c, "model"))), None)
            if engine is not None:
                found.append((app, engine, offset))
                break
    return found


def _serve_config_of(root: yaml.Node) -> tuple[yaml.Node | None, int]:
    """The Serve config a document holds, and its line offset: a Serve config file is its own."""
    return (root, 0) if is_serve_config_file(root) else _serve_config(nodes.get(root, "spec", "serveConfigV2"))


def _serve_config(serve: yaml.Node | None) -> tuple[yaml.Node | None, int]:
    """serveConfigV2 (a YAML string) composed, and the line offset of its text in the manifest."""
    text = nodes.text(serve)
    if not text:
        return None, 0
    try:
        inner = yaml.compose(text, Loader=safe_loader())
    except yaml.YAMLError:
        return None, 0
    return inner, (nodes.line(serve) or 1) - (0 if serve.style in ("|", ">") else 1)


# The arguments of Ray Serve LLM's builders that hold one LLMConfig each: build_pd_openai_app's prefill and decode
# servers (ray.serve.llm's PDServingArgs), which custom P/D builders take by the same names
_ONE_CONFIG_ARGS = ("prefill_config", "decode_config")


def _llm_configs(root: yaml.Node) -> list[tuple[yaml.Node, int, str]]:
    """(each LLMConfig an application's args hold, the line offset of the text it was composed from, the argument
    that holds it): `llm_configs` entries, and the prefill and decode configs of a disaggregated (P/D) app.
    serveConfigV2 is a YAML string."""
    inner, offset = _serve_config_of(root)
    found = []
    for app in nodes.items(nodes.get(inner, "applications")):
        configs = nodes.items(nodes.get(app, "args", "llm_configs"))
        found += [(config, offset, "llm_configs") for config in configs if nodes.is_map(config)]
        found += [(config, offset, name) for name in _ONE_CONFIG_ARGS
                  if nodes.is_map(config := nodes.get(app, "args", name))]
    return found


def _at(node: yaml.Node | None, offset: int) -> int | None:
    line = nodes.line(node)
    return line + offset if line is not None else None


def _flag(key: str, value: yaml.Node, line: int | None) -> list[Token]:
    """engine_kwargs key: value -> the serve flag vLLM's parser maps to the same field (EngineArgs names)."""
    plain = nodes.plain(value)
    return flag_words(key, plain if plain is None or isinstance(plain, (bool, dict, list)) else nodes.text(value), line)
