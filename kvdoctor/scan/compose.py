"""Docker Compose services -> vLLM workloads (command as a string or a list, environment as a map or a list)."""

from __future__ import annotations

import re
from dataclasses import replace

import yaml

from kvdoctor.scan import nodes
from kvdoctor.scan.called_scripts import called_argv, placed_in
from kvdoctor.scan.command import FLAGS_ONLY_NOTE, SHELL_VARIABLE, only_serve_flags, serve_argv, words_of
from kvdoctor.scan.compose_command import compose_cut, meant_command, non_string_item
from kvdoctor.scan.compose_dotenv import project_env
from kvdoctor.scan.compose_extends import extended
from kvdoctor.scan.documents import Document
from kvdoctor.scan.image import is_vllm_build, runs_vllm_entrypoint
from kvdoctor.scan.image_entrypoints import names_vllm, unread_release, unseen_note
from kvdoctor.scan.kubernetes import env_built
from kvdoctor.scan.mounted_scripts import mounted_script
from kvdoctor.scan.workload import EnvVar, Token, Workload

# ${VAR}, ${VAR:-default} / ${VAR-default}, ${VAR:?message} / ${VAR?message} (Compose's interpolation)
INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*)|:?\?[^}]*)?\}")
# the same, for an interpolation whose default holds no other one (nested ones are done innermost first)
INNERMOST = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^{}]*)|:?\?[^{}]*)?\}")


def is_compose(root: yaml.Node) -> bool:
    services = nodes.get(root, "services")
    return nodes.is_map(services) and nodes.get(root, "kind") is None


COMPOSE_FILE_NAME = re.compile(r"(?:^|[._-])compose(?:[.-][\w-]+)*\.ya?ml$")  # docker-compose.yml, compose.prod.yaml
SERVICE_KEYS = ("image", "build", "command", "entrypoint")


def legacy_services(doc: Document) -> str | None:
    """Why a Compose-named file whose top-level keys are services (the legacy version 1 format, no `services:`
    mapping above them) is not read: Docker Compose v2 refuses it ("additional property vllm is not allowed")."""
    root = doc.root
    if (not COMPOSE_FILE_NAME.search(doc.file.replace("\\", "/").rsplit("/", 1)[-1]) or not nodes.is_map(root)
            or nodes.get(root, "services") is not None or nodes.get(root, "kind") is not None):
        return None
    legacy = [(name, key) for name, key, value in nodes.pairs(root)
              if nodes.is_map(value) and any(nodes.get(value, k) is not None for k in SERVICE_KEYS)]
    if not legacy:
        return None
    name, key = legacy[0]
    return (f"{doc.file}:{nodes.line(key)}: not a Compose file as Docker Compose v2 reads it: top-level `{name}` "
            "holds a service's keys with no `services:` mapping above it (the legacy version 1 format), so `docker compose` "
            f"refuses it (additional property {name} is not allowed): indent the services under `services:`")


def workloads(doc: Document, source_text: str, shell_env: dict[str, str] | None = None) -> list[Workload]:
    """Each service that runs vLLM; ``shell_env``: the environment `docker compose` runs in (a script's variables),
    which wins over the project's .env."""
    found = []
    for name, key, service in nodes.pairs(nodes.get(doc.root, "services")):
        service, line_files, note = extended(doc.file, doc.root, service)
        workload = service_workload(doc.file, name, key, service, source_text, line_files, shell_env)
        if workload is not None:
            found.append(replace(workload, notes=workload.notes + ((note,) if note else ())))
    return found


