"""The vLLM version an image tag pins: vllm/vllm-openai:v0.25.1 -> 0.25.1; latest, nightly or a digest: unknown."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from kvdoctor.data.engine_launchers import IMAGE_EXTENSIONS, EngineLauncher

# Repositories whose tags are vLLM release versions (any registry host in front).
VLLM_IMAGE_REPOSITORIES = ("vllm/vllm-openai", "vllm/vllm-openai-cpu", "vllm/vllm-tpu", "rocm/vllm")
# Images whose entrypoint is vLLM's OpenAI server, so `args` alone are serve arguments.
VLLM_ENTRYPOINT_IMAGES = ("vllm/vllm-openai", "lmcache/vllm-openai", "vllm-openai")
# Red Hat's and Open Data Hub's vLLM builds (quay.io/modh/vllm, registry.redhat.io/rhoai/odh-vllm-cuda-rhel9,
# registry.redhat.io/rhaiis/vllm-cuda-rhel9): their Dockerfile.ubi ends in ENTRYPOINT python3 -m
# vllm.entrypoints.openai.api_server (the vllm-openai stage) or python3 -m vllm_tgis_adapter (the grpc stage, which
# parses vLLM's serve arguments plus its own: engine_launchers.yaml), so `args` alone are serve arguments too
# (opendatahub-io/vllm Dockerfile.ubi at 0312316dd49f; the RHAIIS docs run the image with only serve arguments).
RED_HAT_VLLM_IMAGE = re.compile(r"^(?:modh|rhoai|rhaiis|opendatahub)/(?:odh-)?vllm(?:-[a-z0-9.-]+)?$")
# Builds of vLLM whose tags name another project's release, never vLLM's (lmcache/vllm-openai:v0.3.1 is LMCache 0.3.1,
# nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.4.0 is NVIDIA Dynamo 0.4.0).
OTHER_PROJECT_TAGS = ("lmcache/vllm-openai", "ai-dynamo/vllm-runtime")
# A build's tag starts with the release it builds, or names it after labels with a `v` (aibrix-kvcache-v0.8.5-20250520);
# a bare number after a label (nixl-0.7.1) is another project's.
BUILD_TAG = re.compile(r"^(?:v?|(?:[a-z][a-z0-9]*-)+v)(\d+\.\d+\.\d+)(?:[-_+.].*)?$", re.IGNORECASE)
# another project's image whose tag names the vLLM it bundles (2.43.0-vllm_0.7.3, py312-vllm0.8.5, vllm-v0.9.2-cu128)
VLLM_IN_TAG = re.compile(r"(?:^|[-_.])vllm[-_]?v?(\d+\.\d+\.\d+(?:\.post\d+)?)(?=$|[-_+])", re.IGNORECASE)
RELEASE_TAG = re.compile(r"^v?(\d+\.\d+\.\d+(?:\.\d+)?(?:(?:rc|\.post)\d+)?)(?:[-_+].*)?$")


@dataclass(frozen=True)
class ImageVersion:
    repository: str
    tag: str | None
    digest: str | None
    vllm_version: str | None
    """The release the tag names; None when unknown."""
    why_unknown: str | None = None
    """Why the version is unknown; with a version, how it was read (a build of vLLM's tag)."""


CONTAINER_URI = re.compile(r"^(?:docker|docker-daemon|oras)://")
SIF_PULLED = re.compile(r"^(?P<name>[\w.-]+?)_(?P<tag>v?\d+\.\d+[\w.+-]*|latest|nightly)\.sif$")
"""The file `apptainer pull docker://vllm/vllm-openai:v0.8.5` writes: vllm-openai_v0.8.5.sif (name_tag.sif)."""


def split_image(image: str) -> tuple[str, str | None, str | None]:
    """'reg:5000/vllm/vllm-openai:v0.25.1@sha256:...' -> ('reg:5000/vllm/vllm-openai', 'v0.25.1', 'sha256:...');
    Apptainer's `docker://IMAGE` is IMAGE, and a pulled `.../vllm-openai_v0.8.5.sif` is ('vllm-openai', 'v0.8.5')."""
    image = CONTAINER_URI.sub("", image)
    if image.endswith(".sif"):
        pulled = SIF_PULLED.match(image.rsplit("/", 1)[-1])
        return (pulled.group("name"), pulled.group("tag"), None) if pulled else (image.rsplit("/", 1)[-1][:-4], None, None)
    rest, _, digest = image.partition("@")
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    if colon > slash:
        return rest[:colon], rest[colon + 1 :], digest or None
    return rest, None, digest or None


def _path(repository: str) -> str:
    """Without a registry host: 'docker.io/vllm/vllm-openai' -> 'vllm/vllm-openai'."""
    parts = repository.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]
    return "/".join(parts)


