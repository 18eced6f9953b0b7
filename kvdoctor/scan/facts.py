"""Facts a manifest states about a workload (deploy.*), each with the line it was read from: the vLLM version
from the image tag, the GPU from node labels, GPU counts, the model path and the literal environment."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kvdoctor.base.errors import KvdoctorError
from kvdoctor.data.fact_names import fact_registry
from kvdoctor.facts.collect import release_default_model
from kvdoctor.facts.probes.serve_args import parse_serve_command
from kvdoctor.scan.accelerator import not_judged_line, target_of
from kvdoctor.scan.command import UNRESOLVED
from kvdoctor.scan.image import image_version, is_vllms_own_image
from kvdoctor.scan.image_entrypoints import entrypoint_release
from kvdoctor.scan.package_module import runs_vllm_package
from kvdoctor.scan.serving_crds import PROFILE_PREFIXES
from kvdoctor.scan.translated_options import launcher_options, refused_words
from kvdoctor.scan.visible_devices import visible_devices
from kvdoctor.scan.workload import Location, Workload
from kvdoctor.vllm_pack.candidates import spelled_as_the_pack

SHORT_FLAGS = {"-tp": "--tensor-parallel-size", "-pp": "--pipeline-parallel-size", "-dp": "--data-parallel-size",
               "-q": "--quantization"}  # fmt: skip
GPU_RESOURCE = {"kubernetes": "resources.limits nvidia.com/gpu", "helm": "modelSpec.requestGPU",
                "compose": "the GPU devices reserved (deploy.resources.reservations.devices or gpus:)",
                "Model": "KubeAI spec.resourceProfile", "skypilot": "resources.accelerators",
                "script": "docker run --gpus", "dockerfile": "the run's GPUs", "python": "gpu= count",
                "dstack": "resources.gpu", "nomad": 'resources.device "nvidia/gpu" count',
                "ecs": "resourceRequirements GPU", "ansible": "the task's device_requests",
                "nixos": "extraOptions' --gpus / --device nvidia.com/gpu=... (CDI)"}  # fmt: skip
GENERIC_PRODUCT_KEY = "nvidia.com/gpu.product"  # an unlisted label that names the GPU is matched as a product name
ENV_READ_OUTSIDE_RULES = ("VLLM_ATTENTION_BACKEND",)  # read into serve.attention_backend, not an env.* fact


def is_scan_fact_name(name: str) -> bool:
    """Whether a scan rule may test `name`: a check fact or a deploy.* fact (data/fact_names.yaml)."""
    return fact_registry().is_declared(name, scope="scan")


def canonical_flag(flag: str) -> str:
    flag = SHORT_FLAGS.get(flag, flag)
    return "--" + flag[2:].replace("_", "-") if flag.startswith("--") else flag


@dataclass(frozen=True)
class DeploymentFacts:
    gpu: str | None
    """A --gpu value for check: the GPU the node labels name, else the default."""
    vllm_version: str | None
    environ: dict[str, str]
    """Literal VLLM_* values only: the scanning machine's environment is not the pod's."""
    model: str | None
    """The model as the manifest writes it."""
    model_path: str | None
    """The local directory or file it resolves to (next to the manifest, else the working directory)."""
    data_parallel_size: int
    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, Location] = field(default_factory=dict)
    """Fact name or prefix ('gpu.', 'vllm.', 'model.', 'env.NAME', 'deploy.gpu_limit') -> manifest line."""
    notes: tuple[str, ...] = ()
    unjudged: tuple[str, ...] = ()
    """What the manifest leaves unknown that some checks need (no GPU named), each with the flag that supplies it."""
    gpus_ceiling: bool = False
    """deploy.gpu_limit is a Ray cluster's most GPUs: fewer than needed is judged, more is not (other engines, Ray)."""

    def flat(self, check_facts: dict[str, Any]) -> dict[str, Any]:
        """deploy.* facts, GPU counts compared with the parallel sizes the check read."""
        values = dict.fromkeys(fact_registry().names(produced_by="deploy")) | self.values
        tp, pp = check_facts.get("serve.tensor_parallel_size"), check_facts.get("serve.pipeline_parallel_size")
        limit = values.get("deploy.gpu_limit")
        if isinstance(tp, int) and isinstance(pp, int):
            needed = tp * pp * self.data_parallel_size
            values["deploy.gpus_needed"] = needed
            if isinstance(limit, int) and limit > 0:
                values["deploy.gpus_short"] = limit < needed
                values["deploy.gpus_idle"] = limit > needed and not self.gpus_ceiling
        return values


