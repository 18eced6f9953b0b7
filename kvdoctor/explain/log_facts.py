"""Facts vLLM prints during start-up (version, GPU, model, non-default args, dtypes, attention backend),
under the fact names rules.yaml uses, so the same rules and fixes apply to a log."""

from __future__ import annotations

import ast
import json
import re
import shlex
from typing import Any, Iterable

from kvdoctor.data.backend_names import USING_LINE_SPELLINGS, backend_enum_name
from kvdoctor.data.dtypes import FLAG_DTYPES
from kvdoctor.explain.log_lines import LogLine
from kvdoctor.explain.log_memory import HINT as MEMORY_HINT, memory_facts

_VERSION_PATTERNS = (
    re.compile(r"vLLM API server version v?(\d+\.\d+\.\d+[\w.+-]*)"),
    re.compile(r"Initializing an? (?:V\d )?LLM engine \(v(\d+\.\d+\.\d+[\w.+-]*)\)"),
    re.compile(r"[█▄▀].*\bversion (\d+\.\d+\.\d+[\w.+-]*)\s*$"),  # the start-up banner
    re.compile(r"^vLLM Version\s*: (\d+\.\d+\.\d+[\w.+-]*)"),  # collect_env
    re.compile(r"^\[pip3?\] vllm==(\d+\.\d+\.\d+[\w.+-]*)"),
    # a framework's version gate (TRL: 'supports vLLM version `0.10.2`. You have version 0.12.0 installed.')
    re.compile(r"\bvLLM version\b.{0,40}?\bYou have version v?(\d+\.\d+\.\d+[\w.+-]*) installed"),
)
# a reporter's shell asking for vLLM's version, the answer on the next line: `python -c "import vllm;
# print(vllm.__version__)"`, `vllm --version`, `pip show vllm` ('Name: vllm' then 'Version: 0.3.3')
_ASKS_VERSION = re.compile(r"\bvllm\.__version__|\bvllm (?:--version|-v)\s*$|^Name: vllm\s*$")
_ANSWERED_VERSION = re.compile(r"^(?:Version: )?v?(\d+\.\d+\.\d+[\w.+-]*)\s*$")
# pip freeze's and pip list's own lines ('vllm==0.3.3', 'vllm        0.3.3'), and a reporter's line naming the
# version alone ('vllm 0.3.1', 'vLLM version: 0.8.5', 'vLLM v0.6.3')
_PIP_LINE = re.compile(r"^vllm(?:==|\s*:\s*v?|\s+(?:version\s*:?\s*)?v?|\s*version\s*:\s*v?)(\d+\.\d+\.\d+[\w.+-]*)\s*$", re.I)
_PIP = re.compile(r"^\[(?:pip3?|conda)\]\s+(triton|torch|flashinfer-python)[= ]+=?\s*(\d+\.\d+[\w.+-]*)")
_ARGS = re.compile(r"non-default args: (\{.*)$")  # a record the log cut keeps its readable items
_CONFIG_LINE = "with config:"
_CONFIG_FIELDS = {
    "model": re.compile(r"\bmodel='([^']+)'"),
    "dtype": re.compile(r"\bdtype=torch\.(\w+)"),
    "kv_cache_dtype": re.compile(r"\bkv_cache_dtype=(\w+)"),
    "quantization": re.compile(r"\bquantization=([\w-]+)"),
    "tensor_parallel_size": re.compile(r"\btensor_parallel_size=(\d+)"),
    "pipeline_parallel_size": re.compile(r"\bpipeline_parallel_size=(\d+)"),
}
_GPU_WITH_CAPABILITY = (
    re.compile(r"Your (.+?) GPU has compute capability (\d+)\.(\d+)"),
    re.compile(r"^(?:NVIDIA )?(.+?) with CUDA capability sm_(\d+?)(\d)a? is not compatible"),
)
_CAPABILITY_ONLY = (
    re.compile(r"Current capability: (\d+?)(\d)\b"),
    re.compile(r"--gpu-name=sm_(\d+?)(\d)[af]?\b"),
    re.compile(r"Value 'sm_(\d+?)(\d)[af]?' is not defined for option 'gpu-name'"),
)
_GPU_NAME_ONLY = (
    re.compile(r"GPU models and configuration\s*: GPU 0: (.+)$"),
    re.compile(r"^\|?\s+\d+\s+(NVIDIA [\w -]+?)\s{2,}"),  # nvidia-smi table
    re.compile(r"Device 0: (NVIDIA .+?)(?:,|$)"),
)
_BACKEND_CHOSEN = (
    re.compile(r"Using (?:AttentionBackendEnum\.|_Backend\.)?([A-Z][A-Z0-9_]+) (?:attention )?backend"),
    re.compile(r"Using (" + "|".join(map(re.escape, USING_LINE_SPELLINGS)) + r") backend"),  # backend_names.yaml
)
_ENV_BACKEND = re.compile(r"VLLM_ATTENTION_BACKEND[=:\s]+'?([A-Z_]+)")
# The toolchain the log shows (collect_env, nvidia-smi): what a PTX / kernel-image / driver cause names.
_TOOLCHAIN = (  # (a literal the line must hold, the pattern, the fact)
    ("Nvidia driver version", re.compile(r"^Nvidia driver version\s*: (\S+)"), "logged.driver_version"),
    ("Driver Version", re.compile(r"Driver Version: (\d[\d.]+)"), "logged.driver_version"),
    ("CUDA Version", re.compile(r"CUDA Version: (\d+\.\d+)"), "logged.driver_cuda"),
    ("CUDA used to build", re.compile(r"^CUDA used to build PyTorch\s*: (\S+)"), "logged.torch_cuda"),
    ("CUDA runtime version", re.compile(r"^CUDA runtime version\s*: (\S+)"), "logged.cuda_runtime"),
    ("supports CUDA capabilities",
     re.compile(r"The current PyTorch install supports CUDA capabilities ((?:sm_\w+ ?)+)"), "logged.torch_archs"),
    ("CUDA_VISIBLE_DEVICES", re.compile(r"\bCUDA_VISIBLE_DEVICES['\"]?\s*[=:]\s*['\"]?(\d+(?:\s*,\s*\d+)*|GPU-[\w-]+(?:,GPU-[\w-]+)*|(?=['\"]?(?:\s|$)))"),
     "logged.cuda_visible_devices"),
    # Triton's own probe at import (vllm/triton_utils/importing.py): how many GPU drivers this process can reach
    ("active driver", re.compile(r"\b(\d+) active driver\(s\) found"), "logged.active_drivers"),
    # CANN's operator compile and load lines tag the NPU's SoC ('[WARNING] [ascend310p] te_rmsnorm_... not found')
    ("[ascend", re.compile(r"\[(ascend\d+\w*)\]"), "logged.npu_soc"),
)
# Lines worth the fact regexes; everything else (throughput stats, request logs) is skipped in one search.
_KEYWORDS = re.compile(
    r"version|Version|args|with config:|LLM engine \(v|capability|capabilities|GPU models|GPU 0|gpu-name|backend|BACKEND|\[pip|\[conda|"
    r"NVIDIA|\|\s+\d+\s+NVIDIA|CUDA|active driver|\[ascend"
)


