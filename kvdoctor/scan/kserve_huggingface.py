"""KServe's Hugging Face runtime: an InferenceService whose `spec.predictor.model` has modelFormat huggingface (or runtime
kserve-huggingfaceserver) runs KServe's huggingfaceserver, which serves with vLLM's engine unless `--backend=huggingface`.
Its args are read as that server reads them: KServe's own options (--model_name, --model_id, --backend, ...) apart,
the rest vLLM's; the vLLM release is the one the runtime's image installs (kvdoctor/data/kserve_huggingface.yaml),
unknown when no image of a listed tag is in the scanned files."""

from __future__ import annotations

import re
from dataclasses import replace

import yaml

from kvdoctor.base.yaml_safe import load_yaml_cached
from kvdoctor.data import read_data
from kvdoctor.scan import kubernetes, nodes
from kvdoctor.scan.command import words_of
from kvdoctor.scan.documents import Document
from kvdoctor.scan.image import repository_path, split_image
from kvdoctor.scan.kserve_runtimes import RUNTIME_CONTAINER, Runtime, predictor_pod, runtime_for
from kvdoctor.scan.kustomize_patches import set_key
from kvdoctor.scan.marks import marked, placed_document
from kvdoctor.scan.workload import Workload

HF = load_yaml_cached(read_data("kserve_huggingface.yaml"), "kserve_huggingface.yaml")
RELEASES = {row["tag"]: row for row in HF["vllm_releases"]}
SERVER_MODULE = "huggingfaceserver"
SHELLS = ("bash", "sh")
SCRIPT_RUNS_SERVER = re.compile(r"-m\s+huggingfaceserver\s+\"?\$@")
"""A shell script that hands its arguments to the server (a runtime that warms the model files up first)."""
SEQ, STR = "tag:yaml.org,2002:seq", "tag:yaml.org,2002:str"


def model_workloads(doc: Document, text: str, runtimes: list[Runtime]) -> list[Workload]:
    """The vLLM workload of an InferenceService served by huggingfaceserver (none for another runtime, a command of
    its own, or --backend=huggingface)."""
    root = marked(doc.root, doc.file, text)
    model = nodes.get(root, "spec", "predictor", "model")
    namespace = nodes.text(nodes.get(root, "metadata", "namespace"))
    wanted = nodes.text(nodes.get(model, "runtime"))
    runtime = runtime_for(model, namespace, runtimes)
    model_format = (nodes.text(nodes.get(model, "modelFormat", "name")) or "").lower()
    if runtime is not None and not _runs_huggingfaceserver(runtime):
        return []  # another runtime of the scanned files serves it
    if runtime is None and not (wanted == HF["runtime"] or (wanted is None and model_format == HF["model_format"])):
        return []  # a runtime that is not in the scanned files
    base_runtime = runtime or Runtime("ClusterServingRuntime", HF["runtime"], None, _empty(model), ())
    containers = nodes.items(nodes.get(base_runtime.root, "spec", "containers"))
    base = next((c for c in containers if nodes.text(nodes.get(c, "name")) == RUNTIME_CONTAINER),
                containers[0] if containers else _empty(model))  # fmt: skip
    placed = placed_document(predictor_pod(root, model, base, base_runtime))
    predictor = nodes.get(placed.root, "spec", "predictor")
    container = nodes.items(nodes.get(predictor, "containers"))[0]
    server_args = _server_args(container, text)
    if server_args is None:
        return []  # a command of its own that does not run the server: read as any container
    split = _split_args(server_args)
    if split is None:
        return []  # --backend=huggingface: transformers serves, not vLLM
    own, engine, model_word, backend = split
    model_node = model_word or _model_dir(model)
    command = [yaml.ScalarNode(STR, word, model_node.start_mark, model_node.end_mark) for word in ("vllm", "serve")]
    set_key(container, "command", yaml.SequenceNode(SEQ, command, model_node.start_mark, model_node.end_mark))
    set_key(container, "args", yaml.SequenceNode(SEQ, [model_node] + engine, model_node.start_mark, model_node.end_mark))
    name = nodes.text(nodes.get(root, "metadata", "name")) or "(unnamed)"
    found = kubernetes.container_workload(
        container, text, file=placed.file, line=nodes.line(placed.root), platform="kubernetes", kind="InferenceService",
        name=name, namespace=namespace, selectors=kubernetes.pod_gpu_selectors(predictor),
    )  # fmt: skip
    if found is None:
        return []
    notes = [_served_note(runtime, backend)] + ([f"KServe's own options, not vLLM's, left out: {' '.join(own)}"] if own else [])
    found = replace(found, line_files=placed.line_files, notes=found.notes + tuple(notes))
    return [_with_release(found, runtime)]


