"""A Compose service whose entrypoint (or command) runs a script bind-mounted from the project's folder
(`volumes: [./entrypoint.sh:/usr/local/bin/vllm-entrypoint:ro]`, `entrypoint: ["/usr/local/bin/vllm-entrypoint"]`):
the vLLM command is in that file, run with the service's environment. Compose reference, services.volumes: the short
syntax is SOURCE:TARGET[:MODE], a SOURCE starting with `.` or `/` a host path (relative: to the compose file's
folder), any other a named volume; the long syntax gives type: bind, source and target."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import yaml

from kvdoctor.scan import nodes
from kvdoctor.scan.called_scripts import CalledScript, script_word
from kvdoctor.scan.workload import Token


def mounted_script(command: list[Token], volumes: yaml.Node | None, compose_file: str) -> CalledScript | None:
    """The project file the service's command runs (its first word, or a shell's script argument) through a bind
    mount, else None."""
    mounts = bind_mounts(volumes)
    if not mounts:
        return _copied_by_the_projects_dockerfile(command, compose_file)
    word = script_word(command)
    source = _host_source(word.text.split()[0], mounts) if word else None  # sh -c "/srv/start.sh --x": its first word
    path = Path(compose_file).parent / source if source else None
    try:
        if path is not None and path.is_file():
            return CalledScript(path, path.read_text(encoding="utf-8"), word)
    except (OSError, UnicodeDecodeError):
        return None
    return _copied_by_the_projects_dockerfile(command, compose_file)


def _copied_by_the_projects_dockerfile(command: list[Token], compose_file: str) -> CalledScript | None:
    """The script a Dockerfile beside the Compose file COPYs to the path the command runs (copied_scripts.py)."""
    from kvdoctor.scan.dockerfile import script_in_built_image

    found = script_in_built_image(command, Path(compose_file).parent)
    if found is None:
        return None
    path, word = found
    try:
        return CalledScript(path, path.read_text(encoding="utf-8"), word)
    except (OSError, UnicodeDecodeError):
        return None


def bind_mounts(volumes: yaml.Node | None) -> list[tuple[str, str]]:
    """(target in the container, relative source in the project) of each bind mount of a project path."""
    found: list[tuple[str, str]] = []
    for item in nodes.items(volumes):
        text = nodes.text(item)
        if text is not None:
            source, _, rest = text.partition(":")
            target = rest.partition(":")[0]
        elif nodes.text(nodes.get(item, "type")) == "bind":
            source, target = nodes.text(nodes.get(item, "source")) or "", nodes.text(nodes.get(item, "target")) or ""
        else:
            continue
        if source.startswith(".") and target.startswith("/") and "$" not in source:
            found.append((target.rstrip("/"), source))
    return found


def _host_source(path: str, mounts: list[tuple[str, str]]) -> str | None:
    """The project path mounted at `path`: a file mounted there, or a file inside a mounted folder."""
    for target, source in reversed(mounts):  # a later mount over the same path hides an earlier one
        if path == target:
            return source
        if path.startswith(target + "/"):
            return str(PurePosixPath(source) / path[len(target) + 1 :])
    return None