def service_workload(file: str, name: str, key: yaml.Node, service: yaml.Node, source_text: str,
             line_files: tuple[str, ...] = (), shell_env: dict[str, str] | None = None) -> Workload | None:  # fmt: skip
    """The service's vLLM workload; ``line_files``: the other files its nodes come from (extends)."""
    dotenv = project_env(file) | (shell_env or {})
    image = nodes.text(nodes.get(service, "image"))
    image = _interpolate(image, dotenv) if image else None
    entrypoint_node, command_node = nodes.get(service, "entrypoint"), nodes.get(service, "command")
    cut = compose_cut(entrypoint_node, command_node)  # Compose runs less than the string says: judged as meant
    entrypoint = _alternates(_unescaped(words_of(entrypoint_node, source_text, True, True)))
    command = _alternates(_unescaped(meant_command(entrypoint_node, command_node) if cut is not None
                                     else words_of(command_node, source_text, True, True)))
    flags_only = not entrypoint and not runs_vllm_entrypoint(image) and only_serve_flags(command, is_vllm_build(image))
    argv = serve_argv(entrypoint, command, runs_vllm_entrypoint(image) or flags_only, source_text)
    env, env_from = _environment(service, dotenv)
    count, count_line = _gpu_count(service)
    built = None if entrypoint else env_built(image, env, count, nodes.line(key), [token for token, _ in command])
    if built is not None:
        argv, built_notes = built
    mounted = None
    if argv is None:  # an entrypoint script bind-mounted from the project: its vLLM command, with the service's env
        mounted = mounted_script([t for t, _ in entrypoint or command], nodes.get(service, "volumes"), file)
        known = {e.name: e.value for e in env if e.value is not None and "$" not in e.value}
        argv = called_argv(mounted, known) if mounted is not None else None
    if argv is None and not entrypoint:  # `build:` a Dockerfile of the project: its ENTRYPOINT / CMD runs
        return _built_service(file, name, key, service, [t for t, _ in command], env, (count, count_line))
    if argv is None:
        return None
    first = (entrypoint or command or [(Token("", nodes.line(service)), None)])[0][0]
    workload = Workload(
        file=file, line=nodes.line(key), platform="compose", kind="service", name=name, container=name,
        image=image, image_line=nodes.line(nodes.get(service, "image")),
        argv=_interpolated(argv, dotenv, split=_split_after_interpolation(service, entrypoint + command)),
        command_line=first.line,
        env=tuple(env), env_from=tuple(env_from), gpu_limit=count, gpu_limit_line=count_line,
        notes=(tuple(built[1]) if built is not None else (FLAGS_ONLY_NOTE.format(image=image),) if flags_only else ())
        + _dotenv_note(service, dotenv),
        built_here=nodes.get(service, "build") is not None, line_files=line_files,
        non_string_item=non_string_item(service), command_cut=cut,
    )  # fmt: skip
    return placed_in(workload, mounted) if mounted is not None else workload


def _built_service(file: str, name: str, key: yaml.Node, service: yaml.Node, command: list[Token], env: list[EnvVar],
                   gpus: tuple[int | None, int | None]) -> Workload | None:
    """A service that builds its image from a Dockerfile of the project (`build: ./vllm` or `{context, dockerfile}`)
    and gives no entrypoint: the Dockerfile's command, the service's command in place of its CMD, its env over the
    Dockerfile's ENV (Compose's build reference)."""
    from pathlib import Path

    from kvdoctor.scan.built_images import Build, Deploy, built_workload

    build = _build_of(service)
    if build is None:
        return _repo_image_service(file, name, key, service, command, env, gpus)
    context, dockerfile = build
    tag = nodes.text(nodes.get(service, "image")) or f"{name}:built"
    built_at = nodes.line(nodes.get(service, "build"))
    deploy = Deploy(kind="service", container=name, image=Token(tag, built_at), env=tuple(env),
                    args=tuple(command), first=Token(name, nodes.line(key)), gpu_limit=gpus[0], gpu_limit_line=gpus[1])
    built = built_workload(file, name, deploy, [Build((tag,), str(Path(context) / dockerfile))], [Path(file).parent])
    return replace(built, platform="compose", built_here=True) if built is not None else None


def _repo_image_service(file: str, name: str, key: yaml.Node, service: yaml.Node, command: list[Token],
                        env: list[EnvVar], gpus: tuple[int | None, int | None]) -> Workload | None:
    """A service with no build, command or entrypoint that runs an image the project builds elsewhere (pushed as
    ghcr.io/OWNER/PROJECT): the only vLLM-running Dockerfile near the file, or the only one named like the image, as
    scan/repo_images.py infers it for a Kubernetes container (said in a note)."""
    from pathlib import Path

    from kvdoctor.scan.built_images import Deploy
    from kvdoctor.scan.repo_images import adopted_build, nearby_build

    image = nodes.text(nodes.get(service, "image"))
    image = _interpolate(image, project_env(file)) if image else None
    chosen = None if command else nearby_build(image, name, gpus[0], Path(file), (Path(file).resolve().parent,))
    if chosen is None:
        return None
    line = nodes.line(nodes.get(service, "image"))
    deploy = Deploy(kind="service", container=name, image=Token(image, line), env=tuple(env), args=(),
                    first=Token(name, nodes.line(key)), gpu_limit=gpus[0], gpu_limit_line=gpus[1])
    built = adopted_build(*chosen, file, name, deploy, "service")
    return replace(built, platform="compose") if built is not None else None


def unseen_notes(doc: Document, read: list[Workload]) -> list[str]:
    """Notes for services that give no entrypoint and run an image named for vLLM (or of a release whose entrypoint
    kvdoctor did not read) and were not read as a workload."""
    seen = {w.container for w in read}
    notes = []
    for name, key, service in nodes.pairs(nodes.get(doc.root, "services")):
        image = nodes.text(nodes.get(service, "image"))
        image = _interpolate(image, project_env(doc.file)) if image else None
        own_command = nodes.get(service, "entrypoint") is not None
        if name not in seen and not own_command and (missing := _missing_build(doc.file, service)) is not None:
            notes.append(f"{doc.file}:{nodes.line(key)}: service {name} builds its image from {missing}, which is not "
                         "in the scanned files: the vLLM command it runs is not known, so it is not checked")
            continue
        if name in seen or own_command or not (names_vllm(image) or unread_release(image)):
            continue
        notes.append(unseen_note(f"{doc.file}:{nodes.line(nodes.get(service, 'image'))}", f"service {name}", image))
    return notes


