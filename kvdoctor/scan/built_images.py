"""An image a script builds and then deploys: `docker build -t TAG -f deploy/Dockerfile.vllm .` (or `gcloud builds
submit --tag TAG DIR`, `podman build`, `buildah bud`) and `docker run TAG` / `gcloud run deploy --image TAG`. The
container runs the Dockerfile's command (read from the tree) with the deploy's env over the Dockerfile's ENV and the
deploy's args in place of its CMD (docker run's words after the image, gcloud's --args: docs.docker.com "docker
run", cloud.google.com "gcloud run deploy")."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from kvdoctor.scan import dockerfile
from kvdoctor.scan.documents import SourceFile
from kvdoctor.scan.workload import EnvVar, GpuSelector, Token, Workload

BUILDERS = {"docker", "podman", "nerdctl", "buildah"}
BUILD_SUBCOMMANDS = (["build"], ["buildx", "build"], ["image", "build"], ["builder", "build"], ["bud"])
# build options that take a value as the next word (docker build / buildx build, podman build, gcloud builds submit)
VALUE_OPTIONS = {"-t", "--tag", "-f", "--file", "--build-arg", "--target", "--platform", "--label", "--cache-from",
                 "--cache-to", "--secret", "--ssh", "--network", "--progress", "-o", "--output", "--iidfile",
                 "--add-host", "--shm-size", "--ulimit", "--builder", "--metadata-file", "--build-context", "-m",
                 "--memory", "--annotation", "--attest", "--config", "--region", "--project", "--substitutions",
                 "--timeout", "--machine-type", "--disk-size", "--worker-pool", "--service-account", "--pack",
                 "--gcs-source-staging-dir", "--gcs-log-dir", "--default-buckets-behavior"}  # fmt: skip
MAX_PARENTS = 3
"""How far above a script a relative Dockerfile path is looked for (a script in scripts/ run from the repository)."""


@dataclass(frozen=True)
class Build:
    tags: tuple[str, ...]
    dockerfile: str
    """The Dockerfile's path as the build names it (-f, else CONTEXT/Dockerfile), relative to where it runs."""


@dataclass(frozen=True)
class Deploy:
    """What a `docker run` / `gcloud run deploy` of an image gives the container (scripts.py, cloud_run.py read it)."""

    kind: str
    container: str
    image: Token
    env: tuple[EnvVar, ...]
    args: tuple[Token, ...]
    """The words after the image (docker run) or --args (gcloud): they replace the Dockerfile's CMD."""
    first: Token
    gpu_limit: int | None = None
    gpu_limit_line: int | None = None
    gpu_selectors: tuple[GpuSelector, ...] = ()
    env_from: tuple[str, ...] = ()


def image_builds(commands: list[list[Token]]) -> list[Build]:
    """The image builds among a script's commands (words expanded), in order."""
    found = []
    for words in commands:
        words = words[1:] if words and words[0].text == "sudo" else words
        start = _build_start(words)
        if start is None:
            continue
        tags, file, positionals, index = [], None, [], start
        while index < len(words):
            flag, eq, inline = words[index].text.partition("=")
            if flag.startswith("-") and (eq or flag not in VALUE_OPTIONS or index + 1 >= len(words)):
                value, index = (inline if eq else None), index + 1
            elif flag.startswith("-"):
                value, index = words[index + 1].text, index + 2
            else:
                positionals.append(words[index].text)
                index += 1
                continue
            if flag in ("-t", "--tag") and value:
                tags.append(value)
            elif flag in ("-f", "--file") and value:
                file = value
        context = positionals[0] if positionals else "."
        if tags and not context.startswith(("http://", "https://", "git@", "gs://")) and context != "-":
            found.append(Build(tuple(tags), file or str(PurePosixPath(context) / "Dockerfile")))
    return found


def _build_start(words: list[Token]) -> int | None:
    """The index of a build command's first option, or None when the words build no image."""
    texts = [w.text for w in words[:4]]
    program = PurePosixPath(texts[0]).name if texts else ""
    if program in BUILDERS:
        for sub in BUILD_SUBCOMMANDS:
            if texts[1 : 1 + len(sub)] == sub:
                return 1 + len(sub)
    if program == "gcloud":
        rest = texts[2:] if len(texts) > 1 and texts[1] in ("alpha", "beta") else texts[1:]
        if rest[:2] == ["builds", "submit"]:
            return len(texts) - len(rest) + 2
    return None


def roots_of(file: str) -> list[Path]:
    """Where a relative Dockerfile path of the file's builds may be: a workflow's repository (above .github), else
    the file's folder and the folders above it."""
    path = Path(file).resolve()
    if ".github" in path.parts:
        return [Path(*path.parts[: path.parts.index(".github")])]
    return [path.parent, *list(path.parents)[1 : 1 + MAX_PARENTS]]


def built_workload(file: str, name: str, deploy: Deploy, builds: list[Build], roots: list[Path]) -> Workload | None:
    """The deploy's vLLM workload when its image is one the builds make from a Dockerfile in the tree, else None."""
    wanted = _normal(deploy.image.text)
    for build in reversed(builds):  # the last build of a tag is the one deployed
        if wanted not in {_normal(t) for t in build.tags}:
            continue
        path = next((root / build.dockerfile for root in roots if (root / build.dockerfile).is_file()), None)
        if path is None:
            return None
        try:
            source = SourceFile(str(path), path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            return None
        env = {e.name: e.value for e in deploy.env if e.value is not None}
        read = dockerfile.image_command(source, env, list(deploy.args) or None)
        return adopted(read[0], file, name, deploy, str(path)) if read else None
    return None


def _normal(image: str) -> str:
    """An image reference with Docker's default tag (`app` is `app:latest`)."""
    last = image.rsplit("/", 1)[-1]
    return image if ":" in last or "@" in last else image + ":latest"


def adopted(image: Workload, file: str, name: str, deploy: Deploy, dockerfile_path: str) -> Workload:
    """The Dockerfile's workload as the deploy's: the deploy's file, name, container, env and GPUs; the command, the
    base image and the Dockerfile's ENV on the Dockerfile's lines."""
    workload = Workload(
        file=file, line=deploy.first.line, platform="script", kind=deploy.kind, name=name, container=deploy.container,
        env=deploy.env, env_from=deploy.env_from, gpu_selectors=deploy.gpu_selectors, gpu_limit=deploy.gpu_limit,
        gpu_limit_line=deploy.gpu_limit_line, command_line=deploy.first.line,
    )  # fmt: skip
    argv, env = [], []
    for token in image.argv:  # a line of the Dockerfile, or of a script it copies in (the image's own line files)
        workload, line = workload.line_in(*image.where(token.line))
        argv.append(replace(token, line=line))
    deployed = {e.name for e in deploy.env}
    for variable in image.env:
        if variable.name not in deployed:
            workload, line = workload.line_in(*image.where(variable.line))
            env.append(replace(variable, line=line))
    workload, image_line = workload.line_in(*image.where(image.image_line))
    note = (f"{deploy.image.text} is built here from {dockerfile_path} (line {deploy.first.line} deploys it): its "
            f"command ({image.container}) with the deploy's env over its ENV, on vLLM's base image {image.image}")
    return replace(workload, image=image.image, image_line=image_line, argv=tuple(argv),
                   command_line=argv[0].line if argv else workload.command_line, env=deploy.env + tuple(env),
                   notes=(note,) + tuple(n for n in image.notes if not n.startswith("Dockerfile: ")),
                   read_through=(dockerfile_path,), expands_shell=image.expands_shell)  # fmt: skip
