"""Kubernetes objects -> vLLM workloads: every pod template's containers that run vLLM's server."""

from __future__ import annotations

import re
from collections import deque
from dataclasses import replace

import yaml

from kvdoctor.scan import llm_inference_service, nodes, ray_cluster_gpus
from kvdoctor.scan.command import (FLAGS_ONLY_NOTE, LAUNCHER, RAY_START, WRAPPER_NOTE, expand_words, only_serve_flags,
                                   run_script, runs_a_shell, serve_argv, words_of, wrapper_script)  # fmt: skip
from kvdoctor.scan.documents import PODLESS_KINDS, POD_TEMPLATE_API_GROUPS, Document
from kvdoctor.scan.image import is_vllm_build, runs_vllm_entrypoint
from kvdoctor.scan.image_entrypoints import (entrypoint_for, entrypoint_note, env_argv, names_vllm, unread_release,
                                            unseen_note)  # fmt: skip
from kvdoctor.scan.workload import EnvVar, GpuSelector, Token, Workload

# kind -> key paths to its pod specs (LeaderWorkerSet: leader and workers; KServe: the predictor).
POD_SPECS: dict[str, tuple[tuple[str, ...], ...]] = {
    "Pod": (("spec",),),
    "PodTemplate": (("template", "spec"),),
    "Deployment": (("spec", "template", "spec"),),
    "StatefulSet": (("spec", "template", "spec"),),
    "DaemonSet": (("spec", "template", "spec"),),
    "ReplicaSet": (("spec", "template", "spec"),),
    "ReplicationController": (("spec", "template", "spec"),),
    "Job": (("spec", "template", "spec"),),
    "Rollout": (("spec", "template", "spec"),),
    "CronJob": (("spec", "jobTemplate", "spec", "template", "spec"),),
    "LeaderWorkerSet": (("spec", "leaderWorkerTemplate", "leaderTemplate", "spec"),
                        ("spec", "leaderWorkerTemplate", "workerTemplate", "spec")),  # fmt: skip
    "InferenceService": (("spec", "predictor"),),
    "ServingRuntime": (("spec",), ("spec", "workerSpec")),  # workerSpec: a multi-node runtime's worker pods
    "ClusterServingRuntime": (("spec",), ("spec", "workerSpec")),
}
IMAGE_REQUIRED = {"Pod", "PodTemplate", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ReplicationController",
                  "Job", "Rollout", "CronJob", "LeaderWorkerSet"}  # fmt: skip
"""Kinds whose containers the API server refuses without an image: one without is a fragment (a Kustomize patch,
an overlay), checked only once built with its base."""
FRAGMENT_NOTE = ("{where}: {kind} {name} has a container without an image ({container}): a fragment such as a "
                 "Kustomize patch, not checked on its own (scan the kustomization's folder: kvdoctor scan DIR renders it)")
GPU_RESOURCE = re.compile(r"^nvidia\.com/(gpu|mig-\d+g\.\d+gb)$")
MIG_PROFILE = re.compile(r"mig-(\d+g\.\d+gb)", re.IGNORECASE)
K8S_VARIABLE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
LWS_GROUP_SIZE = "LWS_GROUP_SIZE"

"""The env var LeaderWorkerSet sets in every pod of a group to spec.leaderWorkerTemplate.size (LWS docs, "Environment
variables": LWS_LEADER_ADDRESS, LWS_GROUP_SIZE, LWS_WORKER_INDEX); the other two differ per pod, unknown here."""


KNATIVE_POD_SPEC = (("spec", "template", "spec"),)
"""Where a Knative Service (Cloud Run's service YAML) keeps its pod spec: containers, nodeSelector
(run.googleapis.com/accelerator on Cloud Run), like a Deployment's."""


def has_pod_template(root: yaml.Node) -> bool:
    """Whether a kind that is podless in core Kubernetes (Service) is here one that runs pods (a Knative Service)."""
    api = nodes.text(nodes.get(root, "apiVersion")) or ""
    return api.startswith(POD_TEMPLATE_API_GROUPS)


def pod_spec_paths(root: yaml.Node, kind: str) -> tuple[tuple[str, ...], ...] | None:
    """The key paths to the object's pod specs where its layout is known, else None."""
    return KNATIVE_POD_SPEC if has_pod_template(root) else POD_SPECS.get(kind)


