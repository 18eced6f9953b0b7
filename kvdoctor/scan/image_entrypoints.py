"""Images whose entrypoint builds vLLM's command from environment variables (kvdoctor/data/image_entrypoints.yaml):
the argv such a container runs, each word on the line of the env var it came from; and, for an image named for vLLM
whose entrypoint no row describes, the words that say its command cannot be seen here."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import lru_cache

from kvdoctor.base.yaml_safe import load_yaml_cached
from kvdoctor.data import read_data
from kvdoctor.scan.image import repository_path, split_image
from kvdoctor.scan.workload import EnvVar, Token

TRUE_VALUES = {"true", "1", "yes", "on"}
FALSE_VALUES = {"false", "0", "no", "off"}
GPU_COUNT = "{gpu_count}"


@dataclass(frozen=True)
class EnvRow:
    env: str
    flag: str
    kind: str
    """value, paired (true -> --flag, false -> --no-flag), switch (true -> --flag) or removed (dropped)."""
    at: str
    default: str | None = None
    default_env: str | None = None
    only_with: str | None = None
    zero_unset: bool = False


@dataclass(frozen=True)
class EnvEntrypoint:
    name: str
    repository: str
    tags: re.Pattern[str]
    source: str
    launcher: str
    words: tuple[str, ...]
    rows: tuple[EnvRow, ...]
    extra_args: str | None
    reserved: frozenset[str]
    releases: tuple[tuple[re.Pattern[str], str, str], ...] = ()
    """(tags, vLLM release, where read): the vLLM a tag of the image installs, where its build pins one."""


@lru_cache(maxsize=1)
def entrypoints() -> tuple[EnvEntrypoint, ...]:
    data = load_yaml_cached(read_data("image_entrypoints.yaml"), "image_entrypoints.yaml")
    return tuple(EnvEntrypoint(
        name=entry["name"], repository=entry["repository"], tags=re.compile(entry["tags"]), source=entry["source"],
        launcher=entry["command"]["launcher"], words=tuple(entry["command"].get("words", ())),
        rows=tuple(EnvRow(**row) for row in entry["env"]), extra_args=(entry.get("extra_args") or {}).get("env"),
        reserved=frozenset(entry.get("reserved", ())),
        releases=tuple((re.compile(r["tags"]), str(r["vllm"]), r["at"]) for r in entry.get("releases", ())),
    ) for entry in data["images"])  # fmt: skip


def _family(image: str | None) -> tuple[EnvEntrypoint | None, str]:
    """The row whose repository the image is (any registry host before it) and whose tags hold the image's tag (else
    the repository's first row, to name a tag no row reads), and the image's tag."""
    if not image:
        return None, ""
    tag = split_image(image.strip())[1] or "latest"
    path = repository_path(image).lower()
    rows = [e for e in entrypoints() if path == e.repository or path.endswith("/" + e.repository)]
    return next((e for e in rows if e.tags.match(tag)), rows[0] if rows else None), tag


def entrypoint_for(image: str | None) -> EnvEntrypoint | None:
    """The env-built entrypoint the image runs, when a row describes its repository and tag."""
    row, tag = _family(image)
    return row if row is not None and row.tags.match(tag) else None


def entrypoint_release(image: str | None) -> tuple[str, str] | None:
    """(vLLM release, why) for an image whose tag installs a known vLLM release (runpod/worker-v1-vllm:v2.23.0 ->
    0.23.0, its Dockerfile's pin)."""
    row, tag = _family(image)
    if row is None or not row.tags.match(tag):
        return None
    for tags, release, at in row.releases:
        if tags.match(tag):
            return release, f"vLLM {release} read from what {row.name} tag {tag} installs ({at})"
    return None


def unread_release(image: str | None) -> str | None:
    """For an image of a known repository whose tag ran another entrypoint: why it is not read."""
    row, tag = _family(image)
    if row is None or row.tags.match(tag):
        return None
    return f"{row.name}: tag {tag} ran an entrypoint other than the one kvdoctor read ({row.source})"


def names_vllm(image: str | None) -> bool:
    """An image whose own name or tag (not its registry or organisation: ghcr.io/vllm-project/semantic-router) says
    it runs vLLM (a command kvdoctor cannot see, where no row reads its entrypoint): acme/llm-serving-vllm,
    acme/learn-english:vllm-1.0.0."""
    if not image:
        return False
    last = image.split("@", 1)[0].rsplit("/", 1)[-1]
    tag = last.partition(":")[2]
    return "vllm" in repository_path(image).rsplit("/", 1)[-1].lower() or "vllm" in tag.lower()


def env_argv(entry: EnvEntrypoint, env: list[EnvVar], gpu_count: int | None,
             line: int | None) -> tuple[list[Token], list[str]]:  # fmt: skip
    """The argv after the launcher that the entrypoint builds from the container's env, and notes on what was left
    out; a value from a Secret or the host is the variable `${NAME}`, unknown here."""
    values = {e.name: e for e in env}
    flags: dict[str, list[Token]] = {}
    notes: list[str] = []
    for word_at, word in enumerate(entry.words):
        if word == GPU_COUNT:
            text = str(gpu_count) if gpu_count is not None else "$(nvidia-smi -L | wc -l)"
            flags[entry.words[word_at - 1]] = [Token(entry.words[word_at - 1], line), Token(text, line)]
        elif word.startswith("-") and (word_at + 1 == len(entry.words) or entry.words[word_at + 1].startswith("-")):
            flags[word] = [Token(word, line)]
        elif word.startswith("-"):
            flags[word] = [Token(word, line), Token(entry.words[word_at + 1], line)]
    for row in entry.rows:
        if row.env in entry.reserved:
            continue
        found = values.get(row.env)
        if found is None and row.default_env is not None and values.get(row.default_env) is not None:
            found = EnvVar(row.env, values[row.default_env].value, values[row.default_env].line)
        if found is None and row.default is not None:
            found = EnvVar(row.env, row.default, line)
        if found is None or (row.only_with and row.only_with not in values):
            continue
        value = found.value
        if value is not None and value.strip() == "":
            continue
        if row.kind == "removed":
            notes.append(f"{row.env}: {entry.name} drops {row.flag} ({row.at}), so it is not passed to vLLM")
        elif row.kind in ("paired", "switch"):
            truth = None if value is None else value.strip().lower()
            if truth in TRUE_VALUES:
                flags[row.flag] = [Token(row.flag, found.line)]
            elif truth in FALSE_VALUES:
                flags.pop(row.flag, None)
                if row.kind == "paired":
                    flags[row.flag] = [Token("--no-" + row.flag.lstrip("-"), found.line)]
            else:
                notes.append(f"{row.env}: its value is {'unknown here' if value is None else repr(value)}, so whether "
                             f"{entry.name} passes {row.flag} is not known: not judged")  # fmt: skip
        elif row.zero_unset and value == "0":
            flags.pop(row.flag, None)
        else:
            text = value if value is not None else "${" + row.env + "}"
            flags[row.flag] = [Token(row.flag, found.line), Token(text, found.line)]
    argv = [token for tokens in flags.values() for token in tokens]
    extra = values.get(entry.extra_args) if entry.extra_args else None
    if extra is not None and extra.value is None:
        argv.append(Token("${" + extra.name + "}", extra.line))
    elif extra is not None:
        try:
            argv += [Token(word, extra.line) for word in shlex.split(extra.value)]
        except ValueError:
            notes.append(f"{extra.name}: not words a shell would split ({extra.value!r}): left out")
    return argv, notes


def entrypoint_note(entry: EnvEntrypoint) -> str:
    return (f"image's entrypoint builds `{entry.launcher}` from the container's env ({entry.name}, {entry.source}): "
            "read as that command, each flag at its env line")  # fmt: skip


def unseen_note(where: str, what: str, image: str | None) -> str:
    """The note for a workload whose vLLM command is built where kvdoctor cannot see it (an image's entrypoint no
    row describes, a Dockerfile elsewhere), so that its silence is never taken for a pass."""
    why = unread_release(image) or ("its entrypoint or Dockerfile builds the command, and "
                                    "kvdoctor/data/image_entrypoints.yaml describes no entrypoint of it")  # fmt: skip
    return (f"{where}: {what} runs an image whose command kvdoctor cannot see ({image or 'no image named'}: {why}): "
            "not checked; give the command (command/args), or scan the Dockerfile that builds it")
