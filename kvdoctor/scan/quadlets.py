"""A Podman Quadlet container unit (`vllm.container`): systemd runs `podman run` built from its [Container] section
(podman-systemd.unit(5)): Image=, Exec= (the arguments after the image), ContainerName=, Environment=, AddDevice=,
ShmSize=, Entrypoint= and PodmanArgs= (options passed through). It is read as that `podman run`, each word on its
setting's line; the workload is named by the unit's file name, as a systemd unit's."""

from __future__ import annotations

import re
import shlex
from dataclasses import replace
from pathlib import PurePosixPath

from kvdoctor.scan.documents import SourceFile
from kvdoctor.scan.scripts import docker_run
from kvdoctor.scan.workload import Token, Workload

SUFFIX = ".container"
SECTION = re.compile(r"^\s*\[(\w[\w-]*)\]\s*$")
SETTING = re.compile(r"^\s*([A-Za-z]+)\s*=\s*(.*?)\s*$")
# Quadlet keys -> the podman run option each becomes (one value a line; Environment= holds several K=V words)
OPTIONS = {"ContainerName": "--name", "AddDevice": "--device", "ShmSize": "--shm-size", "Entrypoint": "--entrypoint",
           "Environment": "--env", "Network": "--network", "User": "--user", "Volume": "--volume"}


def is_quadlet(source: SourceFile) -> bool:
    return source.path.endswith(SUFFIX) and "[Container]" in source.text


def read(source: SourceFile) -> tuple[list[Workload], list[str]]:
    """The workload of the `podman run` the unit stands for, or a note when it runs no vLLM."""
    words, image, exec_words, line = _run_words(source.text)
    if image is None:
        return [], [f"{source.path}: a Quadlet container unit with no Image=: not checked"]
    argv = [Token("podman", line), Token("run", line)] + words + [image] + exec_words
    workload = docker_run(source.path, PurePosixPath(source.path).name, argv)
    if workload is None:
        return [], []
    note = "a Podman Quadlet unit: systemd runs podman run with its [Container] settings (podman-systemd.unit(5))"
    return [replace(workload, kind="Quadlet", notes=(note,) + workload.notes[1:])], []


def _run_words(text: str) -> tuple[list[Token], Token | None, list[Token], int]:
    """(podman run options, the image, Exec='s words, the [Container] header's line) of the unit."""
    options: list[Token] = []
    exec_words: list[Token] = []
    image: Token | None = None
    section, header = None, 1
    for number, line in enumerate(text.replace("\r\n", "\n").split("\n"), 1):
        if (found := SECTION.match(line)) is not None:
            section = found.group(1)
            header = number if section == "Container" else header
            continue
        setting = SETTING.match(line) if section == "Container" else None
        if setting is None:
            continue
        key, value = setting.groups()
        try:
            values = shlex.split(value)
        except ValueError:
            values = value.split()
        if key == "Image":
            image = Token(value, number)
        elif key == "Exec":
            exec_words = [Token(word, number) for word in values]
        elif key == "PodmanArgs":
            options += [Token(word, number) for word in values]
        elif key == "Environment":
            options += [token for word in values for token in (Token("--env", number), Token(word, number))]
        elif key in OPTIONS:
            options += [Token(OPTIONS[key], number), Token(value, number)]
    return options, image, exec_words, header