def is_kubernetes(root: yaml.Node) -> bool:
    return nodes.text(nodes.get(root, "kind")) is not None and nodes.get(root, "apiVersion") is not None


def workloads(doc: Document, source_text: str) -> list[Workload]:
    """The vLLM workloads of one Kubernetes object (a `kind: List` is read item by item, an OpenShift `Template`
    object by object, each under its own kind and name)."""
    kind = nodes.text(nodes.get(doc.root, "kind"))
    if kind == "List" or (kind or "").endswith("List"):
        return [w for item in nodes.items(nodes.get(doc.root, "items")) for w in _object(doc.file, item, source_text)]
    if kind == "Template" and nodes.is_seq(nodes.get(doc.root, "objects")):
        return [w for item in nodes.items(nodes.get(doc.root, "objects")) if is_kubernetes(item)
                for w in _object(doc.file, item, source_text)]  # fmt: skip
    return _object(doc.file, doc.root, source_text)


def _object(file: str, root: yaml.Node, source_text: str) -> list[Workload]:
    kind = nodes.text(nodes.get(root, "kind")) or ""
    if kind in PODLESS_KINDS and not has_pod_template(root):
        return []  # a CRD's schema is large and runs nothing
    # a Job created with `kubectl create` takes metadata.generateName, a prefix the API server completes
    name = nodes.text(nodes.get(root, "metadata", "name")) or nodes.text(nodes.get(root, "metadata", "generateName")) \
        or "(unnamed)"
    namespace = nodes.text(nodes.get(root, "metadata", "namespace"))
    found: list[Workload] = []
    paths = pod_spec_paths(root, kind)
    specs = [nodes.get(root, *path) for path in paths] if paths is not None else pod_specs_within(root)
    provided = _group_size_env(root) if kind == "LeaderWorkerSet" else ()
    if kind == "LeaderWorkerSet" and _leader_only(root):
        specs = specs[:1]  # a group of one pod: the leader; the worker template is never instantiated
    ray_start = paths is None and runs_ray_start(root)
    for spec in specs:
        if spec is None:
            continue
        selectors = pod_gpu_selectors(spec)
        for index, container in enumerate(nodes.items(nodes.get(spec, "containers"))):
            if kind in IMAGE_REQUIRED and nodes.get(container, "image") is None:
                continue  # a fragment: named by fragment_note
            if ray_start and index == 0 and _bare(container):
                continue  # KubeRay runs `ray start` there, not the image's entrypoint: named by ray_start_note
            if llm_inference_service.templated(root, container) and spec in _serving_templates(root):
                found.append(_templated_main(root, container, file, selectors))
                continue
            workload = container_workload(
                container, source_text, file=file, line=nodes.line(root), platform="kubernetes", kind=kind,
                name=_role_name(root, kind, name, spec), namespace=namespace, selectors=selectors, provided_env=provided,
                preset=(nodes.text(nodes.get(root, "spec", "baseConfigMapRef", "name")) or "(unnamed)")
                if kind in PRESET_IMAGE_KINDS else None,
            )  # fmt: skip
            if workload is not None:
                found.append(workload)
    if not found and llm_inference_service.templated(root, None) and not any(
            nodes.get(spec, "containers") is not None for spec in _serving_templates(root)):
        found.append(llm_inference_service.bare_workload(root, file))  # no containers: the template's own
    if kind == "LeaderWorkerSet":
        group = leader_worker_gpus(root)
        found = [replace(w, group_gpus=group) if group and w.gpu_limit is not None else w for w in found]
    if paths is None:
        found = [_of_unlisted_kind(w, root, kind) for w in found]
    return found


def unseen_notes(root: yaml.Node, file: str, read: list[Workload]) -> list[str]:
    """Notes for containers that give no command and run an image named for vLLM (or of a release whose entrypoint
    kvdoctor did not read) and were not read as a workload: their command is built where kvdoctor cannot see it."""
    kind = nodes.text(nodes.get(root, "kind")) or ""
    if kind in PODLESS_KINDS and not has_pod_template(root):
        return []
    paths = pod_spec_paths(root, kind)
    if paths is None:
        return []  # a kind without a known layout: named by unread_kind when it mentions vLLM (Ray's `ray start`...)
    specs = [nodes.get(root, *path) for path in paths]
    seen = {w.container for w in read}
    notes = []
    for spec in specs:
        for container in nodes.items(nodes.get(spec, "containers")):
            image = nodes.text(nodes.get(container, "image"))
            name = nodes.text(nodes.get(container, "name")) or "(unnamed)"
            if name in seen or nodes.get(container, "command") is not None:
                continue
            if names_vllm(image) or unread_release(image):
                what = f"{kind} {nodes.text(nodes.get(root, 'metadata', 'name')) or ''} (container {name})"
                notes.append(unseen_note(f"{file}:{nodes.line(nodes.get(container, 'image'))}", what, image))
    return notes


