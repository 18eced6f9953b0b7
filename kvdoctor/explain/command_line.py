"""The vLLM command line a log shows (`vllm serve MODEL --flag value`, `python -m vllm.entrypoints.openai.api_server
...`, continued over lines ending in a backslash) or its Python call (`LLM(model=..., tensor_parallel_size=2)`) as
serve facts: what the run asked for even when vLLM's own 'non-default args' line is not in the log. vLLM's own lines
win over it (explain.py adds these only where read_facts found none)."""

from __future__ import annotations

import re
import shlex
from typing import Any, Iterable

from kvdoctor.data.dtypes import FLAG_DTYPES
from kvdoctor.explain.log_lines import LogLine

# vLLM's launchers, and TRL's `trl vllm-serve` (its script starts vLLM with the same parallel flags, underscored)
_COMMAND = re.compile(r"(?:^|[\s$#>])(?:vllm serve|trl vllm-serve|-m vllm\.entrypoints\.(?:openai\.)?api_server"
                      r"|-m trl\.scripts\.vllm_serve)(?=\s|$)(.*)$")
MAX_CONTINUED = 40
# flag (and its short forms) -> the serve fact it sets, and the type of its value
_FLAGS: dict[str, tuple[str, type]] = {
    "--tensor-parallel-size": ("serve.tensor_parallel_size", int), "-tp": ("serve.tensor_parallel_size", int),
    "--pipeline-parallel-size": ("serve.pipeline_parallel_size", int), "-pp": ("serve.pipeline_parallel_size", int),
    "--max-model-len": ("serve.max_model_len", int),
    "--kv-cache-dtype": ("serve.kv_cache_dtype", str),
    "--quantization": ("serve.quantization", str), "-q": ("serve.quantization", str),
    "--dtype": ("serve.dtype", str),
    "--gpu-memory-utilization": ("serve.gpu_memory_utilization", float),
    "--attention-backend": ("serve.attention_backend", str),
    "--model": ("model.model_id", str),
    "--data-parallel-size": ("logged.data_parallel_size", int), "-dp": ("logged.data_parallel_size", int),
}
# what vLLM uses when the command does not say (only the parallel sizes: a judgement needs them stated or known)
DEFAULTS = {"serve.tensor_parallel_size": 1, "serve.pipeline_parallel_size": 1}


def command_facts(lines: Iterable[LogLine]) -> dict[str, Any]:
    """The serve facts of the first vLLM command line, or Python call (`LLM(...)`, `EngineArgs(...)`), in the log
    (empty when it shows none)."""
    lines = list(lines)
    assigned: dict[str, str] = {}  # `export MODEL=mistralai/Mistral-7B-v0.1` pasted above the command
    for index, line in enumerate(lines):
        if "=" in line.text and (found := _ASSIGNMENT.match(line.text)) is not None:
            assigned[found.group(1)] = found.group(2).strip("'\"")
        if "vllm" in line.text and not line.text.lstrip().startswith("usage:"):  # argparse's usage line is no run
            match = _COMMAND.search(line.text)
            if match:
                words = _expanded(_words(match.group(1), lines[index + 1 : index + 1 + MAX_CONTINUED],
                                         line.text.rstrip().endswith("\\")), assigned)
                launcher = match.group(0).strip().split(" ", 1)[0] if "vllm serve" not in match.group(0) else ""
                facts = _facts(words, match.group(0).lstrip().startswith("vllm serve"))
                if "trl" not in match.group(0):  # `kvdoctor check -- COMMAND` reads vLLM's own launchers
                    head = ["vllm", "serve"] if not launcher else ["python", "-m", "vllm.entrypoints.openai.api_server"]
                    facts["logged.command"] = shlex.join(head + words)
                return facts
        if "LLM(" in line.text or "Args(" in line.text:
            match = _PYTHON_CALL.search(line.text)
            if match:
                return _call_facts(match.group(1), lines[index + 1 : index + 1 + MAX_CONTINUED])
    return {}


