"""The environment a vLLM process started by a shell, a systemd unit, PM2 or supervisord inherits: a script's
`export NAME=VALUE` (and `declare -x`) run before the command, or the variables the service manager sets
(Environment=, env, environment=). vLLM reads them as a container's env (VLLM_ATTENTION_BACKEND,
CUDA_VISIBLE_DEVICES), so they become the workload's env, each on its own line. A plain `NAME=VALUE` without export is
the shell's own and is not inherited; a `docker run` gets only its -e values."""

from __future__ import annotations

import re
from dataclasses import replace

from kvdoctor.scan.command import ASSIGNMENT, expand_words, script_assignments, script_commands
from kvdoctor.scan.workload import LINE_FILE_STRIDE, EnvVar, Token, Workload

EXPORTERS = (("export",), ("declare", "-x"), ("typeset", "-x"))
"""The commands whose NAME[=VALUE] words export variables to the processes the shell starts."""
PLACEHOLDER = re.compile(r"^(?:TODO|TBD|FIXME|CHANGE_?ME|X{3,}|<[^<>]*>|\.\.\.|your[_-]\w*)$", re.IGNORECASE)
"""A value left for the user to fill in (`export CUDA_VISIBLE_DEVICES=TODO`): unknown here, never the value run."""


def exported(script: str, first_line: int, env: dict[str, str] | None = None) -> list[EnvVar]:
    """The variables a script exports, in order, each with its value as the script sets it (None when unknown)."""
    known = script_assignments(script, dict(env or {}))
    found: list[EnvVar] = []
    for words in script_commands(script, first_line):
        texts = tuple(w.text for w in words)
        exporter = next((e for e in EXPORTERS if texts[:len(e)] == e), None)
        for word in words[len(exporter):] if exporter else ():
            name, has_value, value = word.text.partition("=")
            if not name.isidentifier():  # an option (-n, -p) or a word that names no variable
                continue
            text = " ".join(t.text for t in expand_words([Token(value, word.line)], known)) if has_value \
                else known.get(name)
            if text is not None and PLACEHOLDER.match(text.strip("'\"")):
                found.append(EnvVar(name, None, word.line, f"a placeholder to fill in ({text})"))
            elif text is None or "$" in text:
                found.append(EnvVar(name, None, word.line, "the shell's environment"))
            else:
                found.append(EnvVar(name, text, word.line))
    return found


def inherited(workloads: list[Workload], variables: list[EnvVar], before_command: bool = True) -> list[Workload]:
    """The workloads that run vLLM in the process's own environment (no image of their own) with ``variables``
    added to their env: those set before the command when ``before_command`` (a script's exports), else all (a unit's
    Environment=). A variable the workload already sets (its env, a NAME=VALUE word before the command) wins."""
    return [_with(w, variables, before_command) for w in workloads] if variables else workloads


def _with(workload: Workload, variables: list[EnvVar], before_command: bool) -> Workload:
    if workload.image is not None or workload.platform != "script":
        return workload
    own = {v.name for v in workload.env}
    for token in workload.argv:
        if not ASSIGNMENT.match(token.text):
            break
        own.add(token.text.split("=", 1)[0])
    command = workload.command_line
    latest: dict[str, EnvVar] = {}
    for var in variables:
        if var.name in own:
            continue
        if before_command and command is not None and command < LINE_FILE_STRIDE and var.line is not None \
                and var.line >= command:
            continue
        latest[var.name] = var  # the last export before the command wins
    if not latest:
        return workload
    return replace(workload, env=workload.env + tuple(latest.values()))