def deployment_facts(workload: Workload, defaults, settings) -> DeploymentFacts:
    """Read what the manifest states; what it leaves unknown (the GPU) is said in ``unjudged``."""
    sources: dict[str, Location] = {}
    notes: list[str] = []
    values: dict[str, Any] = {"deploy.platform": workload.platform, "deploy.image": workload.image,
                              "deploy.execs_option": workload.execs_option,
                              "deploy.non_string_item": workload.non_string_item and workload.non_string_item[0],
                              "deploy.command_cut": workload.command_cut,
                              "deploy.runs_vllm_package": runs_vllm_package(workload) or None}
    if workload.execs_option:
        sources["deploy.execs_option"] = workload.at(workload.command_line, f"command: {workload.execs_option} ...")
    refused = workload.launcher_refused or refused_words(workload.argv)  # judged, or read straight from a manifest
    if refused:
        first = refused[0]
        values["deploy.launcher_refused"] = (f"{first.via.launcher} is given {' '.join(t.text for t in refused)}, "
                                             f"and its options are {launcher_options(first.via.launcher)}")
        sources["deploy.launcher_refused"] = workload.at(first.line, first.text)
    if values["deploy.runs_vllm_package"]:
        sources["deploy.runs_vllm_package"] = workload.at(workload.command_line, "python -m vllm serve")
    if workload.command_cut:
        sources["deploy.command_cut"] = workload.at(workload.command_line, "command given as a string")
    if workload.non_string_item:
        sources["deploy.non_string_item"] = workload.at(workload.non_string_item[1], workload.non_string_item[0])
    version = _version(workload, defaults, values, sources, notes)
    if version is not None:  # a pin's '0.6.3post1' is the pack's 0.6.3.post1
        version = spelled_as_the_pack(version)
    unjudged: list[str] = []
    target = target_of(workload)
    gpu = _gpu(workload, defaults if target is None else replace(defaults, gpu=None), values, sources, notes, unjudged)
    if target is not None and not str(values.get("deploy.gpu_from") or "").startswith("node label"):
        gpu, values["deploy.accelerator"], sources["deploy.accelerator"] = None, target.accelerator.name, target.at
        unjudged[:] = [not_judged_line(target)]  # instead of 'GPU unknown: pass --gpu'
    environ = _environ(workload, settings, values, sources, notes)
    model, model_path = _model(workload, version, defaults, sources, notes)
    ceiling = _gpu_count(workload, values, sources, notes)
    return DeploymentFacts(gpu, version, environ, model, model_path, _data_parallel(workload), values, sources,
                           tuple(notes), tuple(unjudged), gpus_ceiling=ceiling)  # fmt: skip


def _model(workload: Workload, version: str | None, defaults, sources, notes) -> tuple[str | None, str | None]:
    """(the model as written, or the release's default when the command names none; the local path it resolves to
    or None)."""
    model = parse_serve_command([t.text for t in workload.argv], {}).model
    if model is None:
        default = release_default_model(version)
        if default is None:
            return None, None
        from kvdoctor.vllm_pack.candidates import candidates, releases_around

        around = releases_around(version) if version and not candidates(version).releases else ()
        inferred = (f" (the default of {around[0].version} and {around[1].version}, the releases read on either side)"
                    if around else "")
        notes.append(f"the command names no model: vLLM {version or '(every candidate release)'} serves its "
                     f"parser's default, {default}{inferred}")
        sources["model."] = workload.at(workload.command_line or workload.image_line or workload.line,
                                        f"model {default} (vLLM's default)")
        return default, None
    token = next((t for t in workload.argv if t.text in (model, f"--model={model}")), None)
    if token is not None:
        sources["model."] = workload.at(token.line, f"model {model}")
    mapped = defaults.model_paths.get(model)
    local = resolve_model(mapped, ".") if mapped else resolve_model(model, workload.file)
    if mapped and local is None:
        raise KvdoctorError(f"--model-path {model}={mapped}: {mapped} does not exist")
    if local and local != model:
        notes.append(f"model {model} read from {local}" + (" (--model-path)" if mapped else ""))
    return model, local


