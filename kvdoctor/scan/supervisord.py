"""supervisord's programs (`[program:vllm]` in supervisord.conf or a conf.d/*.conf): each program's `command=` is read
as a shell line on the file's own lines (supervisord splits it as a shell would and runs it without one, so a
`bash -c '...'` in it is the shell that runs vLLM), its continuation lines (indented, the INI way) with it, and its
`environment=KEY="value",...` as the variables it runs with; `%(ENV_X)s` is supervisord's expansion of the
environment, read as $X (supervisord's "Configuration File"). A program is named as a Compose service is: by itself."""

from __future__ import annotations

import re
import shlex
from dataclasses import replace

from kvdoctor.scan.documents import SUPERVISORD_SUFFIXES, SourceFile
from kvdoctor.scan import process_env
from kvdoctor.scan.scripts import script_findings
from kvdoctor.scan.workload import EnvVar, Workload

PROGRAM = re.compile(r"^\[program:([^\]\s]+)\]\s*$")
SECTION = re.compile(r"^\[[^\]]*\]\s*$")
SETTING = re.compile(r"^(\w+)\s*[=:]\s?(.*)$")
ENV_REFERENCE = re.compile(r"%\(ENV_(\w+)\)s")
NOTE = "a supervisord program: supervisord runs its command= with its environment= values"


def is_supervisord(source: SourceFile) -> bool:
    return source.path.endswith(SUPERVISORD_SUFFIXES) and "[program:" in source.text


def read(source: SourceFile) -> tuple[list[Workload], list[str]]:
    """The workloads of the programs that run vLLM, and notes for their commands kvdoctor cannot see."""
    found: list[Workload] = []
    notes: list[str] = []
    for name, script, env in _programs(source.text):
        workloads, unseen = script_findings(script, 1, source.path, name, env)
        workloads = process_env.inherited(workloads, [EnvVar(k, v, None) for k, v in env.items()], before_command=False)
        found += [replace(w, kind="supervisord program", container=name, notes=(NOTE,) + w.notes) for w in workloads]
        notes += unseen
    return found, notes


def _programs(text: str) -> list[tuple[str, str, dict[str, str]]]:
    """(program name, its command as a script on the file's lines, its environment) for each [program:x]."""
    lines = text.replace("\r\n", "\n").split("\n")
    programs: list[tuple[str, list[str], dict[str, str]]] = []
    key = None  # the setting whose continuation lines follow
    for number, line in enumerate(lines):
        if line[:1] in (" ", "\t") and line.strip() and key is not None:
            if key == "command":
                programs[-1][1][number] = ENV_REFERENCE.sub(r"${\1}", line)
            elif key == "environment":
                programs[-1][2].update(_environment(line))
            continue
        key = None
        stripped = line.strip()
        if (header := PROGRAM.match(stripped)) is not None or SECTION.match(stripped):
            # a section of another kind ([supervisord], [group:x]) gets no name: its settings are not read
            programs.append((header.group(1) if header else "", [""] * len(lines), {}))
            continue
        if not programs or line.startswith(("#", ";")) or (setting := SETTING.match(line)) is None:
            continue
        key, value = setting.groups()
        if key == "command":
            programs[-1][1][number] = ENV_REFERENCE.sub(r"${\1}", value)
        elif key == "environment":
            programs[-1][2].update(_environment(value))
    return [(name, "\n".join(script), env) for name, script, env in programs if name and any(script)]


def _environment(value: str) -> dict[str, str]:
    """`KEY="value",KEY2=value2` (supervisord's environment= syntax) as a mapping."""
    lexer = shlex.shlex(ENV_REFERENCE.sub(r"$\1", value), posix=True)
    lexer.whitespace, lexer.whitespace_split = ",", True
    try:
        items = list(lexer)
    except ValueError:
        return {}
    return dict(item.strip().partition("=")[::2] for item in items if "=" in item)
