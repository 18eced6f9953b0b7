"""A script that starts a Compose project (`docker compose -p P -f docker-compose.yml up -d`, `docker-compose up`,
`podman compose up`): the Compose file it names (or the one Compose finds in the script's folder) is read with the
variables the script set before it, which override the project's .env as the shell's environment does (Compose's
interpolation: the environment wins over .env)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path, PurePosixPath

from kvdoctor.scan import compose
from kvdoctor.scan.documents import ManifestError, SourceFile, compose_documents
from kvdoctor.scan.workload import Token, Workload

DEFAULT_FILES = ("compose.yaml", "compose.yml", "docker-compose.yml", "docker-compose.yaml")
"""The files `docker compose` looks for in the project directory when no -f names one (compose-spec)."""
STARTS = {"up", "run", "create", "start"}
VALUE_OPTIONS = {"-f", "--file", "-p", "--project-name", "--env-file", "--project-directory", "--profile",
                 "--ansi", "--parallel", "--progress"}  # fmt: skip
MAX_BYTES = 1 << 20


def compose_files(words: list[Token], script_file: str) -> list[Path] | None:
    """The Compose files a `docker compose ... up` command starts (relative to the script's folder), or None when
    the command starts no Compose project."""
    texts = [w.text for w in words]
    if texts[:1] == ["docker-compose"]:
        index = 1
    elif texts[:2] in (["docker", "compose"], ["podman", "compose"]) or texts[:1] == ["podman-compose"]:
        index = 1 if texts[0] == "podman-compose" else 2
    else:
        return None
    named: list[str] = []
    directory = Path(script_file).parent
    while index < len(texts) and texts[index].startswith("-"):
        option, _, inline = texts[index].partition("=")
        value = inline or (texts[index + 1] if option in VALUE_OPTIONS and index + 1 < len(texts) else "")
        if option in ("-f", "--file") and value:
            named.append(value)
        elif option == "--project-directory" and value and "$" not in value:
            directory = directory / value
        index += 1 if inline or option not in VALUE_OPTIONS else 2
    if index >= len(texts) or texts[index] not in STARTS or "$" in "".join(named):
        return None
    if named:
        paths = [directory / n for n in named]
    else:  # the first default file the project directory holds
        paths = [p for p in (directory / n for n in DEFAULT_FILES) if p.is_file()][:1]
    return [p for p in paths if p.is_file() and p.stat().st_size <= MAX_BYTES] or None


def workloads(path: Path, variables: dict[str, str], script_file: str) -> list[Workload]:
    """The services of the Compose file that run vLLM, interpolated with the script's variables."""
    try:
        text = path.read_text(encoding="utf-8")
        documents = compose_documents(SourceFile(str(path), text))
    except (OSError, UnicodeDecodeError, ManifestError):
        return []
    note = f"started by {PurePosixPath(script_file).name} (docker compose up) with the variables it sets before"
    return [replace(w, notes=w.notes + (note,), read_through=(str(path),))
            for doc in documents if compose.is_compose(doc.root)
            for w in compose.workloads(doc, text, shell_env=variables)]