def read_facts(lines: Iterable[LogLine]) -> tuple[dict[str, Any], list[str]]:
    """Flat facts read from the log, and one evidence line per fact ('vllm.version = 0.25.1 (line 3)')."""
    facts: dict[str, Any] = {}
    evidence: dict[str, str] = {}
    args_seen = False

    def put(name: str, value: Any, line: LogLine, overwrite: bool = False) -> None:
        if value is None or (name in facts and not overwrite):
            return
        facts[name] = value
        evidence[name] = f"{name} = {value!r} (log line {line.number})"

    asked = False  # the line before asked for vLLM's version
    for line in lines:
        text = line.text
        if asked and text.strip():
            answer = _ANSWERED_VERSION.match(text.strip())
            if answer:
                put("vllm.version", answer.group(1), line)
        if text.strip():  # a blank line between the question and its answer keeps it asked
            asked = ("ersion" in text or "Name: vllm" in text) and _ASKS_VERSION.search(text.strip()) is not None
        if text[:4] in ("vllm", "vLLM", "VLLM") and (pip := _PIP_LINE.match(text)):
            put("vllm.version", pip.group(1), line)
        if MEMORY_HINT.search(text):
            for name, value in memory_facts(text):
                put(name, value, line, overwrite=True)  # the last engine start's numbers
        if len(text) < 8 or not _KEYWORDS.search(text):
            continue
        for literal, pattern, name in _TOOLCHAIN:
            if literal not in text:
                continue
            match = pattern.search(text)
            if match:
                put(name, match.group(1).strip(), line)
        for pattern in _VERSION_PATTERNS:
            match = pattern.search(text)
            if match:
                put("vllm.version", match.group(1), line)
                break
        match = _PIP.match(text)
        if match:
            name = {"flashinfer-python": "flashinfer"}.get(match.group(1), match.group(1))
            put(f"{name}.version", match.group(2), line)
        match = _ARGS.search(text)
        if match:
            args_seen = True
            for name, value in _serve_args_from_dict(match.group(1)).items():
                put(name, value, line, overwrite=True)
        elif "args: Namespace(" in text:
            args_seen = True
            for name, value in _serve_args_from_namespace(text).items():
                put(name, value, line, overwrite=True)
        if _CONFIG_LINE in text:
            for name, value in _engine_config(text).items():
                put(name, value, line)
        _gpu_facts(text, line, put)
        for pattern in _BACKEND_CHOSEN:
            match = pattern.search(text)
            if match:
                put("log.attention_backend", backend_enum_name(match.group(1)), line)
                break
        match = _ENV_BACKEND.search(text)
        if match:
            put("serve.attention_backend", match.group(1), line, overwrite=True)
    if args_seen:
        facts.setdefault("serve.attention_backend", "auto")
        facts.setdefault("serve.kv_cache_dtype", facts.get("log.kv_cache_dtype", "auto"))
        facts.setdefault("serve.dtype", "auto")
    elif "log.kv_cache_dtype" in facts:
        facts.setdefault("serve.kv_cache_dtype", facts["log.kv_cache_dtype"])
    _resolve_gpu(facts, evidence)
    return facts, list(evidence.values())