def fragment_note(root: yaml.Node, where: str) -> str | None:
    """A note for an object of a kind that needs images whose containers lack one (its vLLM flags left unchecked)."""
    kind = nodes.text(nodes.get(root, "kind")) or ""
    if kind not in IMAGE_REQUIRED:
        return None
    specs = [nodes.get(root, *path) for path in POD_SPECS[kind]]
    bare = [c for s in specs if s is not None for c in nodes.items(nodes.get(s, "containers"))
            if nodes.get(c, "image") is None]  # fmt: skip
    if not bare:
        return None
    return FRAGMENT_NOTE.format(where=where, kind=kind, name=nodes.text(nodes.get(root, "metadata", "name")) or "",
                                container=nodes.text(nodes.get(bare[0], "name")) or "unnamed")  # fmt: skip


def _group_size_env(root: yaml.Node) -> tuple[EnvVar, ...]:
    """LWS_GROUP_SIZE as LeaderWorkerSet sets it in each pod of the group (spec.leaderWorkerTemplate.size, default 1)."""
    size = nodes.get(root, "spec", "leaderWorkerTemplate", "size")
    text = nodes.text(size) or "1"
    line = nodes.line(size) or nodes.line(root)
    return (EnvVar(LWS_GROUP_SIZE, text, line),) if text.isdigit() else ()


def _leader_only(root: yaml.Node) -> bool:
    """A LeaderWorkerSet whose groups are one pod (spec.leaderWorkerTemplate.size 1, the default) with a leaderTemplate
    of its own: only the leader runs (LWS creates size - 1 workers per group)."""
    template = nodes.get(root, "spec", "leaderWorkerTemplate")
    return (nodes.text(nodes.get(template, "size")) or "1") == "1" and nodes.get(template, "leaderTemplate") is not None


ROLE_NAMED_KINDS = {"ModelService": ("prefill", "decode")}
"""Kinds whose controller names each role's Deployment NAME-ROLE (llm-d's ModelService: `llama-3-2-1b-prefill`,
`llama-3-2-1b-decode`, as llm-d-model-service's generated manifests show)."""
MODEL_URI_KINDS = {"LLMInferenceService": ("spec", "model", "uri"), "ModelService": ("spec", "modelArtifacts", "uri")}
"""Kinds whose controller adds the model of a URI to the vLLM command it builds (KServe's LLMInferenceService config
template; llm-d's ModelService presets serve `hf://ORG/NAME` as ORG/NAME and mount `pvc://` models at a path)."""
PRESET_IMAGE_KINDS = frozenset({"ModelService"})
"""Kinds whose containers may leave out the image: the preset named in baseConfigMapRef supplies vLLM's (llm-d)."""
PRESET_IMAGE_NOTE = ("the container names no image: its preset (baseConfigMapRef) supplies vLLM's image and command, "
                     "which take these serve options")

PRESET_RELEASE = "the image of the llm-d preset {preset} (baseConfigMapRef)"


def _role_name(root: yaml.Node, kind: str, name: str, spec: yaml.Node) -> str:
    """The name of the Deployment a role-named kind creates for the pod spec under spec.<role>, else the object's."""
    for role in ROLE_NAMED_KINDS.get(kind, ()):
        section = nodes.get(root, "spec", role)
        if section is not None and spec.start_mark.index >= section.start_mark.index \
                and spec.end_mark.index <= section.end_mark.index:
            return f"{name}-{role}"
    return name


