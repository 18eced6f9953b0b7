"""`gcloud run deploy SERVICE --image IMAGE --args=... --gpu 1 --gpu-type nvidia-l4` -> a vLLM workload (Cloud Run,
cloud.google.com/sdk/gcloud/reference/run/deploy), in any script scan reads (shell, Makefile recipe, GitHub Actions
step). `--args` / `--command` are gcloud lists (comma-separated, `^DELIM^` for another delimiter); the container runs
`--command` + `--args`, else the image's entrypoint with `--args`; `--gpu-type` is the GPU (read as the node label
Cloud Run's service YAML writes, run.googleapis.com/accelerator)."""

from __future__ import annotations

from pathlib import PurePosixPath

from kvdoctor.scan.built_images import Deploy
from kvdoctor.scan.command import FLAGS_ONLY_NOTE, only_serve_flags, serve_argv
from kvdoctor.scan.image import is_vllm_build, runs_vllm_entrypoint
from kvdoctor.scan.image_entrypoints import names_vllm
from kvdoctor.scan.kubernetes import env_built
from kvdoctor.scan.workload import EnvVar, GpuSelector, Token, Workload

ACCELERATOR_LABEL = "run.googleapis.com/accelerator"
"""The node selector Cloud Run's service YAML names its GPU type with (`gcloud run services describe --format
export`); `--gpu-type nvidia-l4` is the same value."""
RELEASE_TRACKS = {"alpha", "beta"}
# gcloud run deploy's flags that take a value as the next word (gcloud reference, run deploy and gcloud-wide flags);
# the others are switches (--no-cpu-throttling, --allow-unauthenticated, --quiet).
VALUE_FLAGS = {
    "--image", "--source", "--args", "--command", "--gpu", "--gpu-type", "--set-env-vars", "--update-env-vars",
    "--remove-env-vars", "--env-vars-file", "--set-secrets", "--update-secrets", "--remove-secrets", "--region",
    "--project", "--platform", "--port", "--cpu", "--memory", "--concurrency", "--timeout", "--max-instances",
    "--min-instances", "--service-account", "--vpc-connector", "--vpc-egress", "--network", "--subnet", "--ingress",
    "--labels", "--update-labels", "--remove-labels", "--set-cloudsql-instances", "--add-cloudsql-instances",
    "--execution-environment", "--tag", "--revision-suffix", "--description", "--container", "--add-volume",
    "--add-volume-mount", "--remove-volume", "--remove-volume-mount", "--depends-on", "--startup-probe",
    "--liveness-probe", "--base-image", "--scaling", "--key", "--binary-authorization", "--network-tags", "--format",
    "--verbosity", "--account", "--configuration", "--impersonate-service-account", "--billing-project",
    "--function", "--build-service-account", "--build-worker-pool", "--max", "--cpu-boost", "--session-affinity",
    "--set-config-maps", "--mesh", "--service-min-instances", "--health-check",
}  # fmt: skip
DEPLOY_NOTE = "gcloud run deploy (Cloud Run): the container runs --command and --args, else the image's entrypoint"


def is_deploy(words: list[Token]) -> bool:
    """`gcloud [alpha|beta] run deploy ...` (any path to gcloud)."""
    texts = [w.text for w in words[:4]]
    if texts and PurePosixPath(texts[0]).name == "gcloud" and len(texts) > 1 and texts[1] in RELEASE_TRACKS:
        texts = texts[:1] + texts[2:]
    return len(texts) >= 3 and PurePosixPath(texts[0]).name == "gcloud" and texts[1:3] == ["run", "deploy"]


def deploy_options(words: list[Token]) -> tuple[str | None, dict[str, list[Token]]]:
    """(the service name, each flag's values as written: `--gpu=1` and `--gpu 1` alike)."""
    start = next(i for i, w in enumerate(words) if w.text == "deploy") + 1
    service, options, index = None, {}, start
    while index < len(words):
        word = words[index]
        flag, eq, inline = word.text.partition("=")
        if not flag.startswith("--"):
            service = service or word.text
            index += 1
        elif eq:
            options.setdefault(flag, []).append(Token(inline, word.line))
            index += 1
        elif flag in VALUE_FLAGS and index + 1 < len(words):
            options.setdefault(flag, []).append(words[index + 1])
            index += 2
        else:
            options.setdefault(flag, []).append(Token("", word.line))
            index += 1
    return service, options


def gcloud_list(token: Token) -> list[Token]:
    """A gcloud list flag's items: comma-separated, or split on DELIM when the value starts `^DELIM^`."""
    text, delimiter = token.text, ","
    if text.startswith("^") and text.find("^", 1) > 1:
        delimiter, text = text[1 : text.find("^", 1)], text[text.find("^", 1) + 1 :]
    return [Token(item, token.line) for item in text.split(delimiter) if item != ""]