PARALLEL_FLAGS = ("--tensor-parallel-size", "--pipeline-parallel-size")


def _gpu_count(workload: Workload, values, sources, notes) -> bool:
    """deploy.gpu_limit and its resource from the workload's GPUs; True when it is a Ray cluster's ceiling."""
    if workload.cluster_gpus is not None:  # a shortfall is the engine's to fix: placed on its parallel sizes' line
        values["deploy.gpu_limit"], across = workload.cluster_gpus
        values["deploy.gpu_resource"] = f"nvidia.com/gpu {across}"
        sizes = [t for t in workload.argv if canonical_flag(t.text.partition("=")[0]) in PARALLEL_FLAGS]
        if sizes:
            sources["deploy.gpus_short"] = workload.at(sizes[0].line, sizes[0].text)
        return True
    visible = visible_devices(workload)
    if visible is not None and visible.count == 0:
        values["deploy.no_visible_gpu"] = visible.resource
        sources["deploy.no_visible_gpu"] = workload.at(visible.line, f"CUDA_VISIBLE_DEVICES={visible.value}")
        return False
    if visible is not None and (workload.gpu_limit is None or visible.count < workload.gpu_limit):
        # CUDA shows vLLM only these, whatever the machine or the container has
        workload = replace(workload, gpu_limit=visible.count, gpu_limit_line=visible.line, group_gpus=None)
    if workload.gpu_limit is None:
        return False
    spans = _spans_nodes(workload)
    if workload.group_gpus is None and spans:  # vLLM's workers on other pods too: this pod's GPUs are not all of them
        notes.append(f"{spans}: vLLM's workers span several pods, so this pod's {workload.gpu_limit} GPU(s) are not "
                     "compared with -tp x -pp")  # fmt: skip
        return False
    resource, limit = GPU_RESOURCE.get(workload.kind, GPU_RESOURCE[workload.platform]), workload.gpu_limit
    if visible is not None and limit == visible.count:
        resource = visible.resource
    where = workload.at(workload.gpu_limit_line, f"{resource}: {limit}")
    if workload.group_gpus is not None:  # multi-node: vLLM's workers span every pod of the group
        limit, across = workload.group_gpus
        resource = f"{resource} {across}"
    values["deploy.gpu_limit"] = limit
    values["deploy.gpu_resource"] = resource
    for name in ("deploy.gpu_limit", "deploy.gpus_short", "deploy.gpus_idle"):
        sources[name] = where
    return False


def _spans_nodes(workload: Workload) -> str | None:
    """The flag that says vLLM runs across pods (Ray's executor, --nnodes, a headless data-parallel rank, a Ray node
    its own script starts), or None."""
    if workload.ray_cluster:
        return f"`{workload.ray_cluster}` in its command"
    words = [t.text for t in workload.argv]
    for index, word in enumerate(words):
        flag, _, inline = word.partition("=")
        flag = canonical_flag(flag)
        value = inline or (words[index + 1] if index + 1 < len(words) else "")
        if flag == "--distributed-executor-backend" and value.strip("'\"") == "ray":
            return "--distributed-executor-backend ray"
        if flag == "--nnodes" and value.isdigit() and int(value) > 1 or flag in ("--headless", "--node-rank"):
            return f"{flag} {value}".strip() if flag != "--headless" else flag
    return None


