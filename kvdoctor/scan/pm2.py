"""PM2 process files (pm2's "Ecosystem File": `ecosystem.config.js`, also .cjs/.mjs/.json): each entry of `apps`
whose `script` (with its `args`, and an `interpreter` other than node or none) runs vLLM, read as the shell line pm2
starts, with the entry's `env` as its variables and its `name` as the workload's. The JavaScript object literal is
read as data (strings, numbers, lists, objects); a value computed by code (`process.env.X`, a function call) is not
known here and is left out (scan/js_literals.py). A Pulumi program's Kubernetes objects are read by
scan/pulumi_programs.py; any other JavaScript or TypeScript file that names a vLLM launch (a CDK program) is named, not
read."""

from __future__ import annotations

import re
import shlex
from dataclasses import replace
from pathlib import PurePosixPath

from kvdoctor.scan.documents import CODE_SUFFIXES, VLLM_LAUNCH_TEXT, SourceFile
from kvdoctor.scan import process_env
from kvdoctor.scan.scripts import script_findings
from kvdoctor.scan.js_literals import key_name, literal_value, read_tokens
from kvdoctor.scan.workload import EnvVar, Workload

PM2_SUFFIXES = (".js", ".cjs", ".mjs", ".json")
NOTE = "a PM2 app (ecosystem file): pm2 runs its script with its args and env"


def is_ecosystem(source: SourceFile) -> bool:
    """A pm2 ecosystem file: a JS or JSON file with an `apps` list whose entries give a `script`."""
    return source.path.endswith(PM2_SUFFIXES) and re.search(r"""["']?\bapps["']?\s*:\s*\[""", source.text) is not None \
        and re.search(r"""["']?\bscript["']?\s*:""", source.text) is not None


def read(source: SourceFile) -> tuple[list[Workload], list[str]]:
    """The workloads of the apps that run vLLM, and notes for their commands kvdoctor cannot see."""
    tokens = read_tokens(source.text)
    found: list[Workload] = []
    notes: list[str] = []
    for app in _apps(tokens):
        command = _command(app)
        if command is None:
            continue
        text, line = command
        variables = [EnvVar(key, value if isinstance(value, str) else None, line,
                            None if isinstance(value, str) else "code in the ecosystem file")
                     for key, (value, line) in _object(app.get("env", (None, 0))[0]).items()]  # fmt: skip
        env = {v.name: v.value for v in variables if v.value is not None}
        name = app["name"][0] if isinstance(app.get("name", (None,))[0], str) else PurePosixPath(source.path).name
        workloads, unseen = script_findings(text, line, source.path, name, env)
        workloads = process_env.inherited(workloads, variables, before_command=False)
        found += [replace(w, kind="PM2 app", name=name, notes=(NOTE,) + w.notes) for w in workloads]
        notes += unseen
    return found, notes


def is_program(source: SourceFile) -> bool:
    """A JavaScript or TypeScript program (not a PM2 ecosystem file): never read as YAML."""
    return source.path.endswith(CODE_SUFFIXES)


def unread_note(source: SourceFile) -> str | None:
    """A note for a program that launches vLLM (a Pulumi or CDK program), None for one that does not."""
    if VLLM_LAUNCH_TEXT.search(source.text) is None:
        return None
    language = "TypeScript" if source.path.endswith((".ts", ".mts", ".cts")) else "JavaScript"
    return (f"{source.path}: a {language} program that names a vLLM launch (a Pulumi or CDK program?): not read; scan "
            "what it renders (`pulumi preview --json`, `cdk synth`, the manifests it writes)")


def _apps(tokens: list[tuple[str, int]]) -> list[dict[str, tuple[object, int]]]:
    """The entries of the first `apps: [...]` list."""
    for index in range(len(tokens) - 2):
        if key_name(tokens[index][0]) == "apps" and tokens[index + 1][0] == ":" and tokens[index + 2][0] == "[":
            value, _ = literal_value(tokens, index + 2)
            return [_object(item) for item in value] if isinstance(value, list) else []
    return []


def _object(value: object) -> dict[str, tuple[object, int]]:
    return value if isinstance(value, dict) else {}


def _command(app: dict[str, tuple[object, int]]) -> tuple[str, int] | None:
    """The shell line pm2 starts for an app (script, args, interpreter), on the line of its script or args."""
    script, script_line = app.get("script", (None, 0))
    if not isinstance(script, str):
        return None
    args, args_line = app.get("args", ("", script_line))
    if isinstance(args, list):
        args = " ".join(shlex.quote(a) for a in args if isinstance(a, str))
    elif not isinstance(args, str):
        return None  # args computed by code: the command is not known here
    interpreter = app.get("interpreter", (None, 0))[0]
    words = [shlex.quote(script), args]
    if isinstance(interpreter, str) and PurePosixPath(interpreter).name not in ("none", "node", ""):
        interpreter_args = app.get("interpreter_args", ("", 0))[0]
        words = [interpreter, interpreter_args if isinstance(interpreter_args, str) else ""] + words
    return " ".join(w for w in words if w), (args_line if args else script_line) or 1