def pod_specs_within(root: yaml.Node) -> list[yaml.Node]:
    """Every pod spec inside an object of a kind without a listed layout (KubeRay's RayCluster/RayService, AIBrix's
    RayClusterFleet and StormService, KServe's LLMInferenceService): each mapping whose `containers` is a list of
    containers (mappings with an image or a name), outermost first."""
    found: list[yaml.Node] = []
    queue = deque([root])
    while queue:
        node = queue.popleft()
        containers = nodes.get(node, "containers")
        if nodes.is_seq(containers) and any(nodes.get(c, "image") is not None or nodes.get(c, "name") is not None
                                            for c in nodes.items(containers)):  # fmt: skip
            found.append(node)
            continue
        queue.extend([value for _, _, value in nodes.pairs(node)] + nodes.items(node))
    return found


def _of_unlisted_kind(workload: Workload, root: yaml.Node, kind: str) -> Workload:
    """What a kind without a listed layout adds: a Ray cluster spans pods (its GPUs are not one container's), and an
    LLMInferenceService without a command serves spec.model.uri the way its config template does."""
    notes = list(workload.notes) + [f"kind {kind}: its pod templates read as pods (containers that run vLLM)"]
    if is_ray_cluster(root):
        cluster = ray_cluster_gpus.cluster_gpus(root)
        if workload.gpu_limit is not None:
            notes.append(f"{kind} is a Ray cluster: vLLM's workers span its pods, so the container's "
                         f"{workload.gpu_limit} GPU(s) are not compared with -tp x -pp"
                         + (f"; the cluster's {cluster[0]} GPU(s) at most are, for a shortfall" if cluster else ""))
        workload = replace(workload, gpu_limit=None, gpu_limit_line=None, cluster_gpus=cluster)
    uri = nodes.get(root, *MODEL_URI_KINDS[kind]) if kind in MODEL_URI_KINDS else None
    if nodes.text(uri) and names_no_model(workload.argv):
        text = str(nodes.text(uri))
        scheme, _, rest = text.rpartition("://")
        model = rest if kind == "LLMInferenceService" or scheme == "hf" else f"$({text})"  # pvc://: a path not known here
        where = ".".join(MODEL_URI_KINDS[kind][1:])
        notes.append(f"{kind}: its controller runs vllm serve on the model of spec.{where} ({text}), read as "
                     + (model if not model.startswith("$(") else "a model path not known here"))
        workload = replace(workload, argv=(Token(model, nodes.line(uri)),) + workload.argv)
    return replace(workload, notes=tuple(notes))


def names_no_model(argv: tuple[Token, ...]) -> bool:
    from kvdoctor.facts.probes.serve_args import parse_serve_command

    return parse_serve_command([t.text for t in argv], {}).model is None


# KubeRay's BuildPod (ray-operator/controllers/ray/common/pod.go) gives a Ray node's first container that has no
# command `/bin/bash -lc -- "ulimit ...; ray start ..."` unless the pod template sets this annotation to "true".
RAY_OVERWRITE_ANNOTATION = "ray.io/overwrite-container-cmd"


def runs_ray_start(root: yaml.Node) -> bool:
    """Whether the object is a KubeRay cluster whose Ray containers KubeRay gives its own `ray start` command."""
    overwritten = any(nodes.text(nodes.get(node, RAY_OVERWRITE_ANNOTATION)) in ("true", "True")
                      for node in _mappings(root))  # fmt: skip
    return is_ray_cluster(root) and not overwritten


def _bare(container: yaml.Node) -> bool:
    return nodes.get(container, "command") is None and nodes.get(container, "args") is None


def ray_start_note(root: yaml.Node, where: str) -> str | None:
    """A note for a Ray cluster whose containers run KubeRay's `ray start` (no command of their own): vLLM runs
    there only through a job or Serve application that this object does not hold."""
    if not runs_ray_start(root):
        return None
    bare = [nodes.text(nodes.get(c, "name")) or "unnamed" for spec in pod_specs_within(root)
            for c in nodes.items(nodes.get(spec, "containers"))[:1] if _bare(c)]  # fmt: skip
    if not bare:
        return None
    kind = nodes.text(nodes.get(root, "kind"))
    return (f"{where}: {kind} {nodes.text(nodes.get(root, 'metadata', 'name')) or ''}: KubeRay runs `ray start` in "
            f"its Ray containers ({', '.join(bare)}: no command of their own, so not the image's entrypoint); vLLM "
            "runs there only through a Ray job or a Serve application whose Python is not here: not checked")  # fmt: skip