def _build_of(service: yaml.Node) -> tuple[str, str] | None:
    """(context, Dockerfile) of a service's `build:` (`build: ./vllm` or `{context, dockerfile}`) when both are paths
    of the project, else None (no build, a remote context, a variable)."""
    build = nodes.get(service, "build")
    context = nodes.text(build) if nodes.is_scalar(build) else nodes.text(nodes.get(build, "context"))
    dockerfile = (nodes.text(nodes.get(build, "dockerfile")) if nodes.is_map(build) else None) or "Dockerfile"
    if build is None or not context or "://" in context or "$" in context + dockerfile:
        return None
    return context, dockerfile


def _missing_build(file: str, service: yaml.Node) -> str | None:
    """The Dockerfile a vLLM-looking service builds from (`build:` with VLLM_ build args or env, or vLLM in its words)
    when that file is not in the project, else None."""
    from pathlib import Path

    build = _build_of(service)
    if build is None:
        return None
    context, dockerfile = build
    path = Path(file).parent / context / dockerfile
    if path.is_file() or "vllm" not in yaml.safe_dump(nodes.plain(service)).lower():
        return None
    return str(Path(context) / dockerfile)


def _unescaped(words: list) -> list:
    """Compose's `$$` is a literal `$` for the container (`bash -c "...$${ARGS[@]}"` hands the shell `${ARGS[@]}`)."""
    return [(Token(token.text.replace("$$", "$"), token.line), node) if "$$" in token.text else (token, node)
            for token, node in words]


ALTERNATE_OPEN = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):?\+")


def _alternates(words: list) -> list:
    """Compose's `${VAR:+replacement}` (the replacement when VAR is set, else nothing), split into words by the
    command's spaces: joined back and kept as `${VAR}`, the host's choice, unknown here (its words are not judged)."""
    if not any("+" in token.text and ALTERNATE_OPEN.search(token.text) for token, _ in words):
        return words
    out: list = []
    index = 0
    while index < len(words):
        token, node = words[index]
        if ALTERNATE_OPEN.search(token.text) is None:
            out.append((token, node))
            index += 1
            continue
        if token.text.count("{") <= token.text.count("}"):  # whole in this word (a `sh -c` script): in place
            out.append((Token(_without_alternates(token.text), token.line), node))
            index += 1
            continue
        text, end = token.text, index
        while text.count("{") > text.count("}") and end + 1 < len(words):  # the words its spaces split off
            end += 1
            text += " " + words[end][0].text
        out += [(Token(word, token.line), node) for word in _without_alternates(text).split()]
        index = end + 1
    return out


def _without_alternates(text: str) -> str:
    """Each `${VAR:+...}` (nested braces included) as `${VAR}`."""
    while (opened := ALTERNATE_OPEN.search(text)) is not None:
        depth, close = 0, len(text) - 1
        for at in range(opened.start() + 1, len(text)):
            depth += {"{": 1, "}": -1}.get(text[at], 0)
            if depth == 0:
                close = at
                break
        text = text[:opened.start()] + "${" + opened.group(1) + "}" + text[close + 1:]
    return text


def _interpolate(text: str, dotenv: dict[str, str] | None = None) -> str:
    """${VAR} from the project's `.env` when it sets VAR (${VAR:-default}: when it sets it non-empty); else
    ${VAR:-default} takes its default, and ${VAR} or a required ${VAR:?message} stay ${VAR}: the host's value,
    unknown here (the message is what Compose says when it is unset, never a value)."""
    dotenv = dotenv or {}

    def value(match: re.Match) -> str:
        name, default = match.group(1), match.group(2)
        if name in dotenv and (dotenv[name] or not match.group(0).startswith("${" + name + ":-")):
            return dotenv[name]
        return default if default is not None else "${" + name + "}"

    for _ in range(4):  # a default may hold another interpolation (${A:-${B:-x}}): the innermost first
        done = INNERMOST.sub(value, text)
        if done == text:
            break
        text = done
    return text