def repository_path(image: str) -> str:
    """The image's repository without its registry host and tag: 'ghcr.io/acme/vllm-server:1' -> 'acme/vllm-server'."""
    return _path(split_image(image.strip())[0])


def is_vllm_build(image: str | None) -> bool:
    """An image named for vLLM that is not vLLM's own (opea/vllm-gaudi, aibrix/vllm-openai, .../vllm-openai-ubi9)."""
    if not image:
        return False
    name = _path(split_image(image)[0]).rsplit("/", 1)[-1].lower()
    return name == "vllm" or name.startswith("vllm-") or name.startswith("vllm_")


def runs_vllm_entrypoint(image: str | None) -> bool:
    if not image:
        return False
    path = _path(split_image(image)[0])
    if RED_HAT_VLLM_IMAGE.match(path):
        return True
    name = path.rsplit("/", 1)[-1]  # vllm-openai-ubi9, vllm-openai-rocm: builds of the same server image
    return any(path == r or path.endswith("/" + r) or name.startswith(r.split("/")[-1] + "-") or path == r.split("/")[-1]
               for r in VLLM_ENTRYPOINT_IMAGES)  # fmt: skip


def image_version(image: str) -> ImageVersion:
    repository, tag, digest = split_image(image.strip())
    path = _path(repository)
    own = any(path == r or path.endswith("/" + r) for r in VLLM_IMAGE_REPOSITORIES)
    other = any(path == r or path.endswith("/" + r) for r in OTHER_PROJECT_TAGS)
    if RED_HAT_VLLM_IMAGE.match(path):  # rhaiis/vllm-cuda-rhel9:3.0.0 is Red Hat AI Inference Server 3.0.0
        why = f"the tag of {path} names a Red Hat AI product release, not the vLLM release it builds"
        return ImageVersion(repository, tag, digest, None, why)
    build = not own and not other and is_vllm_build(image)
    bundled = VLLM_IN_TAG.search(tag or "") if not own and not build and not other else None
    if bundled is not None:  # rayproject/ray:2.43.0-vllm_0.7.3: another project's image, its vLLM named in the tag
        why = f"vLLM {bundled.group(1)} read from the tag of {path} ({tag}), another project's image bundling vLLM"
        return ImageVersion(repository, tag, digest, bundled.group(1), why)
    if not own and not build:
        why = f"the tag of {path} is not a vLLM version" if path else f"image {image.strip()} names no repository and tag"
        return ImageVersion(repository, tag, digest, None, why)
    if tag is None:
        why = f"image {image} pins a digest, not a version" if digest else f"image {image} has no tag (latest)"
        return ImageVersion(repository, tag, digest, None, why)
    match = (BUILD_TAG if build else RELEASE_TAG).match(tag)
    if match is None and (named := VLLM_IN_TAG.search(tag)):  # rocm/vllm:rocm6.2_mi300_ubuntu20.04_py3.9_vllm_0.6.4
        return ImageVersion(repository, tag, digest, named.group(1), f"vLLM {named.group(1)} read from the tag {tag!r}, "
                                                                     "which names it among the build's other parts")
    if match is None:
        return ImageVersion(repository, tag, digest, None, f"tag {tag!r} does not name a vLLM release")
    if build:  # a build of vLLM tagged with the release it builds (aibrix/vllm-openai:v0.7.3.self.post1)
        why = f"vLLM {match.group(1)} read from the tag of {path}, a build of vLLM rather than vLLM's own image"
        return ImageVersion(repository, tag, digest, match.group(1), why)
    return ImageVersion(repository, tag, digest, match.group(1))


def is_vllms_own_image(image: str | None) -> bool:
    """Whether the image is one vLLM publishes itself (vllm/vllm-openai, ...): stock vLLM, no plugin added."""
    if not image:
        return False
    path = _path(split_image(image.strip())[0])
    return any(path == r or path.endswith("/" + r) for r in VLLM_IMAGE_REPOSITORIES)