def _mappings(root: yaml.Node, depth: int = 0):
    yield root
    if depth < 12:
        for _, _, value in nodes.pairs(root):
            yield from _mappings(value, depth + 1)
        for item in nodes.items(root):
            yield from _mappings(item, depth + 1)


def is_ray_cluster(root: yaml.Node) -> bool:
    return any(key in ("headGroupSpec", "workerGroupSpecs", "rayClusterConfig") for key in _keys(root))


def _keys(root: yaml.Node, depth: int = 0):
    for key, _, value in nodes.pairs(root):
        yield key
        if depth < 12:
            yield from _keys(value, depth + 1)
    for item in nodes.items(root):
        if depth < 12:
            yield from _keys(item, depth + 1)


def leader_worker_gpus(root: yaml.Node) -> tuple[int, str] | None:
    """A multi-node LeaderWorkerSet's GPUs: the leader pod's + (size - 1) x the worker pod's (every container's
    nvidia.com/gpu), with how they add up; None for a group of one or when the counts are not given."""
    template = nodes.get(root, "spec", "leaderWorkerTemplate")
    size_text = nodes.text(nodes.get(template, "size")) or "1"
    size = int(size_text) if size_text.isdigit() else 1
    if size <= 1:
        return None
    counts = []
    for role in ("leaderTemplate", "workerTemplate"):
        pods = [gpu_limit(c)[0] for c in nodes.items(nodes.get(template, role, "spec", "containers"))]
        counts.append(sum(c for c in pods if c) if any(c is not None for c in pods) else None)
    leader, worker = counts
    if worker is None:
        return None
    if nodes.get(template, "leaderTemplate") is None:
        leader = worker  # without a leaderTemplate the leader runs the worker template
    total = (leader or 0) + (size - 1) * worker
    return total, f"across the LeaderWorkerSet group of {size} pods (leader {leader or 0} + {size - 1} x worker {worker})"


def _serving_templates(root: yaml.Node) -> list[yaml.Node]:
    """An LLMInferenceService's pod templates that run the vLLM server (spec.template, spec.prefill.template), not
    its multi-node workers'."""
    return [t for t in (nodes.get(root, "spec", "template"), nodes.get(root, "spec", "prefill", "template"))
            if t is not None]


def _templated_main(root: yaml.Node, container: yaml.Node, file: str, selectors) -> Workload:
    """An LLMInferenceService's container `main` without a command: its controller's template's vLLM command with
    the container's env, GPUs and args (scan/llm_inference_service.py)."""
    env, env_from = container_env(container)
    limit, limit_line = gpu_limit(container)
    words = llm_inference_service.argv(root, container)
    return Workload(
        file=file, line=nodes.line(root), platform="kubernetes", kind=llm_inference_service.KIND,
        name=nodes.text(nodes.get(root, "metadata", "name")) or "(unnamed)",
        namespace=nodes.text(nodes.get(root, "metadata", "namespace")),
        container=nodes.text(nodes.get(container, "name")) or "main", argv=tuple(words),
        image=nodes.text(nodes.get(container, "image")), image_line=nodes.line(nodes.get(container, "image")),
        command_line=words[0].line, env=tuple(env), env_from=tuple(env_from), gpu_selectors=selectors,
        gpu_limit=limit, gpu_limit_line=limit_line, gpu_slice=mig_slice(container, selectors),
        notes=(llm_inference_service.note(root),),
    )  # fmt: skip


