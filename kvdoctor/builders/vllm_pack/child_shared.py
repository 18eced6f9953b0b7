"""What several child tasks share when they ask one vLLM release (public here, so no task reaches into another's
private names): forgetting vLLM's cached answers, a fresh VllmConfig around a call, the exact decision tree of a
set of grid cells, the line a module-level name is assigned on, and vLLM's environment variables. Standard library only at import time; vLLM
is imported inside, in the builder's own venv.
"""
from __future__ import annotations

import ast
import os


def set_env(name, value):
    """Set (or, with None, remove) an environment variable vLLM reads, and drop vllm.envs' cached values."""
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    try:
        import vllm.envs as envs

        if hasattr(envs, "disable_envs_cache"):
            envs.disable_envs_cache()
    except Exception:
        pass


def clear_caches():
    """Forget every functools cache in vLLM's modules (answers that depend on the capability are cached)."""
    import functools
    import sys

    wrapper = functools._lru_cache_wrapper
    for name, module in list(sys.modules.items()):
        if not name.startswith("vllm") or module is None:
            continue
        try:
            values = list(vars(module).values())
        except TypeError:
            continue
        for value in values:
            if isinstance(value, wrapper):
                value.cache_clear()
            elif isinstance(value, type) and value.__module__ == name:
                for attr in list(vars(value).values()):
                    fn = getattr(attr, "__func__", attr)
                    if isinstance(fn, wrapper):
                        fn.cache_clear()


class FreshVllmConfig:
    """`with FreshVllmConfig():` runs the body under a default VllmConfig (a no-op where the release has none)."""

    def __enter__(self):
        try:
            from vllm.config import VllmConfig, set_current_vllm_config

            self._cm = set_current_vllm_config(VllmConfig())
            self._cm.__enter__()
        except Exception:
            self._cm = None
        return self

    def __exit__(self, *exc):
        if self._cm is not None:
            self._cm.__exit__(*exc)
        return False


def decision_tree(cells):
    """Exact decision-tree form of a set of grid cells: [[values of axis 0, subtree], ...]; leaf True."""
    if not cells or len(cells[0]) == 0:
        return True
    groups = {}
    for c in cells:
        groups.setdefault(c[0], []).append(c[1:])
    merged = {}
    for value, rest in groups.items():
        sub = decision_tree(sorted(rest, key=repr))
        key = repr(sub)
        merged.setdefault(key, [[], sub])[0].append(value)
    return [[vals, sub] for vals, sub in sorted(merged.values(), key=lambda e: repr(e[0]))]


def assignment_lines(file: str, name: str) -> list[int]:
    """The lines where the module in `file` assigns `name` at its top level (`X = ...`, `X: T = ...`,
    `type X = ...`), in file order."""
    lines = []
    for node in ast.parse(open(file).read()).body:
        targets = []
        if isinstance(node, ast.Assign):
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            targets = [node.target.id]
        elif type(node).__name__ == "TypeAlias":
            targets = [node.name.id]
        if name in targets:
            lines.append(node.lineno)
    return lines


def kv_cache_values() -> list[str]:
    """The release's `--kv-cache-dtype` values: its CacheDType literal, or (0.7, before the literal) the choices of
    its own engine-argument parser."""
    import typing

    for module in ("vllm.config.cache", "vllm.config"):
        try:
            return list(typing.get_args(getattr(__import__(module, fromlist=["CacheDType"]), "CacheDType")))
        except (ImportError, AttributeError):
            continue
    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils import FlexibleArgumentParser

    parser = EngineArgs.add_cli_args(FlexibleArgumentParser())
    return next(list(a.choices) for a in parser._actions if "--kv-cache-dtype" in a.option_strings)