def image_extension(image: str | None) -> EngineLauncher | None:
    """The project whose image extends `vllm serve` with options of its own (vllm/vllm-omni: vLLM-Omni), or None."""
    if not image:
        return None
    path = _path(split_image(image.strip())[0])
    found = next((e for r, e in IMAGE_EXTENSIONS.items() if path == r or path.endswith("/" + r)), None)
    if found is None:  # a local build named for it (rocm_gfx1151_vllm-omni): the project's program in its name
        name = path.rsplit("/", 1)[-1]
        found = next((e for e in IMAGE_EXTENSIONS.values() if e.program and name.endswith(e.program)), None)
    return found


def command_extension(image: str | None, words: list[str]) -> EngineLauncher | None:
    """The project whose options the command's `vllm serve` takes: the image's (image_extension), or, on an image vLLM
    does not publish itself (a local build may add the plugin), the one whose switch the command gives (--omni); on
    vLLM's own image that switch is refused like any unknown flag."""
    found = image_extension(image)
    if found is not None or is_vllms_own_image(image):
        return found
    return next((e for e in IMAGE_EXTENSIONS.values() if e.marker and e.marker in words), None)


# Tags that follow vLLM's newest build: an image under one runs today's releases.
FLOATING_TAGS = ("latest", "nightly", "main", "stable", "dev")


HOST_VARIABLE = re.compile(r"\$(?:\{?[A-Za-z_]|\()")
"""A shell, Compose or Kubernetes variable ($VLLM_IMAGE, ${TAG}, $(IMAGE)) left in an image: the manifest does not set it."""


def chosen_by_the_host(image: str | None) -> bool:
    """An image whose repository or tag is a variable the manifest does not set ($VLLM_IMAGE, vllm/vllm-openai:${TAG}):
    which build runs, hence which vLLM release, is the host's choice, of any age as with no image at all."""
    if not image:
        return False
    repository, tag, _ = split_image(image.strip())
    return HOST_VARIABLE.search(repository) is not None or (tag is not None and HOST_VARIABLE.search(tag) is not None)


def pins_an_unknown_build(image: str | None) -> bool:
    """A vLLM image or build whose tag or digest pins one build of no release kvdoctor can name
    (lmcache/vllm-openai:2025-03-10, another project's release, a digest): of any age, unlike a floating tag
    (latest, nightly) or none, which runs today's releases."""
    if not image or "$" in image:
        return False
    repository, tag, digest = split_image(image.strip())
    path = _path(repository)
    vllm_image = runs_vllm_entrypoint(image) or is_vllm_build(image) or \
        any(path == r or path.endswith("/" + r) for r in VLLM_IMAGE_REPOSITORIES + OTHER_PROJECT_TAGS)
    if not vllm_image or image_version(image).vllm_version is not None:
        return False
    if digest or is_fork_image(path):  # a fork's latest is its newest build, not today's vLLM
        return True
    return tag is not None and not tag.lower().startswith(FLOATING_TAGS)


def names_no_vllm_release(image: str | None) -> bool:
    """An image of another project that bundles vLLM (ghcr.io/llm-d/llm-d:v0.2.0, a platform's own server image) and
    is not named for vLLM: its tag names that project's release, so its vLLM is of any age."""
    if not image or "$" in image:
        return False
    path = _path(split_image(image.strip())[0])
    known = VLLM_IMAGE_REPOSITORIES + OTHER_PROJECT_TAGS
    return not (any(path == r or path.endswith("/" + r) for r in known) or is_vllm_build(image)
                or runs_vllm_entrypoint(image) or is_fork_image(path))


def is_fork_image(path: str) -> bool:
    """Whether a repository path (no registry host) is an image built from a fork of vLLM: an entry of
    kvdoctor/data/vllm_forks.yaml, or a `*` pattern of one, matched at the path's end."""
    import fnmatch

    return any(path == f or path.endswith("/" + f) or ("*" in f and (fnmatch.fnmatch(path, f)
               or fnmatch.fnmatch(path, "*/" + f))) for f in fork_images())  # fmt: skip


@lru_cache(maxsize=1)
def fork_images() -> frozenset[str]:
    """Repositories of images built from a fork of vLLM (kvdoctor/data/vllm_forks.yaml)."""
    from kvdoctor.base.yaml_safe import load_yaml_cached
    from kvdoctor.data import read_data

    return frozenset(f["image"] for f in load_yaml_cached(read_data("vllm_forks.yaml"), "vllm_forks.yaml")["forks"])