def _serve_args_from_dict(text: str) -> dict[str, Any]:
    try:
        args = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        args = _top_level_args(text)  # a repr that is no literal, or a record the log cut: read item by item
    if not isinstance(args, dict):
        return {}
    facts = _serve_facts(args)
    command = _command_of(args)
    if command:
        facts["logged.command"] = command
    return facts


MAX_JSON_ARG = 160
_REPR = re.compile(r"<[^<>]*>")  # an enum's or an object's repr ('<CompilationMode.VLLM_COMPILE: 3>'): no literal


def _top_level_args(text: str) -> dict[str, Any]:
    """The record's top-level keys with the values Python can read back (one whose repr is no literal, or that the
    log cut off, left out): a dict read item by item, so one unreadable value or a cut line loses only itself."""
    body = text.strip()[1:]
    items, depth, quote, start = [], 0, "", 0
    for i, char in enumerate(body):
        if quote:
            quote = "" if char == quote and body[i - 1] != "\\" else quote
        elif char in "'\"":
            quote = char
        elif char in "[{(":
            depth += 1
        elif char in "]})":
            depth -= 1
            if depth < 0:
                break  # the dict's own closing brace
        elif char == "," and depth == 0:
            items.append(body[start:i])
            start = i + 1
    else:
        i = len(body)
    items.append(body[start:i])
    args: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition(":")
        if not sep or _REPR.search(value):
            continue
        try:
            args[ast.literal_eval(key.strip())] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            continue
    return args


# non-default args that say nothing of what vLLM was asked to do (where it listens, what it is called)
_NOT_RUN_ARGS = frozenset({"model_tag", "model", "host", "port", "served_model_name", "api_key", "ssl_keyfile",
                           "ssl_certfile", "uvicorn_log_level", "root_path", "allowed_origins"})


