"""A systemd service unit that starts vLLM (`ExecStart=/opt/vllm/.venv/bin/vllm serve ...`): its ExecStart lines
(continued with a backslash) read as a script's command, after its `Environment=` assignments, each on its own line
of the unit (systemd.service(5), systemd.exec(5)). ExecStart's prefixes (`-`, `@`, `+`, `!`, `:`) are dropped;
the workload is named by the unit's file name, as a script's."""

from __future__ import annotations

import re
import shlex
from dataclasses import replace
from pathlib import Path, PurePosixPath

from kvdoctor.scan.command import ASSIGNMENT, SHELLS, heredocs
from kvdoctor.scan.documents import UNIT_TEMPLATE_SUFFIXES, SourceFile
from kvdoctor.scan import process_env
from kvdoctor.scan.scripts import installed_before, installed_in, script_findings
from kvdoctor.scan.workload import EnvVar, Workload

SUFFIX = ".service"
SECTION = re.compile(r"^\s*\[(\w[\w-]*)\]\s*$")
SETTING = re.compile(r"^\s*(ExecStart|Environment)\s*=\s*(.*)$")
ENVIRONMENT = re.compile(r"^\s*(Environment|EnvironmentFile)\s*=\s*(.*)$")
EXEC_PREFIXES = "-@+!:"
# systemd's specifiers in ExecStart (systemd.unit(5) "Specifiers"): `%%` is a `%`; the home, user and host ones read
# as the shell's variables, the others (a template unit's instance `%i`, the unit's name `%n`, ...) as variables named
# for them: values the unit does not state, never judged as written (`--port %i` is no invalid port)
SPECIFIER = re.compile(r"%([A-Za-z%])")
SPECIFIER_VARIABLES = {"h": "${HOME}", "u": "${USER}", "U": "${UID}", "H": "${HOSTNAME}", "i": "${UNIT_INSTANCE}",
                       "I": "${UNIT_INSTANCE}", "n": "${UNIT_NAME}", "N": "${UNIT_NAME}", "p": "${UNIT_PREFIX}",
                       "P": "${UNIT_PREFIX}"}


def is_unit(source: SourceFile) -> bool:
    """A unit file, an Ansible template of one that was rendered (`vllm.service.j2`), or a unit an installer fills
    in (`vllm.service.template`: its @PLACEHOLDER@ words stay unknown values)."""
    from kvdoctor.scan.ansible_templates import rendered_name

    named = rendered_name(source.path).endswith(SUFFIX) or source.path.endswith(UNIT_TEMPLATE_SUFFIXES)
    return named and "ExecStart" in source.text


UNIT_HEREDOC_NOTE = "a systemd unit the shell script writes with a here-document ({path}), read as that unit"
WRITES_UNIT = re.compile(r"(?:\btee\b(?:\s+-a)?\s+|>\s*)['\"]?(\S+?\.service)\b")
"""`sudo tee /etc/systemd/system/vllm.service <<EOF`, `cat <<EOF > vllm.service`: the here-document is a unit file."""
UNQUOTED_ESCAPE = re.compile(r"\\([$`\\])")
"""What an unquoted here-document's backslash escapes: `\\$` writes `$`, `\\\\` writes one backslash."""


def written_by_script(script: SourceFile) -> tuple[list[Workload], list[str]]:
    """The workloads and notes of each unit a shell script writes with a here-document, on the script's own lines."""
    found: list[Workload] = []
    notes: list[str] = []
    for heredoc in heredocs(script.text):
        unit = WRITES_UNIT.search(heredoc.opener)
        if unit is None or "ExecStart" not in heredoc.body:
            continue
        body = heredoc.body if heredoc.quoted else UNQUOTED_ESCAPE.sub(r"\1", heredoc.body)
        workloads, why = read(SourceFile(script.path, "\n" * (heredoc.first_line - 1) + body))
        note = UNIT_HEREDOC_NOTE.format(path=unit.group(1))
        found += [replace(w, notes=w.notes + (note,)) for w in workloads]
        notes += why
    installed = installed_in(script.text, 1) if found else None
    if installed is not None:  # `pip install vllm==X` in the script that writes and starts the unit
        found = [installed_before(w, installed) if w.image is None and w.vllm_pin is None else w for w in found]
    return found, notes


def read(source: SourceFile) -> tuple[list[Workload], list[str]]:
    """The unit's workloads (with the environment systemd gives the process) and notes."""
    found, notes = _read(source)
    variables, files = environment(source.text)
    found = process_env.inherited(found, variables, before_command=False)
    return [replace(w, env_from=w.env_from + tuple(f"EnvironmentFile {f}" for f in files))
            if w.image is None and files else w for w in found], notes


def environment(text: str) -> tuple[list[EnvVar], list[str]]:
    """The variables the [Service] section's Environment= lines set, each on its line, and its EnvironmentFile=s."""
    variables: list[EnvVar] = []
    files: list[str] = []
    section = None
    for number, line in enumerate(text.replace("\r\n", "\n").split("\n"), start=1):
        if (header := SECTION.match(line)) is not None:
            section = header.group(1)
        elif section == "Service" and (setting := ENVIRONMENT.match(line)) is not None:
            if setting.group(1) == "EnvironmentFile":
                files.append(setting.group(2).strip().lstrip("-"))
            else:
                variables += [EnvVar(name, value, number) for name, value in _assignments(setting.group(2))]
    return variables, files