# vLLM's Python entry points as a script or notebook shows them: LLM(model=..., tensor_parallel_size=2, ...)
_PYTHON_CALL = re.compile(r"(?:^|[\s=(.])(?:LLM|(?:Async)?EngineArgs)\((.*)$")
_KEYWORD = re.compile(r"\b(\w+)\s*=\s*(\"[^\"]*\"|'[^']*'|[\w.+-]+)")
# keyword -> the flag it is on the command line
_KEYWORDS = {"model": "--model", "tensor_parallel_size": "--tensor-parallel-size",
             "pipeline_parallel_size": "--pipeline-parallel-size", "max_model_len": "--max-model-len",
             "kv_cache_dtype": "--kv-cache-dtype", "quantization": "--quantization", "dtype": "--dtype",
             "gpu_memory_utilization": "--gpu-memory-utilization", "attention_backend": "--attention-backend"}


def _call_facts(rest: str, following: list[LogLine]) -> dict[str, Any]:
    """The facts of a Python call's keywords, over the lines until its parentheses close; the parallel sizes default
    to 1 only when the whole call is in the log."""
    parts, depth = [rest], 1 + rest.count("(") - rest.count(")")
    for line in following:
        if depth <= 0:
            break
        parts.append(line.text.strip())
        depth += line.text.count("(") - line.text.count(")")
    words, unknown = [], set()
    for name, value in _KEYWORD.findall(" ".join(parts)):
        if name not in _KEYWORDS:
            continue
        if value[:1] in "'\"" or value[:1].isdigit():
            words += [_KEYWORDS[name], value.strip("'\"")]
        else:
            unknown.add(f"serve.{name}")  # a variable ('args.tp'), not a value
    facts = _facts(words, False)
    for name in DEFAULTS:
        # a call the log cuts short, or a variable in place of the value: unknown, not vLLM's default
        if name in unknown or (depth > 0 and f"--{name.split('.')[1].replace('_', '-')}" not in words):
            facts.pop(name, None)
    return facts


_ASSIGNMENT = re.compile(r"^\s*(?:\$\s+)?(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(\S+)\s*$")
_VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


_SHELL_OPERATOR = re.compile(r"^(?:\|\|?|&&?|;|[0-9]*>>?.*|&>.*|<.*)$")
"""A word that ends the command (`| tee log`, `&`, `> out 2>&1`, `; sleep 1`)."""


def _expanded(words: list[str], assigned: dict[str, str]) -> list[str]:
    """The command's own words, up to a shell operator, with $NAME / ${NAME} the log's own shell lines assigned
    above the command put in."""
    end = next((i for i, word in enumerate(words) if _SHELL_OPERATOR.match(word)), len(words))
    return [_VARIABLE.sub(lambda m: assigned.get(m.group(1), m.group(0)), word) for word in words[:end]]


def _words(rest: str, following: list[LogLine], continues: bool) -> list[str]:
    parts = [rest.rstrip().rstrip("\\")]
    for line in following:
        if not continues:
            break
        text = line.text.strip()
        continues = text.endswith("\\")
        parts.append(text.rstrip("\\"))
    text = " ".join(parts)
    try:
        return shlex.split(text)
    except ValueError:  # an unbalanced quote in a pasted command
        return text.split()


def _facts(words: list[str], serve: bool) -> dict[str, Any]:
    facts: dict[str, Any] = dict(DEFAULTS)
    if serve and words and not words[0].startswith(("-", "[", "<", "$")):
        facts["model.model_id"] = words[0]  # vllm serve's positional model
    for i, word in enumerate(words):
        flag, _, inline = word.partition("=")
        flag = flag.replace("_", "-") if flag.startswith("--") else flag  # vLLM's and TRL's parsers read _ as -
        if flag not in _FLAGS:
            continue
        value = inline or (words[i + 1] if i + 1 < len(words) else "")
        name, kind = _FLAGS[flag]
        try:
            facts[name] = kind(value)
        except ValueError:  # a shell variable ('$TP'): unknown, not vLLM's default
            facts.pop(name, None)
            continue
        if name == "serve.dtype":
            facts[name] = FLAG_DTYPES.get(value, value)
    return facts
