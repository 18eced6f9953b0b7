"""A Kubernetes container that gives no command and runs an image the repository builds where no script of it names
the build (built_images reads those): a Dockerfile near the manifest whose ENTRYPOINT / CMD runs vLLM. The container
runs that Dockerfile's command, its `args` in place of CMD and its env over the image's ENV (Kubernetes' "Define a
Command and Arguments for a Container"). Which Dockerfile builds the image is an inference, said in the workload's
notes: the only one near the manifest that runs vLLM, or the only one named like the image."""

from __future__ import annotations

import re
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import yaml

from kvdoctor.scan import dockerfile, nodes
from kvdoctor.scan.built_images import Deploy, adopted
from kvdoctor.scan.documents import DOCKERFILE_NAMES, SourceFile
from kvdoctor.scan.image import runs_vllm_entrypoint, split_image
from kvdoctor.scan.kubernetes import container_env, gpu_limit, pod_gpu_selectors, pod_spec_paths
from kvdoctor.scan.nearby_charts import searched_folders
from kvdoctor.scan.workload import Token, Workload

MAX_DEPTH = 3
"""How deep below each of those folders."""
MAX_FOLDERS = 400
"""Folders walked at most for one manifest: a monorepo's far corners are not the image's build."""
SKIPPED = {"node_modules", "vendor", "third_party", "site-packages", "__pycache__", "venv", ".venv"}
_WORD = re.compile(r"[a-z0-9]+")
_GENERIC_WORDS = {"image", "docker", "dockerfile", "latest", "app", "server", "serve", "serving", "k8s", "gpu", "cpu",
                  "io", "com", "azurecr", "gcr", "ecr", "ghcr", "the", "your", "name", "vllm", "llm", "inference"}


def built_here(root: yaml.Node, file: str, read: list[Workload], roots: tuple[Path, ...]) -> list[Workload]:
    """The workloads of the object's unread containers that run an image a nearby Dockerfile builds and runs vLLM;
    Dockerfiles are looked for within the scan's ``roots`` (the paths given) and the manifest's git checkout."""
    kind = nodes.text(nodes.get(root, "kind")) or ""
    paths = pod_spec_paths(root, kind)
    if not paths:
        return []
    seen = {w.container for w in read}
    name = nodes.text(nodes.get(root, "metadata", "name")) or "(unnamed)"
    found: list[Workload] = []
    for spec in (nodes.get(root, *path) for path in paths):
        for container in nodes.items(nodes.get(spec, "containers")) if spec is not None else ():
            workload = _container(container, spec, root, file, kind, name, seen, roots)
            if workload is not None:
                found.append(workload)
    return found


def _container(container: yaml.Node, spec: yaml.Node, root: yaml.Node, file: str, kind: str, name: str,
               seen: set[str], roots: tuple[Path, ...]) -> Workload | None:  # fmt: skip
    image = nodes.text(nodes.get(container, "image"))
    container_name = nodes.text(nodes.get(container, "name")) or "(unnamed)"
    if container_name in seen or nodes.get(container, "command") is not None:
        return None
    limit, limit_line = gpu_limit(container)
    chosen = nearby_build(image, f"{container_name} {name}", limit, Path(file), roots)
    if chosen is None:
        return None
    env, env_from = container_env(container)
    line = nodes.line(nodes.get(container, "image")) or nodes.line(container)
    deploy = Deploy(kind=kind, container=container_name, image=Token(image, line), env=tuple(env),
                    args=tuple(_args(container)), first=Token(image, line), gpu_limit=limit, gpu_limit_line=limit_line,
                    gpu_selectors=pod_gpu_selectors(spec), env_from=tuple(env_from))  # fmt: skip
    workload = adopted_build(*chosen, file, name, deploy, "container")
    if workload is None:
        return None
    return replace(workload, platform="kubernetes", line=nodes.line(root),
                   namespace=nodes.text(nodes.get(root, "metadata", "namespace")))