def _command_of(args: dict[str, Any]) -> str | None:
    """The `vllm serve` command vLLM's 'non-default args' record stands for (each arg as its flag; a value that is not
    a literal, e.g. a config object's repr, left out), for `kvdoctor check -- COMMAND`; None without a model."""
    model = args.get("model_tag") or args.get("model")
    if not isinstance(model, str) or not model:
        return None
    words = ["vllm", "serve", model]
    for name, value in args.items():
        if name in _NOT_RUN_ARGS or value is None or value is False:
            continue  # False: a switch turned off (its --no- form is not every release's)
        flag = "--" + name.replace("_", "-")
        if value is True:
            words.append(flag)
        elif isinstance(value, (str, int, float)):
            words += [flag, str(value)]
        elif isinstance(value, (list, tuple)) and all(isinstance(v, (str, int, float)) for v in value):
            words += [flag, *map(str, value)] if value else []
        elif isinstance(value, dict) and len(written := json.dumps(value, separators=(",", ":"))) <= MAX_JSON_ARG:
            words += [flag, written]  # a long config dump (a whole compilation_config) is left out
    return shlex.join(words)


def _serve_args_from_namespace(text: str) -> dict[str, Any]:
    args = {k: v.strip("'\"") for k, v in re.findall(r"\b(\w+)=('[^']*'|\"[^\"]*\"|[\w.+-]+)", text)}
    args = {k: (None if v == "None" else v) for k, v in args.items()}
    return _serve_facts(args)


def _serve_facts(args: dict[str, Any]) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    model = args.get("model") or args.get("model_tag")
    if isinstance(model, str):
        facts["model.model_id"] = model
    if args.get("kv_cache_dtype"):
        facts["serve.kv_cache_dtype"] = str(args["kv_cache_dtype"])
    if args.get("dtype"):
        facts["serve.dtype"] = FLAG_DTYPES.get(str(args["dtype"]), str(args["dtype"]))
    if args.get("attention_backend"):
        facts["serve.attention_backend"] = str(args["attention_backend"])
    if args.get("quantization"):
        facts["serve.quantization"] = str(args["quantization"])
    for name in ("tensor_parallel_size", "pipeline_parallel_size", "max_model_len"):
        value = args.get(name)
        if value is not None and str(value).isdigit():
            facts[f"serve.{name}"] = int(value)
    try:
        if args.get("gpu_memory_utilization") is not None:
            facts["serve.gpu_memory_utilization"] = float(args["gpu_memory_utilization"])
    except (TypeError, ValueError):
        pass
    if args.get("enforce_eager") in (True, "True"):
        facts["serve.enforce_eager"] = True
    return facts


def _engine_config(text: str) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for name, pattern in _CONFIG_FIELDS.items():
        match = pattern.search(text)
        if not match:
            continue
        value = match.group(1)
        if name == "model":
            facts["model.model_id"] = value
        elif name == "dtype":
            facts["model.dtype"] = FLAG_DTYPES.get(value, value)
        elif name == "kv_cache_dtype":
            facts["log.kv_cache_dtype"] = value
        elif name == "quantization" and value != "None":
            facts["model.quant_method"] = value
        elif name in ("tensor_parallel_size", "pipeline_parallel_size"):
            facts[f"serve.{name}"] = int(value)
    return facts


def _gpu_facts(text: str, line: LogLine, put) -> None:
    for pattern in _GPU_WITH_CAPABILITY:
        match = pattern.search(text)
        if match:
            put("gpu.name", match.group(1).strip(), line)
            put("gpu.capability", int(match.group(2)) + int(match.group(3)) / 10, line)
            return
    for pattern in _CAPABILITY_ONLY:
        match = pattern.search(text)
        if match:
            put("gpu.capability", int(match.group(1)) + int(match.group(2)) / 10, line)
            return
    for pattern in _GPU_NAME_ONLY:
        match = pattern.search(text)
        if match:
            put("gpu.name", match.group(1).strip(), line)
            return


def _resolve_gpu(facts: dict[str, Any], evidence: dict[str, str]) -> None:
    """Fill gpu.capability from the GPU table when vLLM printed only the name."""
    name = facts.get("gpu.name")
    if not name or facts.get("gpu.capability") is not None:
        return
    from kvdoctor.data.gpus import gpu_table, normalise

    table = gpu_table()
    key = normalise(name)
    device = table.get(key)
    if device is None:  # 'A100-SXM4-80GB' vs table keys: try the longest known key contained in the name
        candidates = [k for k in table if k and k in key]
        device = table[max(candidates, key=len)] if candidates else None
    if device is not None and device.capability is not None:
        facts["gpu.capability"] = device.capability[0] + device.capability[1] / 10
        evidence["gpu.capability"] = f"gpu.capability = {facts['gpu.capability']} (GPU table: {device.name})"