def container_workload(container: yaml.Node, source_text: str, **where) -> Workload | None:
    """A Workload for a Kubernetes container that runs vLLM, else None."""
    image = nodes.text(nodes.get(container, "image"))
    command = words_of(nodes.get(container, "command"), source_text)
    args = words_of(nodes.get(container, "args"), source_text)
    preset = where.pop("preset", None)  # an llm-d preset (baseConfigMapRef) that supplies vLLM's image
    preset_runs_vllm = preset is not None and image is None
    flags_only = not command and not runs_vllm_entrypoint(image) and only_serve_flags(args, is_vllm_build(image)
                                                                                      or preset_runs_vllm)
    script_arg = _script_argument(command, args)
    argv = run_script(args[0][1], source_text) if script_arg else \
        serve_argv(command, args, runs_vllm_entrypoint(image) or flags_only, source_text)
    execs_option = None
    if argv is None and command and command[0][0].text.startswith("-") and (
            runs_vllm_entrypoint(image) or only_serve_flags(command + args, is_vllm_build(image))):
        execs_option = command[0][0].text  # `command: ["--model", M]`: the entrypoint is replaced by an option
        argv = [token for token, _ in command + args]
    wrapper = wrapper_script(command, args, runs_vllm_entrypoint(image) or is_vllm_build(image)) if argv is None else None
    if wrapper:  # the model is the script's to add: unknown here, never vLLM's default
        argv = [Token(f"$({wrapper})", command[0][0].line)] + [token for token, _ in args]
    env, env_from = container_env(container)
    env = list(where.pop("provided_env", ())) + env  # the container's own env wins over what its controller sets
    limit, limit_line = gpu_limit(container)
    # an entrypoint that builds the command from env wins over reading args alone as vLLM's (it never reads them)
    built = None if command else env_built(image, env, limit, nodes.line(container), [token for token, _ in args])
    if built is not None:
        argv, built_notes = built
    if argv is None:
        return None
    argv = _expand_variables(argv, env)
    shell = runs_a_shell(command, args)
    if shell:
        argv = expand_words(argv, {e.name: e.value for e in env if e.value is not None})  # $EXTRA_ARGS: its words
    selectors = where.pop("selectors")
    first = (command or args or [(Token("", nodes.line(container)), None)])[0][0]
    return Workload(
        container=nodes.text(nodes.get(container, "name")) or "(unnamed)",
        image=image,
        image_line=nodes.line(nodes.get(container, "image")),
        argv=tuple(argv),
        command_line=first.line,
        env=tuple(env),
        env_from=tuple(env_from),
        gpu_selectors=selectors,
        gpu_limit=limit,
        gpu_limit_line=limit_line,
        gpu_slice=mig_slice(container, selectors),
        expands_shell=shell,
        execs_option=execs_option,
        ray_cluster=next((" ".join(m.group(0).split()) for token, _ in command + args
                          if (m := RAY_START.search(token.text))), None) if shell or script_arg else None,
        notes=tuple(built[1]) if built is not None else (SCRIPT_ARGUMENT_NOTE,) if script_arg else
              (PRESET_IMAGE_NOTE,) if flags_only and preset_runs_vllm else
              (FLAGS_ONLY_NOTE.format(image=image),) if flags_only else
              (WRAPPER_NOTE.format(image=image, script=wrapper),) if wrapper else (),
        release_by=PRESET_RELEASE.format(preset=preset) if flags_only and preset_runs_vllm else None,
        **where,
    )


SCRIPT_ARGUMENT_NOTE = ("the container's one argument is a whole vLLM command line (a script, no command of its own): "
                        "read as that command, as a shell runs it (`/bin/bash -c`); given to vLLM's entrypoint as "
                        "one argument it would not start")


def _script_argument(command: list, args: list) -> bool:
    """Whether a container without a command has a single argument that is itself a vLLM command line
    (`args: ["python3 -m vllm.entrypoints.openai.api_server \\ --model=..."]`): a script meant for a shell."""
    if command or len(args) != 1 or args[0][1] is None:
        return False
    text = args[0][0].text.strip()
    return not text.startswith("-") and len(text.split()) > 2 and LAUNCHER.search(text) is not None


def env_built(image: str | None, env: list[EnvVar], gpus: int | None, line: int | None,
              args: list[Token] = ()) -> tuple[list[Token], list[str]] | None:  # fmt: skip
    """The argv an image's entrypoint builds from the env (kvdoctor/data/image_entrypoints.yaml) and its notes, for a
    container that gives no command of its own (its `args`, which that entrypoint never reads, named); None for an
    image no row describes."""
    entry = entrypoint_for(image)
    if entry is None:
        return None
    argv, notes = env_argv(entry, env, gpus, line)
    if args:
        notes.append(f"the container's arguments ({' '.join(t.text for t in args)[:80]}) are not read by that "
                     "entrypoint, which builds the command from env only: left out")  # fmt: skip
    return argv, [entrypoint_note(entry)] + notes