def nearby_build(image: str | None, names: str, gpus: int | None, manifest: Path,
                 roots: tuple[Path, ...]) -> tuple[Path, str] | None:
    """The Dockerfile (and why it) that a container or Compose service giving no command runs when its image is one
    the project builds (not vLLM's own entrypoint, no template left in it): only for a workload given GPUs or named
    for vLLM (``names``: its own and its object's names)."""
    if not image or "$" in image or "{{" in image or runs_vllm_entrypoint(image):
        return None
    if not (gpus or "vllm" in f"{image} {names}".lower()):
        return None  # neither a GPU nor vLLM's name: a sidecar, a router, a UI
    return dockerfile_for(image, manifest, roots)


def adopted_build(path: Path, why: str, file: str, name: str, deploy: Deploy, gives: str) -> Workload | None:
    """The deploy's workload running the Dockerfile at ``path``: its command, the deploy's args in place of its CMD,
    the deploy's env over its ENV, with a note saying why that Dockerfile (``gives``: 'container' or 'service')."""
    env = {e.name: e.value for e in deploy.env if e.value is not None}
    source = SourceFile(str(path), path.read_text(encoding="utf-8", errors="replace"))
    read = dockerfile.image_command(source, env, list(deploy.args) or None)
    if not read:
        return None
    workload = adopted(read[0], file, name, deploy, str(path))
    note = (f"{deploy.image.text} is taken to be built from {path} ({why}): the {gives} gives no command, so it runs "
            f"the image's {read[0].container} with the {gives}'s env over the image's ENV")
    return replace(workload, notes=(note,) + workload.notes[1:])


def _args(container: yaml.Node) -> list[Token]:
    return [Token(nodes.text(item) or "", nodes.line(item)) for item in nodes.items(nodes.get(container, "args"))]


def dockerfile_for(image: str, manifest: Path, roots: tuple[Path, ...]) -> tuple[Path, str] | None:
    """The Dockerfile (and why it) that builds the image: among the vLLM-running Dockerfiles of the nearest folder
    that has any (the manifest's, then its parents' within the scanned paths or the git checkout), the only one, or
    the only one named like the image."""
    here = manifest.resolve().parent
    for folder in searched_folders(here, roots):
        candidates = _vllm_dockerfiles(folder)
        if len(candidates) == 1:
            return candidates[0], f"the only Dockerfile under {folder.name or folder} that runs vLLM"
        named = [path for path in candidates if _named_like(image, path)]
        if len(named) == 1:
            return named[0], "the only vLLM Dockerfile named like the image"
        if candidates:
            return None  # several builds, none told apart by name: which one is deployed is not known
    return None


@lru_cache(maxsize=64)
def _vllm_dockerfiles(folder: Path) -> tuple[Path, ...]:
    """The Dockerfiles under the folder that run vLLM, read once per scan of a folder (every container asks)."""
    return tuple(path for path in _dockerfiles(folder) if _runs_vllm(path))


def _dockerfiles(folder: Path) -> list[Path]:
    found: list[Path] = []
    walked = 0
    queue = [(folder, 0)]
    while queue and walked < MAX_FOLDERS:
        current, depth = queue.pop(0)
        walked += 1
        try:
            entries = sorted(current.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir():
                if depth < MAX_DEPTH and not entry.name.startswith(".") and entry.name not in SKIPPED:
                    queue.append((entry, depth + 1))
            elif DOCKERFILE_NAMES.search(entry.name) and not entry.name.endswith((".yaml", ".yml", ".md")) \
                    and entry.is_file():  # a regular file: a FIFO is never opened
                found.append(entry)
    return found


def _runs_vllm(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return "vllm" in text.lower() and bool(dockerfile.image_command(SourceFile(str(path), text)))


def _named_like(image: str, path: Path) -> bool:
    """Whether the image's name and the Dockerfile's name or folder share a distinctive word."""
    repository = split_image(image)[0].rsplit("/", 1)[-1].lower()
    words = set(_WORD.findall(repository)) - _GENERIC_WORDS
    around = set(_WORD.findall(f"{path.parent.name} {path.name}".lower())) - _GENERIC_WORDS
    return bool(words & around)