def resolve_model(model: str | None, manifest: str) -> str | None:
    """A model path that exists here: absolute, else next to the manifest, else under the working directory.
    ``manifest`` '.' or '<stdin>' resolves against the working directory only."""
    if not model:
        return None
    path = Path(model).expanduser()
    base = Path(manifest).parent if manifest != "<stdin>" else Path.cwd()
    for candidate in ([path] if path.is_absolute() else [base / path, Path.cwd() / path]):
        if candidate.exists():
            try:
                return str(candidate.resolve().relative_to(Path.cwd().resolve()))
            except ValueError:
                return str(candidate.resolve())
    return None


def _version(workload: Workload, defaults, values, sources, notes) -> str | None:
    if workload.image:
        sources["vllm."] = sources["deploy.image_pinned"] = workload.at(workload.image_line, f"image {workload.image}")
        found = image_version(workload.image)
        values["deploy.image_pinned"] = found.vllm_version is not None
        values["deploy.image_vllms_own"] = is_vllms_own_image(workload.image)
        if found.vllm_version:
            if found.why_unknown:
                notes.append(found.why_unknown)
            return found.vllm_version
        installed = entrypoint_release(workload.image)
        if installed is not None:  # an image whose tag installs a known vLLM release (a serving worker's build)
            values["deploy.image_pinned"] = True
            notes.append(installed[1])
            return installed[0]
        values["deploy.image_note"] = found.why_unknown
    else:
        values["deploy.image_pinned"] = False
        values["deploy.image_note"] = f"{workload.release_by} decides the vLLM release" if workload.release_by \
            else "the service names no image"
    if workload.vllm_pin:  # no image tag names it, the build pins it (pip install vllm==X)
        sources["vllm."] = workload.at(workload.vllm_pin_line, f"vllm=={workload.vllm_pin}")
        values["deploy.image_pinned"] = True
        return workload.vllm_pin
    if workload.release_by and not workload.image:  # an operator, the script's environment: not this manifest
        values["deploy.release_by"] = workload.release_by
        sources["deploy.release_by"] = workload.at(workload.command_line)
    if defaults.vllm_version:
        notes.append(f"vLLM {defaults.vllm_version} from --vllm-version: {values['deploy.image_note']}")
        return defaults.vllm_version
    notes.append(f"vLLM version unknown: {values['deploy.image_note']}")
    return None


def _gpu(workload: Workload, defaults, values, sources, notes, unjudged: list[str]) -> str | None:
    """The GPU the node labels name, else --gpu, else None with why in ``unjudged``."""
    from kvdoctor.data.gpus import gpu_for_node_label, node_label_keys

    keys = node_label_keys()
    candidates, unknown = [], []
    for preferred in (False, True):  # required terms decide; preferred ones only when none is required
        for selector in workload.gpu_selectors:
            named = selector.key in keys or _names_a_gpu(selector.key) or selector.key in PROFILE_PREFIXES
            if selector.required == preferred or not named:
                continue
            for value in selector.values:
                profile = selector.key in PROFILE_PREFIXES
                what = f"{selector.key} {value}" if profile else f"node label {selector.key}={value}"
                if selector.key in PROFILE_PREFIXES:  # KubeAI's resourceProfile, Ray Serve's accelerator_type
                    value = value.removeprefix(PROFILE_PREFIXES[selector.key])
                device = gpu_for_node_label(selector.key if selector.key in keys else GENERIC_PRODUCT_KEY, value)
                if device is None:
                    unknown.append(f"{selector.key}={value}")
                    notes.append(f"{what}: unknown GPU label value {value!r} "
                                 "(kvdoctor/data/gpus.yaml lists the values it reads)")  # fmt: skip
                else:
                    candidates.append((device, selector, value))
                    if selector.key not in keys:
                        notes.append(f"{what} read as the GPU name {device.name}")
        if candidates:
            break
    if candidates:
        device, selector, value = min(candidates, key=lambda c: (c[0].capability, c[0].memory_gib or 0))
        names = sorted({c[0].name for c in candidates})
        if len(names) > 1:
            notes.append(f"the node labels allow {', '.join(names)}; the weakest, {device.name}, decides")
        sources["gpu."] = workload.at(selector.line, f"{selector.key}: {value}")
        values["deploy.gpu_from"] = (f"{selector.key} {selector.values[0]}" if selector.key in PROFILE_PREFIXES
                                     else f"node label {selector.key}={value}")  # fmt: skip
        return device.name
    if defaults.gpu:
        values["deploy.gpu_from"] = "--gpu"
        notes.append(f"GPU {defaults.gpu} from --gpu: the manifest's node labels name none")
        return defaults.gpu
    if unknown:
        unjudged.append(f"GPU unknown: unknown GPU label value in node label {unknown[0]}; the checks that need the "
                        "GPU are undecided: pass --gpu (kvdoctor gpus lists the names)")  # fmt: skip
    else:
        unjudged.append("GPU unknown: the manifest names no GPU (no nvidia.com/gpu.product, GKE accelerator or "
                        "instance-type node label); the checks that need the GPU are undecided: pass --gpu, "
                        "e.g. --gpu A100")  # fmt: skip
    return None