def _server_args(container: yaml.Node, text: str) -> list | None:
    """The words huggingfaceserver gets: the args under the image's own entrypoint, or those after `python -m
    huggingfaceserver` in a command, or a shell script's "$@" (`bash -c '...; python3 -m huggingfaceserver "$@"' -- ARGS`,
    the words after $0); None when the command runs something else."""
    command, args = words_of(nodes.get(container, "command"), text), words_of(nodes.get(container, "args"), text)
    if not command:
        return args
    words = command + args
    texts = [token.text for token, _ in words]
    for index in range(len(texts) - 1):
        if texts[index] == "-m" and texts[index + 1] == SERVER_MODULE:
            return words[index + 2 :]
    if len(texts) > 2 and texts[0].rsplit("/", 1)[-1] in SHELLS and texts[1] == "-c" and SCRIPT_RUNS_SERVER.search(texts[2]):
        return words[4:]  # words[3] is the script's $0
    return None


def _runs_huggingfaceserver(runtime: Runtime) -> bool:
    images = [nodes.text(nodes.get(c, "image")) or "" for c in nodes.items(nodes.get(runtime.root, "spec", "containers"))]
    return runtime.name == HF["runtime"] or any(repository_path(i) == HF["repository"] for i in images if i)


def _empty(near: yaml.Node) -> yaml.Node:
    return yaml.MappingNode("tag:yaml.org,2002:map", [], near.start_mark, near.end_mark)


def _split_args(words) -> tuple[list[str], list[yaml.Node], yaml.Node | None, str] | None:
    """(KServe's own options as written, vLLM's option nodes, the --model_id value node, the backend); None when the
    backend (or a predictive task) turns vLLM off."""
    own, engine, model, backend = [], [], None, "auto"
    index = 0
    while index < len(words):
        token, node = words[index]
        flag, eq, inline = token.text.partition("=")
        if flag in HF["renamed"]:  # KServe's alias of a vLLM option: its value reaches vLLM's engine arguments
            engine.append(yaml.ScalarNode(STR, HF["renamed"][flag] + eq + inline, node.start_mark, node.end_mark))
        elif flag in HF["valued"]:
            value = node if eq else (words[index + 1][1] if index + 1 < len(words) else None)
            text = inline if eq else (nodes.text(value) or "")
            own.append(f"{flag} {text}".strip())
            if flag in HF["model_options"] and text:
                model = yaml.ScalarNode(STR, text, value.start_mark, value.end_mark)
            if flag == HF["backend_option"]:
                backend = text.lower()
            if flag == HF["task_option"] and text.lower() in HF["off_tasks"]:
                backend = "huggingface"  # a predictive task: the transformers backend serves it
            index += 1 if eq else 2
            continue
        elif flag in HF["switches"]:
            own.append(token.text)
        else:
            engine.append(node)
        index += 1
    return None if backend in HF["off_backends"] else (own, engine, model, backend)


def _model_dir(model: yaml.Node) -> yaml.Node:
    """The model vLLM loads without --model_id: storageUri's files at /mnt/models (hf://ORG/NAME is that model)."""
    uri = nodes.get(model, "storageUri")
    where = uri if uri is not None else model
    text = nodes.text(uri) or ""
    value = text.split("://", 1)[1] if text.startswith("hf://") else HF["model_dir"]
    return yaml.ScalarNode(STR, value, where.start_mark, where.end_mark)


def _served_note(runtime: Runtime | None, backend: str) -> str:
    by = (f"{runtime.kind} {runtime.name} ({runtime.root.start_mark.name}:{nodes.line(runtime.root)})" if runtime
          else f"KServe's built-in ClusterServingRuntime {HF['runtime']} (not in the scanned files)")  # fmt: skip
    why = ("--backend vllm" if backend == "vllm" else "--backend auto, the default: vLLM when the model's architecture "
           "is one vLLM serves, else transformers")  # fmt: skip
    return (f"spec.predictor.model (modelFormat {HF['model_format']}) runs on {by}: KServe's huggingfaceserver, which "
            f"serves with vLLM's engine ({why}); its args read as that server parses them, vLLM's options as vllm serve")


def _with_release(workload: Workload, runtime: Runtime | None) -> Workload:
    """The vLLM release the huggingfaceserver image installs, or what leaves it unknown (never a PASS)."""
    image = workload.image
    row = None
    if image and repository_path(image) == HF["repository"]:
        tag = split_image(image.strip())[1]
        row = RELEASES.get(tag.removesuffix("-gpu")) if tag else None
    if row is not None:
        note = f"image {image} installs vLLM {row['vllm']} (kserve/kserve {row['at']})"
        return replace(workload, vllm_pin=str(row["vllm"]), vllm_pin_line=workload.image_line,
                       notes=workload.notes + (note,))  # fmt: skip
    why = (f"image {image}: a tag with no vLLM release listed in kvdoctor/data/kserve_huggingface.yaml" if image
           else f"no image here: the {HF['runtime']} runtime installed with KServe names it")  # fmt: skip
    where = workload.at(workload.image_line or workload.line)
    return replace(workload, undecided=workload.undecided + (
        f"{where}: the vLLM release is the huggingfaceserver image's ({why}); it decides the checks: name "
        f"{HF['repository']}:vX.Y.Z in spec.predictor.model.image or the ServingRuntime, or pass --vllm-version",))
