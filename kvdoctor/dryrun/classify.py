"""Reduce a Triton compile exception to its innermost cause and a stable kind."""

from __future__ import annotations

import os
import re
import traceback
from typing import Any

_MAX_MESSAGE = 2000


def exception_chain(exc: BaseException) -> list[BaseException]:
    """exc, then its __cause__ (or __context__), and so on, without looping."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        chain.append(current)
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return chain


def _qualname(exc: BaseException) -> str:
    cls = type(exc)
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__name__}"


def _trim(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + " ..."


def _triton_frame(chain: list[BaseException], triton_root: str) -> tuple[str, int, str] | None:
    """Deepest traceback frame inside the triton package, innermost exception first."""
    base = os.path.dirname(os.path.abspath(triton_root))
    for exc in reversed(chain):
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if _inside(f.filename, triton_root)]
        if frames:
            last = frames[-1]
            rel = os.path.relpath(os.path.abspath(last.filename), base).replace(os.sep, "/")
            return rel, last.lineno or 0, last.name
    return None


def _inside(filename: str, root: str) -> bool:
    return os.path.abspath(filename).startswith(os.path.abspath(root) + os.sep)


def kernel_location(chain: list[BaseException], kernel_path: str) -> tuple[int, str] | None:
    """File line and text of the statement the innermost CompilationError points at.

    A CompilationError carries the function's source (`src`, starting at `def`) and the AST node; its line
    is relative to that source, so find the `def` in the kernel file and offset from there.
    """
    errors = [e for e in chain if hasattr(e, "src") and hasattr(e, "node")]
    if not errors:
        return None
    err = errors[-1]
    node_line = getattr(err.node, "lineno", None)
    match = re.search(r"def\s+(\w+)\s*\(", str(err.src or ""))
    if node_line is None or match is None:
        return None
    try:
        with open(kernel_path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    pattern = re.compile(rf"^\s*def\s+{re.escape(match.group(1))}\s*\(")
    for index, text in enumerate(lines):
        if pattern.match(text):
            line = index + node_line
            if line <= len(lines):
                return line, lines[line - 1].strip()
    return None


def classify_kind(messages: list[str], innermost_type: str, triton_function: str | None) -> str:
    """Stable kind from the innermost type, the raising Triton function and the chain's messages."""
    text = "\n".join(messages)
    if innermost_type == "AssertionError" and (triton_function or "").startswith("convert_custom_float8"):
        return "bf16_to_fp8e4b15_assert"
    if re.search(r"fp8e4nv (data )?type is not supported on CUDA arch|type fp8e4nv not supported in this arch", text):
        return "fp8e4nv_unsupported_arch"
    if re.search(r"\bbf16\b|bfloat16", text) and re.search(r"not supported|unsupported|requires \.target sm_8", text):
        return "bf16_unsupported_arch"
    if "ptxas" in text.lower() or innermost_type.endswith("PTXASError"):
        if re.search(r"is not defined for option 'gpu-name'|Unknown target|Unsupported \.target|not a recognized", text):
            return "ptxas_unknown_target"
        return "ptxas_error"
    return "compile_error"


def describe_failure(exc: BaseException, kernel_path: str, kernel_rel: str, triton_root: str) -> dict[str, Any]:
    """CompileFailure fields (as a dict) for an exception raised by triton.compile."""
    chain = exception_chain(exc)
    inner = chain[-1]
    frame = _triton_frame(chain, triton_root)
    location = kernel_location(chain, kernel_path)
    messages = [str(e) for e in chain] + [str(getattr(e, "error_message", "") or "") for e in chain]
    inner_type = _qualname(inner)
    return {
        "kind": classify_kind(messages, inner_type, frame[2] if frame else None),
        "exc_type": _qualname(exc),
        "message": _trim(str(exc)),
        "innermost_type": inner_type,
        "innermost_message": _trim(str(inner)),
        "triton_file": frame[0] if frame else None,
        "triton_line": frame[1] if frame else None,
        "triton_function": frame[2] if frame else None,
        "kernel_file": kernel_rel if location else None,
        "kernel_line": location[0] if location else None,
        "kernel_source_line": location[1] if location else None,
    }
