"""What Compose really runs for a command or entrypoint given as a string: compose-go splits it into words with
go-shellwords (types/command.go, ShellCommand), which has quotes and backslashes but no shell operators: it stops at
the first unquoted `;`, `&`, `|`, `<` or `>` and drops the rest. Under a shell's -c only the next word is the script,
the other words are its $0, $1, ... So `entrypoint: ["/bin/sh", "-c"]` with `command: pip install x && vllm serve M`
runs `pip` alone, and vLLM never starts (docker/docs#13265, "quietly chopped"). The author's reading (the string as
one script) is what kvdoctor judges; the cut is said as an error. A list item that is no string is refused by
Compose's schema before anything runs."""

from __future__ import annotations

from pathlib import PurePosixPath

import yaml

from kvdoctor.scan import nodes
from kvdoctor.scan.command import LAUNCHER, SHELL_COMMAND_OPTION, SHELLS, Word
from kvdoctor.scan.workload import Token

_OPERATORS = ";&|<>"
_ESCAPES = {"t": "\t", "n": "\n"}


def go_shellwords(text: str) -> tuple[list[str], str]:
    """(the words go-shellwords' Parse returns, the text it dropped from the first unquoted operator on)."""
    words: list[str] = []
    buf, got = "", False
    escaped = single = double = False
    for index, char in enumerate(text):
        if escaped:
            escaped, buf, got = False, buf + _ESCAPES.get(char, char), True
        elif char == "\\" and not single:
            escaped = True
        elif char in " \t\r\n" and not (single or double):
            if got:
                words.append(buf)
            buf, got = "", False
        elif char == '"' and not single:
            double, got = not double, True
        elif char == "'" and not double:
            single, got = not single, True
        elif char in _OPERATORS and not (single or double):
            if char == ">" and buf.isdigit():  # `2>&1`: the descriptor is the redirection's, not a word
                got = False
            if got:
                words.append(buf)
            return words, text[index:]
        else:
            buf, got = buf + char, True
    if got:
        words.append(buf)
    return words, ""


def _string_words(node: yaml.Node | None) -> tuple[list[str], str] | None:
    text = nodes.text(node) if nodes.is_scalar(node) else None
    return go_shellwords(text) if text is not None else None


def _list_words(node: yaml.Node | None) -> list[str]:
    return [t for item in nodes.items(node) if (t := nodes.text(item)) is not None] if nodes.is_seq(node) else []


def compose_cut(entrypoint: yaml.Node | None, command: yaml.Node | None) -> str | None:
    """How Compose's split of a string command keeps vLLM from running as written, in words, or None."""
    split = _string_words(command)
    if split is None:
        return None
    words, dropped = split
    before = _string_words(entrypoint)
    runs = (before[0] if before is not None else _list_words(entrypoint)) + words
    option = next((i for i, word in enumerate(runs[:3]) if SHELL_COMMAND_OPTION.match(word)), None)
    script = runs[option + 1] if option is not None and len(runs) > option + 2 else None
    # the launcher only past the script's one word: `sh -c vllm serve M`; not `sh -c 'exec vllm serve "$@"' _ --model
    # M`, whose script is whole and whose other words are its $0, $1, ... on purpose
    if (script is not None and PurePosixPath(runs[0]).name in SHELLS and not LAUNCHER.search(script)
            and LAUNCHER.search(" ".join(runs[option + 1:]) + " " + dropped)):
        extra = len(runs) - option - 2
        chopped = f" (the split also stopped at the unquoted `{dropped[:2].strip()}` and dropped the rest)" if dropped else ""
        return (f"Compose splits the string command into words, so `{' '.join(runs[:option + 1])}` gets `{script}` "
                f"as its whole script and the other {extra} word(s) as $0, $1, ...{chopped}: the container runs "
                f"`{script}` alone and never starts vLLM")
    if LAUNCHER.search(dropped):  # `vllm serve ... 2>&1 | tee vllm.log` loses only the tee
        return (f"Compose's split of the string command stops at the unquoted `{dropped[:2].strip()}` and drops the "
                f"rest, so the container runs `{' '.join(words)[:80]}` and never starts vLLM")
    return None


def meant_command(entrypoint: yaml.Node | None, command: yaml.Node) -> list[Word]:
    """The author's reading of a cut string command: the whole string as one shell script (after its own leading
    `sh -c` when the entrypoint is not the shell)."""
    text, line = nodes.text(command) or "", nodes.text_line(command)
    if _string_words(entrypoint) is None and not _list_words(entrypoint):
        words, _ = go_shellwords(text)
        option = next((i for i, word in enumerate(words[:3]) if SHELL_COMMAND_OPTION.match(word)), None)
        if words and PurePosixPath(words[0]).name in SHELLS and option is not None:
            script = text.split(words[option], 1)[1]
            return [(Token(word, line), command) for word in words[:option + 1]] + [(Token(script, line), command)]
    return [(Token(text, line), command)]


def non_string_item(service: yaml.Node) -> tuple[str, int | None] | None:
    """The first item of the service's entrypoint or command list that is no string, and its line: a null (`- #####`
    is a YAML comment, an item left empty) or a mapping (`- --port: 8000`). Compose's schema (compose-spec.json,
    definitions.command) allows only strings there, so `docker compose` refuses the whole file."""
    for key in ("entrypoint", "command"):
        listed = nodes.get(service, key)
        for index, item in enumerate(nodes.items(listed) if nodes.is_seq(listed) else ()):
            kind = "a mapping" if nodes.is_map(item) else "a list" if nodes.is_seq(item) else (
                "null" if nodes.text(item) is None else None)
            if kind is not None:
                return f"{key}[{index}] is {kind}", nodes.line(item)
    return None
