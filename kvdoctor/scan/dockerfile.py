"""Dockerfiles -> a vLLM workload: the command the image runs (ENTRYPOINT and CMD, exec or shell form, or CMD as
the arguments of a vLLM base image's own entrypoint), on the image of the last FROM, with its ENV."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import replace
from pathlib import Path, PurePosixPath

from kvdoctor.scan.command import conditional_words, expand_words, runs_a_shell, serve_argv
from kvdoctor.scan.called_scripts import argv_in_script, script_word
from kvdoctor.scan.copied_scripts import Copy, copied_script, copy_of, script_command
from kvdoctor.scan.documents import DOCKERFILE_NAMES, YAML_SUFFIXES, SourceFile
from kvdoctor.scan.image import runs_vllm_entrypoint
from kvdoctor.scan.workload import EnvVar, Token, Workload
from kvdoctor.scan.written_scripts import WrittenScript, script_run, written_by

INSTRUCTION = re.compile(r"^\s*([A-Za-z]+)\s+(.*)$", re.DOTALL)
HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
"""A here-document a RUN / COPY opens (the Dockerfile reference, "Here-Documents"; BuildKit's dockerfile:1.4)."""
PIP_VLLM_PIN = re.compile(r"""(?<![\w.-])vllm(?:\[[^\]]*\])?==v?(\d+\.\d+\.\d+(?:\.post\d+)?)(?:\+[\w.]+)?(?![\w.])""")
"""A RUN's `pip install vllm==X` (uv pip, pip3, a local `+gptoss` build of X): the release the image runs."""
DOCKERFILE_VARIABLE = re.compile(r"\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:[-+])([^}]*))?\})")


def is_dockerfile(source: SourceFile) -> bool:
    name = PurePosixPath(source.path).name
    return bool(DOCKERFILE_NAMES.search(name)) and not name.endswith(YAML_SUFFIXES)  # Dockerfile-x.yaml is YAML


def workloads(source: SourceFile) -> list[Workload]:
    return image_command(source)


def image_command(source: SourceFile, run_env: dict[str, str] | None = None,
                  run_args: list[Token] | None = None) -> list[Workload]:  # fmt: skip
    """The Dockerfile's image's vLLM command; run with `run_env` over its ENV and `run_args` in place of its CMD
    (docker run IMAGE ARGS, gcloud run deploy --args) when a deploy of the image gives them."""
    image, image_line, env, entrypoint, cmd = None, None, [], None, None
    copies: list[Copy] = []
    workdir = "/"
    global_args: dict[str, str | None] = {}  # ARGs before the first FROM: only FROM lines see them
    stage_args: dict[str, str | None] | None = None
    written: dict[str, WrittenScript] = {}
    pin: tuple[str, int] | None = None
    for line, keyword, value, body in _instructions(source.text):
        if keyword == "RUN" and "install" in value and (pinned := PIP_VLLM_PIN.search(value)):
            pin = (pinned.group(1), line)
        for script in written_by(keyword, value, body, line, workdir):
            written[script.path] = script
        if keyword == "ARG":
            _declare(value, stage_args if stage_args is not None else global_args, global_args)
        elif keyword == "FROM":
            words = [w for w in substituted(value, global_args).split() if not w.startswith("--")]
            image, image_line, env, entrypoint, cmd = (words[0] if words else None), line, [], None, None
            stage_args, copies, workdir, written, pin = {}, [], "/", {}, None
        elif keyword == "WORKDIR":
            known = (stage_args or {}) | {e.name: e.value for e in env}
            workdir = str(PurePosixPath(workdir) / substituted(value, known))
        elif keyword in ("COPY", "ADD") and (copied := copy_of(value, workdir)) is not None:
            copies.append(copied)
        elif keyword == "ENV":
            known = (stage_args or {}) | {e.name: e.value for e in env}  # ENV overrides an ARG of the same name
            env += [replace(e, value=substituted(e.value, known)) if e.value else e for e in _env(value, line)]
        elif keyword in ("ENTRYPOINT", "CMD"):
            form = _form(value, line)
            entrypoint, cmd = (form, None) if keyword == "ENTRYPOINT" else (entrypoint, form)
    if run_args:
        cmd = ("exec", run_args)
    if entrypoint is None and cmd is None:
        return []  # an image built on vLLM's that sets no command: whoever runs it gives one (not seen here)
    # `ENV MODEL_NAME=""`: a placeholder the deploy sets, not an empty value the command runs with
    known = {e.name: e.value for e in env if e.value} | (run_env or {})
    notes: list[str] = []
    command, args, where = _command(entrypoint, cmd, known, notes)
    argv = serve_argv([(t, None) for t in command], [(t, None) for t in args],
                      entrypoint is None and runs_vllm_entrypoint(image), "")  # fmt: skip
    script = copied_script(command or args, copies, workdir, source.path) if argv is None else None
    if script is not None and entrypoint is not None and cmd is not None and _passes_through(script[0]):
        # an entrypoint script that ends in `exec "$@"` (ldconfig, env set-up): the container runs CMD
        command, args, where = _command(None, cmd, known, notes)
        argv = serve_argv([(t, None) for t in command], [(t, None) for t in args], runs_vllm_entrypoint(image), "")
        script = None
        where = "CMD, run by the ENTRYPOINT script's exec \"$@\""
    built = None
    if argv is None and script is None and (word := script_word(command or args)) is not None:
        built = script_run(word.text, written, workdir)
    if argv is None and script is None and built is None:
        return []
    notes.append(f"Dockerfile: the image's {where} with its ENV; ${{VAR:-default}} takes its default")
    workload = Workload(
        file=source.path, line=image_line, platform="dockerfile", kind="Dockerfile",
        name=PurePosixPath(source.path).name, container=where, image=image, image_line=image_line,
        env=tuple(env), notes=tuple(notes) + ((f"vLLM pinned by the image's pip install: vllm=={pin[0]}",) if pin else ()),
        vllm_pin=pin[0] if pin else None, vllm_pin_line=pin[1] if pin else None,
    )  # fmt: skip
    if script is not None:  # ENTRYPOINT ["/srv/start.sh"], COPY'd from the build context: its vllm serve
        return _run_script(workload, script, known)
    if built is not None:  # CMD ["/app/start.sh"], written by a RUN of this Dockerfile: its vllm serve
        return _run_written(workload, built, known)
    argv = expand_words(argv, known)  # an unquoted $EXTRA_ARGS of several options: its words
    # a command run through a shell (`sh -c "..."`, the shell form) expands its $VARs from the container's env at run
    # time, so a deploy's env (a ConfigMap's value) fills them
    shell = runs_a_shell([(t, None) for t in command], [(t, None) for t in args])
    return [replace(workload, argv=tuple(argv), command_line=argv[0].line if argv else None, expands_shell=shell)]


PASS_THROUGH = re.compile(r"""^\s*exec\s+(?:"\$(?:@|\{@\})"|\$(?:@|\{@\}))\s*$""", re.MULTILINE)


def _passes_through(path) -> bool:
    """Whether a copied entrypoint script ends by running its arguments (`exec "$@"`) and starts no vLLM itself."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return PASS_THROUGH.search(text) is not None and "vllm" not in text.lower()


def _run_script(workload: Workload, script: tuple, known: dict[str, str]) -> list[Workload]:
    """The workload of a Dockerfile whose command runs a script it copies in, its argv on the script's lines."""
    path, word = script
    found = script_command(path, known)
    if found is None:
        return []
    argv = []
    for token in found:
        workload, line = workload.line_in(str(path), token.line)
        argv.append(replace(token, line=line))
    note = f"{workload.container} runs {word.text} (line {word.line}), copied into the image from {path}: its command"
    return [replace(workload, argv=tuple(argv), command_line=argv[0].line if argv else None,
                    notes=workload.notes + (note,), read_through=(str(path),))]  # fmt: skip


def _instructions(text: str):
    """(line, KEYWORD, value, here-document body or None) of each instruction, continuation lines joined and comment
    lines dropped; an instruction that opens a here-document comes with its body (data, not instructions)."""
    pending, start, held, body = "", None, None, []
    for number, line in enumerate(text.splitlines(), 1):
        if held is not None:  # a here-document's body (RUN python3 - <<'PY' ... PY)
            if line.strip() != held[3]:
                body.append(line)
                continue
            yield held[0], held[1], held[2], "\n".join(body) + "\n"
            held, body = None, []
            continue
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if pending and line.lstrip().startswith("#"):
            continue  # a comment inside a continued instruction
        start = start or number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        found = INSTRUCTION.match(pending + line)
        if found:
            opened = HEREDOC.search(line)
            if opened:
                held = (start, found.group(1).upper(), found.group(2).strip(), opened.group(2))
            else:
                yield start, found.group(1).upper(), found.group(2).strip(), None
        pending, start = "", None
    if held is not None:  # a here-document left open at the end of the file
        yield held[0], held[1], held[2], "\n".join(body) + "\n"


def _declare(value: str, args: dict[str, str | None], global_args: dict[str, str | None]) -> None:
    """ARG NAME=default (several on one line too); a bare ARG NAME inside a stage takes the global default; an empty
    default (`ARG MODEL_NAME=`) is a placeholder for --build-arg, unknown here."""
    try:
        words = shlex.split(value, comments=True)
    except ValueError:
        return
    for word in words:
        name, eq, default = word.partition("=")
        args[name] = (default or None) if eq else global_args.get(name)  # `ARG X=`: a --build-arg to give


def substituted(value: str, known: dict[str, str | None]) -> str:
    """Dockerfile environment replacement (FROM, ENV...: not CMD / ENTRYPOINT, whose shell form the container's
    shell expands): $NAME, ${NAME}, ${NAME:-word}, ${NAME:+word} from the ARG / ENV values known (`:-` takes its
    word when the value is not); a name without a known value (an ARG given by --build-arg) stays as written."""

    def replaced(match: re.Match[str]) -> str:
        name, operator, word = match.group(1) or match.group(2), match.group(3), match.group(4)
        have = known.get(name)
        if operator == ":-":
            return have if have else word
        if have is None:
            return match.group(0)
        return (word if have else "") if operator == ":+" else have

    return DOCKERFILE_VARIABLE.sub(replaced, value)


def _env(value: str, line: int) -> list[EnvVar]:
    """ENV A=1 B="two words", or the legacy ENV NAME value."""
    try:
        words = shlex.split(value)
    except ValueError:
        return []
    if words and "=" not in words[0]:
        return [EnvVar(words[0], " ".join(words[1:]), line)]
    return [EnvVar(k, v, line) for k, _, v in (w.partition("=") for w in words)]


def _form(value: str, line: int) -> tuple[str, list[Token]]:
    """('exec', words) for a JSON array, else ('shell', [the script])."""
    if value.startswith("["):
        try:
            words = json.loads(value)
            if isinstance(words, list) and all(isinstance(w, str) for w in words):
                return "exec", [Token(w, line) for w in words]
        except ValueError:
            pass
    return "shell", [Token(value, line)]


def _run_written(workload: Workload, script: WrittenScript, known: dict[str, str]) -> list[Workload]:
    """The workload of a Dockerfile whose command runs a script its own build writes, its argv on the Dockerfile's
    lines that hold the script's."""
    found = argv_in_script(script.text, known)
    if found is None:
        return []
    argv = tuple(replace(t, line=script.line + t.line - 1 if script.line and t.line else script.line) for t in found)
    note = f"{workload.container} runs {script.path}, which the build writes (line {script.line}): its command"
    return [replace(workload, argv=argv, command_line=argv[0].line if argv else None, notes=workload.notes + (note,))]


def _command(entrypoint, cmd, known: dict[str, str], notes: list[str]) -> tuple[list[Token], list[Token], str]:
    """(command words, argument words, which instruction) the way Docker combines ENTRYPOINT and CMD."""
    if entrypoint is not None:
        form, words = entrypoint
        if form == "shell":  # /bin/sh -c "...": CMD is ignored
            return _shell(words[0], known, notes), [], "ENTRYPOINT"
        return words, (cmd[1] if cmd and cmd[0] == "exec" else []), "ENTRYPOINT"
    if cmd is None:
        return [], [], "CMD"
    form, words = cmd
    return (_shell(words[0], known, notes) if form == "shell" else []), ([] if form == "shell" else words), "CMD"


def _shell(script: Token, known: dict[str, str], notes: list[str]) -> list[Token]:
    text, said = conditional_words(script.text, known)
    notes += said
    return [Token("/bin/sh", script.line), Token("-c", script.line), Token(text, script.line)]


def script_in_built_image(command: list[Token], folder: Path) -> tuple[Path, Token] | None:
    """The project file a container's command runs (`/scripts/start_embed.sh`) when a Dockerfile in the folder (the
    Compose file's) COPYs it into the image there (`COPY scripts/ /scripts/`): the image the service runs is taken to
    be that build of the project."""
    try:
        dockerfiles = sorted(p for p in folder.iterdir() if p.is_file() and DOCKERFILE_NAMES.search(p.name))
    except OSError:
        return None
    for dockerfile in dockerfiles:
        try:
            text = dockerfile.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        copies, workdir = [], "/"
        for _, keyword, value, _ in _instructions(text):
            if keyword == "WORKDIR":
                workdir = str(PurePosixPath(workdir) / value.strip())
            elif keyword in ("COPY", "ADD") and (copied := copy_of(value, workdir)) is not None:
                copies.append(copied)
        found = copied_script(command, copies, "/", str(dockerfile))
        if found is not None:
            return found
    return None
