"""Apptainer / Singularity definition files (`vllm.def`: a `Bootstrap:` header, then %sections): the image's
%runscript (what `apptainer run IMAGE.sif` runs) is read as a shell script on the file's own lines, with the
%environment section's exports as its variables, in the image the header builds from (`From: vllm/vllm-openai:v0.11.2`
gives the release). Apptainer's "Definition Files" reference: %runscript runs with `/bin/sh`, its arguments are "$@"."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import PurePosixPath

from kvdoctor.scan.command import script_assignments
from kvdoctor.scan.documents import APPTAINER_DEFINITION_SUFFIX, SourceFile, is_apptainer_definition
from kvdoctor.scan.scripts import script_findings
from kvdoctor.scan.workload import Workload

HEADER = re.compile(r"^\s*(\w+):\s*(\S.*?)\s*$")
SECTION = re.compile(r"^%(\w+)\b")
DOCKER_AGENTS = {"docker", "docker-daemon", "docker-archive", "oras", "library", "shub"}
NOTE = "an Apptainer definition's %runscript: what `apptainer run` of the image it builds runs"


def is_definition(source: SourceFile) -> bool:
    """A definition file: a .def whose header names its bootstrap agent before any section."""
    return source.path.endswith(APPTAINER_DEFINITION_SUFFIX) and is_apptainer_definition(source.text)


def read(source: SourceFile) -> tuple[list[Workload], list[str]]:
    """The workloads the %runscript starts (named by the file, container 'apptainer'), and notes for commands kvdoctor
    cannot see."""
    header, sections = _parts(source.text)
    runscript = sections.get("runscript")
    if runscript is None:
        return [], []
    env = script_assignments(sections["environment"], {}) if "environment" in sections else {}
    name = PurePosixPath(source.path).name
    found, notes = script_findings(runscript, 1, source.path, name, env)
    agent = header.get("bootstrap", "").lower()
    image = header.get("from") if agent in DOCKER_AGENTS else None
    base = f"built From: {image} (Bootstrap: {agent})" if image else f"Bootstrap: {agent or 'unknown'}"
    return [replace(w, kind="Apptainer definition", container="apptainer", image=w.image or image,
                    notes=(f"{NOTE}; {base}",) + w.notes) for w in found], notes


def _parts(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """The header's keys (lower case) and each section's body as a script on the file's own lines (other lines
    blank, so a finding's line is the file's)."""
    lines = text.replace("\r\n", "\n").split("\n")
    header: dict[str, str] = {}
    sections: dict[str, list[str]] = {}
    current = None
    for number, line in enumerate(lines):
        if (opened := SECTION.match(line)) is not None:
            current = opened.group(1).lower()
            sections.setdefault(current, [""] * len(lines))
            continue
        if current is None:
            if (setting := HEADER.match(line)) is not None and not line.lstrip().startswith("#"):
                header.setdefault(setting.group(1).lower(), setting.group(2))
            continue
        sections[current][number] = line
    return header, {name: "\n".join(body) for name, body in sections.items()}