def _names_a_gpu(key: str) -> bool:
    """A node label kvdoctor does not list whose name says it names the GPU (e.g. a cloud's .../gpu-name)."""
    name = key.rsplit("/", 1)[-1].lower()
    return "gpu" in name and any(word in name for word in ("name", "product", "model", "type")) or name == "accelerator"


def _environ(workload: Workload, settings, values, sources, notes) -> dict[str, str]:
    from kvdoctor.rules import load_all_rules

    read = {f[4:] for r in load_all_rules(list(settings.rules_files)) if r.when for f in r.when.facts_used()
            if f.startswith("env.")} | set(ENV_READ_OUTSIDE_RULES)  # fmt: skip
    environ: dict[str, str] = {}
    unknown = []
    for var in workload.env:
        sources[f"env.{var.name}"] = workload.at(var.line, f"{var.name}={var.value if var.value is not None else '?'}")
        # a value holding a shell variable the file does not set (-e VLLM_ATTENTION_BACKEND=$BACKEND) is unknown too
        variable = UNRESOLVED.search(var.value) if var.value is not None else None
        if var.value is not None and variable is None:
            environ[var.name] = var.value
        elif var.name.startswith("VLLM_"):
            environ.pop(var.name, None)
            if variable is not None:
                var = replace(var, source=f"the shell variable {variable.group(0)}")
            if var.name in read:
                unknown.append(var)
            else:
                notes.append(f"{var.name} comes from {var.source}; its value is unknown here")
    if unknown:
        values["deploy.unknown_env"] = ", ".join(v.name for v in unknown)
        values["deploy.unknown_env_source"] = "; ".join(str(v.source) for v in unknown)
        sources["deploy.unknown_env"] = sources[f"env.{unknown[0].name}"]
    for whole in workload.env_from:
        notes.append(f"environment from {whole}: any VLLM_* variable in it is unknown here")
    return {k: v for k, v in environ.items() if k.startswith("VLLM_")}


def _data_parallel(workload: Workload) -> int:
    """--data-parallel-size, the ranks the workload's GPUs serve (a LeaderWorkerSet's group: all its pods'); one for a
    rank launched on its own (--data-parallel-rank without --data-parallel-size-local: each pod one rank, vLLM's
    multi-node data parallel with external launch)."""
    words = [t.text for t in workload.argv]
    if _flag_value(words, "--data-parallel-rank") is not None and _flag_value(words, "--data-parallel-size-local") is None:
        return 1
    size = _flag_value(words, "--data-parallel-size")
    return int(size) if size is not None and size.isdigit() and int(size) > 0 else 1


def _flag_value(words: list[str], name: str) -> str | None:
    for index, word in enumerate(words):
        flag, has_value, inline = word.partition("=")
        if canonical_flag(flag) == name:
            return inline if has_value else (words[index + 1] if index + 1 < len(words) else "")
    return None
