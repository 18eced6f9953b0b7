"""YAML through a safe loader only, libyaml's C parser when present (10x faster than pure Python).

kvdoctor's own data files (rules.yaml, gpus.yaml, ...) are read on every run; `load_yaml_cached` keeps their
parsed form as JSON in kvdoctor's cache, keyed by the text's length and checksums, so a run whose files did not change
neither imports PyYAML nor parses them (~40 ms on a 2-core machine).
"""

from __future__ import annotations

import re

import json
import os
from typing import Any

MAX_FLOW_DEPTH = 1000  # libyaml's C composer overflows the stack (SIGSEGV) near 50,000 nested [ or {


class YAMLError(ValueError):
    """Text that is not valid YAML; `line` is 1-based where the parser says where, else None; `kind` is PyYAML's
    name for the problem (ScannerError, ConstructorError for a !!python tag, ...)."""

    def __init__(self, message: str, line: int | None = None, kind: str = "YAMLError"):
        super().__init__(message)
        self.line = line
        self.kind = kind


def safe_loader():
    """libyaml's CSafeLoader when built in, else PyYAML's SafeLoader (imports PyYAML)."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """Parse YAML with a safe loader; YAMLError (kvdoctor's, with the line) when it is not valid."""
    import yaml

    if too_deeply_nested(text):
        raise YAMLError(f"nested more than {MAX_FLOW_DEPTH} levels deep")
    try:
        return yaml.load(text, Loader=safe_loader())  # noqa: S506 - SafeLoader / CSafeLoader only
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise YAMLError(str(exc), mark.line + 1 if mark else None, type(exc).__name__) from None


def load_yaml_cached(text: str, name: str) -> Any:
    """load_yaml for one of kvdoctor's own files (`name`: 'rules.yaml', 'gpus.yaml', ...), its parsed form kept
    in kvdoctor's cache (`parsed-yaml/<name>-<checksums>.json`, one per file: an edited file replaces its
    entry). Only data that JSON gives back unchanged is kept; an unwritable cache just parses."""
    from kvdoctor.base.cache_dir import default_cache_dir

    root = default_cache_dir()
    if root is None:
        return load_yaml(text)
    import zlib  # already loaded (gzip); hashlib would cost ~3 ms of imports

    data = text.encode()
    folder = root / "parsed-yaml"
    path = folder / f"{name}-{len(data)}-{zlib.crc32(data):08x}{zlib.adler32(data):08x}.json"
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        pass
    parsed = load_yaml(text)
    blob = json.dumps(parsed, separators=(",", ":"), ensure_ascii=False, default=str)
    if json.loads(blob) == parsed:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for stale in folder.glob(f"{name}-*.json"):
                stale.unlink(missing_ok=True)
            partial = path.with_suffix(f".{os.getpid()}.tmp")
            partial.write_text(blob, encoding="utf-8")
            os.replace(partial, path)
        except OSError:
            pass
    return parsed


_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")


def too_deeply_nested(text: str) -> bool:
    """True when YAML flow collections ([...] / {...}) nest deeper than MAX_FLOW_DEPTH (a cheap count first)."""
    return text.count("[") + text.count("{") > MAX_FLOW_DEPTH and _flow_depth(text) > MAX_FLOW_DEPTH


def _flow_depth(text: str) -> int:
    depth = deepest = 0
    for char in _NOT_BRACKETS.sub("", text):  # the brackets alone: a 1.5 MB CRD is a few thousand of them
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}" and depth:
            depth -= 1
    return deepest


MAX_EXPANDED_NODES = 2_000_000  # the largest real manifest seen has ~200,000 nodes; billion-laughs aliases far more
ALIAS = re.compile(r"(?:^|[\s\[{,:-])\*[^\s\[\]{},]")


def expands_too_far(roots: list) -> bool:
    """True when YAML aliases (*name) make the composed node trees, read out in full, larger than
    MAX_EXPANDED_NODES: a 'billion laughs' document is a few lines whose expansion never ends."""
    sizes: dict[int, int] = {}

    def size(node) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        sizes[id(node)] = 1  # a recursive alias counts once
        value = node.value
        total = 1
        if isinstance(value, list):
            for item in value:
                total += sum(size(part) for part in item) if isinstance(item, tuple) else size(item)
                if total > MAX_EXPANDED_NODES:
                    break
        sizes[id(node)] = total
        return total

    total = 0
    for root in roots:
        total += size(root) if root is not None else 0
        if total > MAX_EXPANDED_NODES:
            return True
    return False


def has_aliases(text: str) -> bool:
    """A cheap first look: only a text with an alias can expand beyond its own size."""
    return "*" in text and ALIAS.search(text) is not None