def container_env(container: yaml.Node) -> tuple[list[EnvVar], list[str]]:
    env: list[EnvVar] = []
    for item in nodes.items(nodes.get(container, "env")):
        name = nodes.text(nodes.get(item, "name"))
        if not name:
            continue
        value_node = nodes.get(item, "value")
        if value_node is not None or nodes.get(item, "valueFrom") is None:
            env.append(EnvVar(name, nodes.text(value_node) or "", nodes.line(item)))
        else:
            env.append(EnvVar(name, None, nodes.line(item), _value_from(nodes.get(item, "valueFrom"))))
    env_from = []
    for item in nodes.items(nodes.get(container, "envFrom")):
        for key, label in (("secretRef", "Secret"), ("configMapRef", "ConfigMap")):
            ref = nodes.text(nodes.get(item, key, "name"))
            if ref:
                env_from.append(f"{label} {ref!r}")
    return env, env_from


def _value_from(value_from: yaml.Node | None) -> str:
    for key, label in (("secretKeyRef", "Secret"), ("configMapKeyRef", "ConfigMap")):
        ref = nodes.get(value_from, key)
        if ref is not None:
            return f"{label} {nodes.text(nodes.get(ref, 'name'))!r} key {nodes.text(nodes.get(ref, 'key'))!r}"
    if nodes.get(value_from, "fieldRef") is not None:
        return f"field {nodes.text(nodes.get(value_from, 'fieldRef', 'fieldPath'))}"
    return "a resource field" if nodes.get(value_from, "resourceFieldRef") is not None else "valueFrom"


def _expand_variables(argv: list[Token], env: list[EnvVar]) -> list[Token]:
    """Kubernetes expands $(VAR) in command and args from the container's env; literal values only."""
    known = {e.name: e.value for e in env if e.value is not None}
    return [Token(K8S_VARIABLE.sub(lambda m: known.get(m.group(1), m.group(0)), t.text), t.line) for t in argv]


def gpu_limit(container: yaml.Node) -> tuple[int | None, int | None]:
    """GPUs in resources.limits (else requests): nvidia.com/gpu and MIG slices."""
    for section in ("limits", "requests"):
        total, first_line = 0, None
        for key, _, value in nodes.pairs(nodes.get(container, "resources", section)):
            if GPU_RESOURCE.match(key):
                try:
                    total += int(str(nodes.text(value)))
                except ValueError:
                    continue
                first_line = first_line or nodes.line(value)
        if first_line is not None:
            return total, first_line
    return None, None


def mig_slice(container: yaml.Node, selectors: tuple[GpuSelector, ...]) -> str | None:
    """The MIG profile the container gets: a nvidia.com/mig-<profile> resource (mixed strategy) or, with
    nvidia.com/gpu, a node label product value ending -MIG-<profile> (single strategy); None for whole GPUs."""
    for section in ("limits", "requests"):
        for key, _, _ in nodes.pairs(nodes.get(container, "resources", section)):
            if (found := MIG_PROFILE.search(key)) is not None:
                return found.group(1).lower()
    for selector in selectors:
        for value in selector.values:
            if (found := MIG_PROFILE.search(value)) is not None:
                return found.group(1).lower()
    return None


def pod_gpu_selectors(spec: yaml.Node) -> tuple[GpuSelector, ...]:
    """nodeSelector labels and nodeAffinity `In` terms (required, then preferred)."""
    selectors = [
        GpuSelector(key, (nodes.text(value) or "",), nodes.line(value))
        for key, _, value in nodes.pairs(nodes.get(spec, "nodeSelector"))
    ]
    affinity = nodes.get(spec, "affinity", "nodeAffinity")
    for term in nodes.items(nodes.get(affinity, "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")):
        selectors += node_selector_term(term, required=True)
    for preferred in nodes.items(nodes.get(affinity, "preferredDuringSchedulingIgnoredDuringExecution")):
        selectors += node_selector_term(nodes.get(preferred, "preference"), required=False)
    return tuple(selectors)


def node_selector_term(term: yaml.Node | None, required: bool) -> list[GpuSelector]:
    found = []
    for expression in nodes.items(nodes.get(term, "matchExpressions")):
        if nodes.text(nodes.get(expression, "operator")) != "In":
            continue
        key = nodes.text(nodes.get(expression, "key")) or ""
        values = tuple(t for v in nodes.items(nodes.get(expression, "values")) if (t := nodes.text(v)))
        found.append(GpuSelector(key, values, nodes.line(nodes.get(expression, "values")) or nodes.line(expression),
                                 required))  # fmt: skip
    return found