def _read(source: SourceFile) -> tuple[list[Workload], list[str]]:
    """The unit's workloads and notes, read from a script that holds its ExecStart on the unit's own lines; when
    ExecStart runs a script file (`ExecStart=/home/u/app/vllm-server.sh`) that the repository keeps beside the unit,
    that file's vLLM command with the unit's Environment= values."""
    script, env = as_script(source.text)
    found, notes = script_findings(script, 1, source.path, PurePosixPath(source.path).name, env)
    if found:
        cut = [f"line {n} of the unit ends in a backslash followed by blanks: systemd continues a line only when the "
               "backslash is its last character, so ExecStart ends on that line (the backslash escapes a blank, one "
               "more word of the command) and the lines after it are no setting (systemd warns of a missing '=', "
               "older releases refuse the unit)"
               for n in broken_continuations(script)]
        return [replace(w, notes=w.notes + tuple(cut)) for w in found], notes
    beside = _script_beside(script, source.path)
    if beside is None:
        return found, notes + _unseen_program(script, source.path)
    path, text, word = beside
    inner, inner_notes = script_findings(text, 1, str(path), PurePosixPath(source.path).name, env)
    note = (f"ExecStart runs {word}, a path on the host: read from the {path.name} the repository keeps beside the "
            "unit, with the unit's Environment= values")
    return [replace(w, notes=w.notes + (note,), read_through=(str(path),)) for w in inner], notes + inner_notes


def _unseen_program(script: str, unit: str) -> list[str]:
    """A note for an ExecStart that runs a program named for vLLM which is not beside the unit (a Python launcher
    that builds the command, `launch_vllm_server.py --config vllm_config.json`): its vLLM command is not checked."""
    for line in script.split("\n"):
        try:
            words = shlex.split(line)
        except ValueError:
            continue
        names = [(w, PurePosixPath(w).name.lower()) for w in words if not w.startswith("-")]
        named = [w for w, name in names if "vllm" in name and name != "vllm"
                 and PurePosixPath(name).suffix in (".py", ".sh", ".bash", "")]
        if named and _in_repository(named[0], unit) is None:
            return [f"{unit}: ExecStart runs {named[0]}, which builds the vLLM command and is not beside the unit in "
                    "the scanned files: not checked (scan the folder that holds it)"]
    return []


def _script_beside(script: str, unit: str) -> tuple[Path, str, str] | None:
    """(path, text, the ExecStart word) of the script file ExecStart runs, found by its name beside the unit."""
    if unit == "<stdin>":
        return None
    for line in script.split("\n"):
        try:
            words = shlex.split(line)
        except ValueError:
            continue
        program = next((w for w in words if PurePosixPath(w).name not in SHELLS | {"env"} and not w.startswith("-")
                        and not ASSIGNMENT.match(w)), None)  # `/usr/bin/env [X=1] bash FILE` runs FILE
        if program is None or not program.endswith((".sh", ".bash")):
            continue
        path = _in_repository(program, unit)
        try:
            return (path, path.read_text(encoding="utf-8"), program) if path is not None else None
        except (OSError, UnicodeDecodeError):
            return None
    return None


MAX_PARENTS = 2
"""How far above the unit the repository's copy of an installed script is looked for (deploy/x.service, scripts/)."""


def _in_repository(program: str, unit: str) -> Path | None:
    """The repository's copy of a script ExecStart runs from where it is installed: beside the unit by its name, or
    above the unit by its path's last folders (/opt/app/scripts/start.sh -> scripts/start.sh of the checkout)."""
    folder = Path(unit).parent
    parts = PurePosixPath(program).parts
    candidates = [folder / parts[-1]] if parts else []
    for above in [folder, *list(folder.parents)[:MAX_PARENTS]]:
        candidates += [above.joinpath(*parts[-depth:]) for depth in (2, 3) if len(parts) > depth]
    return next((path for path in candidates if path.is_file()), None)


def as_script(text: str) -> tuple[str, dict[str, str]]:
    """The [Service] section's ExecStart= lines as shell lines (the others blank, so that every word keeps its
    line), and the variables its Environment= lines set (systemd expands ${NAME} in ExecStart from them)."""
    out: list[str] = []
    section, continuing = None, False
    for line in text.replace("\r\n", "\n").split("\n"):
        if continuing:
            out.append(_specifiers_read(line))
            continuing = continues(line)
            continue
        if (header := SECTION.match(line)) is not None:
            section = header.group(1)
            out.append("")
            continue
        setting = SETTING.match(line) if section == "Service" else None
        if setting is None:
            out.append("")
            continue
        key, value = setting.groups()
        if key == "Environment":
            out.append("")
            continue
        out.append(_specifiers_read(value.lstrip(EXEC_PREFIXES)))
        continuing = continues(line)
    return "\n".join(out), {v.name: v.value for v in environment(text)[0]}


def _specifiers_read(line: str) -> str:
    """An ExecStart line with systemd's specifiers as the values they stand for (SPECIFIER_VARIABLES)."""
    if "%" not in line:
        return line
    return SPECIFIER.sub(lambda m: "%" if m.group(1) == "%" else SPECIFIER_VARIABLES.get(
        m.group(1), "${SYSTEMD_SPECIFIER_" + m.group(1) + "}"), line)


def continues(line: str) -> bool:
    """Whether systemd joins the line with the next: an unescaped backslash is its last character, nothing after it
    (src/shared/conf-parser.c, config_parse: a backslash followed by a blank escapes that blank instead)."""
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


BROKEN_CONTINUATION = re.compile(r"(?<!\\)\\[ \t]+$")


def broken_continuations(script: str) -> list[int]:
    """The 1-based lines of the unit's ExecStart (as_script's script: the unit's own lines) that end in a backslash and
    blanks: meant to continue the command, they end it."""
    return [number for number, line in enumerate(script.split("\n"), 1) if BROKEN_CONTINUATION.search(line)]


def _assignments(value: str) -> list[tuple[str, str]]:
    try:
        return [item.partition("=")[::2] for item in shlex.split(value) if "=" in item]
    except ValueError:
        return []