def _interpolated(argv: list[Token], dotenv: dict[str, str], split: bool) -> tuple[Token, ...]:
    """The words with Compose's interpolation done. A word that is only a variable interpolated to nothing
    (`${FLAG:-}`) leaves no word, as in the shell; one whose value holds spaces (`${TOOL_ARGS}` = "--a --b") is split
    into its words where Compose or a shell would split it (``split``). Only a default makes it empty after an
    option that waits for a value (`--api-key ${KEY:-}`): that value is the host's, unknown here, and stays ${KEY}."""
    out: list[Token] = []
    for token in argv:
        text = _interpolate(token.text, dotenv)
        variable = SHELL_VARIABLE.fullmatch(token.text.strip()) or INTERPOLATION.fullmatch(token.text.strip())
        lone_variable = variable is not None  # `${ARGS}`, `${ARGS:-a b}`, `${ARGS-a b}`: one word, however long
        if not text.strip() and lone_variable:
            name = variable.group(1) or variable.group(2)
            # a default of blanks (`${TOOL_FLAGS:- }`) stands for words the host may give: unknown here, kept as such
            if name not in dotenv and (text or out and _waits_for_value(out[-1].text)):
                out.append(Token("${" + name + "}", token.line))
            continue
        if split and lone_variable and text != token.text and len(text.split()) > 1:
            out += [Token(word, token.line) for word in text.split()]
        else:
            out.append(Token(text, token.line))
    return tuple(out)


def _waits_for_value(word: str) -> bool:
    """A long option written without `=value`: the word after it may be its value."""
    return word.startswith("--") and "=" not in word and len(word) > 2


def _split_after_interpolation(service: yaml.Node, words: list) -> bool:
    """Whether an interpolated value's spaces split it into words: Compose interpolates the file before it splits a
    command given as a string (compose-go's ShellCommand), and a shell (`sh -c "... ${ARGS}"`) splits an unquoted
    expansion; a list item stays one argument."""
    string_form = any(nodes.is_scalar(nodes.get(service, key)) for key in ("command", "entrypoint"))
    return string_form or any(token.text == "-c" for token, _ in words)


def _dotenv_note(service: yaml.Node, dotenv: dict[str, str]) -> tuple[str, ...]:
    """A note naming the `.env` values the service's image, command or environment took, when it took any."""
    if not dotenv:
        return ()
    texts = [text for key in ("image", "command", "entrypoint", "environment")
             for text in nodes.scalars(nodes.get(service, key))]
    used = sorted({m.group(1) for text in texts for m in INTERPOLATION.finditer(text) if m.group(1) in dotenv})
    if not used:
        return ()
    return (f"{', '.join('${' + n + '}' for n in used)} read from the .env beside the compose file (Compose's "
            "default; the shell's environment, unknown here, overrides it)",)


def _environment(service: yaml.Node, dotenv: dict[str, str]) -> tuple[list[EnvVar], list[str]]:
    env: list[EnvVar] = []
    block = nodes.get(service, "environment")
    if nodes.is_map(block):
        for name, _, value in nodes.pairs(block):
            literal = nodes.text(value)
            env.append(EnvVar(name, _interpolate(literal, dotenv) if literal is not None else None, nodes.line(value),
                              None if literal is not None else "the host environment"))  # fmt: skip
    for item in nodes.items(block):
        entry = nodes.text(item) or ""
        name, has_value, value = entry.partition("=")
        env.append(EnvVar(name, _interpolate(value, dotenv) if has_value else None, nodes.line(item),
                          None if has_value else "the host environment"))  # fmt: skip
    env_files = nodes.get(service, "env_file")
    files = [nodes.text(f) or nodes.text(nodes.get(f, "path")) for f in nodes.items(env_files)] or [nodes.text(env_files)]
    return env, [f"env_file {f!r}" for f in files if f]


def _gpu_count(service: yaml.Node) -> tuple[int | None, int | None]:
    """deploy.resources.reservations.devices with the gpu capability, or the service's own `gpus:` device requests
    (Compose 2.30+): count, or the device_ids listed (an item may list several: moby's daemon/nvidia_linux.go joins
    them into NVIDIA_VISIBLE_DEVICES). `gpus: all` (every GPU of the host) is no count."""
    devices = nodes.items(nodes.get(service, "deploy", "resources", "reservations", "devices"))
    for device in devices + nodes.items(nodes.get(service, "gpus")):
        capabilities = nodes.plain(nodes.get(device, "capabilities")) or []
        if "gpu" not in capabilities and nodes.text(nodes.get(device, "driver")) != "nvidia":
            continue
        count = nodes.get(device, "count")
        if nodes.text(count) and str(nodes.text(count)).isdigit():
            return int(str(nodes.text(count))), nodes.line(count)
        ids = nodes.get(device, "device_ids")
        if nodes.is_seq(ids):  # Docker joins the ids with commas for the NVIDIA runtime: ["5,6"] is two GPUs
            listed = [i for item in nodes.items(ids) for i in str(nodes.text(item) or "").split(",") if i.strip()]
            return len(listed), nodes.line(ids)
    return None, None