def workload(file: str, name: str, words: list[Token]) -> Workload | None:
    """The vLLM workload of one `gcloud run deploy` command, else None (no image, or a command that is not vLLM)."""
    if not is_deploy(words):
        return None
    service, options = deploy_options(words)
    image = options.get("--image", [None])[-1]
    command = [t for v in options.get("--command", []) for t in gcloud_list(v)]
    args = [t for v in options.get("--args", []) for t in gcloud_list(v)]
    image_text = image.text if image is not None else None
    notes = (DEPLOY_NOTE,)
    if command:
        argv = serve_argv([(t, None) for t in command + args], [], False, "")
    elif runs_vllm_entrypoint(image_text):
        argv = args
    elif args and only_serve_flags([(t, None) for t in args], is_vllm_build(image_text)):
        argv, notes = args, notes + (FLAGS_ONLY_NOTE.format(image=image_text),)
    else:
        argv = None
    gpus = options.get("--gpu", [])
    gpu_types = options.get("--gpu-type", [])
    count = int(gpus[-1].text) if gpus and gpus[-1].text.isdigit() else None
    built = None if command else env_built(image_text, _env(options), count, words[0].line, args)
    if built is not None:  # an entrypoint that builds the command from env never reads --args
        argv, notes = built[0], (DEPLOY_NOTE,) + tuple(built[1])
    if argv is None:
        return None
    return Workload(
        file=file, line=words[0].line, platform="script", kind="Cloud Run service", name=name,
        container=service or "(unnamed)", image=image_text, image_line=image.line if image is not None else None,
        argv=tuple(argv), command_line=(command or args or words)[0].line, env=tuple(_env(options)),
        env_from=tuple(f"env vars file {t.text!r}" for t in options.get("--env-vars-file", [])),
        gpu_selectors=tuple(GpuSelector(ACCELERATOR_LABEL, (t.text,), t.line) for t in gpu_types[-1:]),
        gpu_limit=count,
        gpu_limit_line=gpus[-1].line if gpus else None, notes=notes,
    )  # fmt: skip


def deploy_of(words: list[Token]) -> Deploy | None:
    """What a `gcloud run deploy --image IMAGE` without --command gives the container (for an image built here)."""
    if not is_deploy(words):
        return None
    service, options = deploy_options(words)
    image = options.get("--image", [None])[-1]
    if image is None or options.get("--command"):
        return None
    gpus, gpu_types = options.get("--gpu", []), options.get("--gpu-type", [])
    return Deploy(
        kind="Cloud Run service", container=service or "(unnamed)", image=image, env=tuple(_env(options)),
        args=tuple(t for v in options.get("--args", []) for t in gcloud_list(v)), first=words[0],
        gpu_limit=int(gpus[-1].text) if gpus and gpus[-1].text.isdigit() else None,
        gpu_limit_line=gpus[-1].line if gpus else None,
        gpu_selectors=tuple(GpuSelector(ACCELERATOR_LABEL, (t.text,), t.line) for t in gpu_types[-1:]),
        env_from=tuple(f"env vars file {t.text!r}" for t in options.get("--env-vars-file", [])),
    )  # fmt: skip


def _env(options: dict[str, list[Token]]) -> list[EnvVar]:
    """--set-env-vars / --update-env-vars K=V lists (literal), --set-secrets / --update-secrets (unknown here)."""
    env = [EnvVar(key, value, item.line) for flag in ("--set-env-vars", "--update-env-vars")
           for token in options.get(flag, []) for item in gcloud_list(token)
           for key, _, value in [item.text.partition("=")]]  # fmt: skip
    env += [EnvVar(key, None, item.line, f"Secret Manager secret {secret!r}")
            for flag in ("--set-secrets", "--update-secrets") for token in options.get(flag, [])
            for item in gcloud_list(token) for key, _, secret in [item.text.partition("=")]
            if not key.startswith("/")]  # fmt: skip  (a /path=secret is a mounted file, not env)
    return env


def unseen(words: list[Token]) -> tuple[str, str | None, Token] | None:
    """(service, image, first word) of a `gcloud run deploy` whose command kvdoctor cannot see (an image built
    elsewhere, `--source .`), when the service or the image's own name names vLLM; else None."""
    if not is_deploy(words):
        return None
    service, options = deploy_options(words)
    image = options.get("--image", [None])[-1]
    source = options.get("--source", [None])[-1]
    if "vllm" not in (service or "").lower() and not names_vllm(image.text if image is not None else None):
        return None
    return service or "(unnamed)", image.text if image is not None else (f"built from --source {source.text}"
                                                                          if source is not None else None), words[0]
