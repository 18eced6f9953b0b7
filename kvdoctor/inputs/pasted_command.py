"""A command pasted after `--` as the shell would have run it: one quoted string split into words, an `env`
prefix dropped, and a command that runs some other program named as bad input (not read as a model id)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from kvdoctor.base.errors import UsageError

ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
CONTINUATION = re.compile(r"\\\r?\n")
EXAMPLE = "e.g. kvdoctor check --gpu A100 -- vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192"


def typed_command(words: list[str]) -> list[str]:
    """The pasted words as `vllm serve` would get them; raises UsageError for a paste no shell would run, or one
    that runs another program."""
    if len(words) == 1 and any(char.isspace() for char in words[0].strip()):
        words = _shell_words(words[0])
    if words[:1] == ["env"]:
        words = words[1:]
    assignments = 0
    while assignments < len(words) and ASSIGNMENT.match(words[assignments]):
        assignments += 1
    _refuse_another_program(words[assignments:])
    return words


def _shell_words(text: str) -> list[str]:
    try:
        return shlex.split(CONTINUATION.sub(" ", text))
    except ValueError as exc:  # 'No closing quotation', 'No escaped character'
        shown = text.strip() if len(text.strip()) <= 60 else text.strip()[:57] + "..."
        raise UsageError(f"the pasted command is not one a shell would run ({str(exc).lower()}): {shown!r}",
                         "close the quote or drop the trailing backslash") from None


def _refuse_another_program(words: list[str]) -> None:
    """`python train.py`, `docker run ...`, `vllm bench ...`: two bare words at the start, the first no model id."""
    if len(words) < 2 or words[0].startswith("-") or words[1].startswith("-"):
        return
    program = words[0]
    if program == "vllm" and words[1] == "serve" or program == "serve":
        return
    if "/" in program or Path(program).expanduser().exists():
        return  # a Hugging Face id or a local model path, then a stray word: the serve parser names it
    raise UsageError(f"the pasted command runs `{program} {words[1]}`, not `vllm serve`", EXAMPLE)
