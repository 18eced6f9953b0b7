"""YAML through a safe loader only, libyaml's C parser when present (10x faster than pure Python)."""

from __future__ import annotations

from typing import Any

import yaml

SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
YAMLError = yaml.YAMLError


MAX_FLOW_DEPTH = 1000  # libyaml's C composer overflows the stack (SIGSEGV) near 50,000 nested [ or {


def load_yaml(text: str) -> Any:
    if text.count("[") + text.count("{") > MAX_FLOW_DEPTH and _flow_depth(text) > MAX_FLOW_DEPTH:
        raise yaml.YAMLError(f"nested more than {MAX_FLOW_DEPTH} levels deep")
    return yaml.load(text, Loader=SafeLoader)  # noqa: S506 - SafeLoader / CSafeLoader only


def _flow_depth(text: str) -> int:
    depth = deepest = 0
    for char in text:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}" and depth:
            depth -= 1
    return deepest
