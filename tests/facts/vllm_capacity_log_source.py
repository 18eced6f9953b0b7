"""Reads, from a released vLLM wheel's own source, what it logs once the KV cache is sized: the format strings of its
"KV cache size" / "Maximum concurrency" lines, their arguments, the formula of the token count and of the
concurrency, and the file:line. Used by tests/facts/test_fit_capacity_log.py to check data/kv_memory.yaml's
kv_cache.capacity_log against every pack release's own file (no vLLM code is copied: only what it prints and how it counts)."""

from __future__ import annotations

import ast

UTILS = "vllm/v1/core/kv_cache_utils.py"
ARG_NAMES = (("num_tokens", "tokens"), ("max_model_len", "max_model_len"), ("max_concurrency", "concurrency"),
             ("device", "device"), ('"GPU"', "device"), ("pools", "device"))  # fmt: skip


def capacity_log_from_source(source: str) -> dict:
    """{'where': 'file:line, ...', 'tokens': ..., 'concurrency': ..., 'lines': [[template, [arg, ...]], ...]}."""
    tree = ast.parse(source)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    where, tokens, lines = [], set(), []
    for function in functions.values():
        calls = [c for c in ast.walk(function) if _is_capacity_log(c)]
        if not calls:
            continue
        calls.sort(key=lambda c: c.lineno)
        where.append(f"{UTILS}:{calls[0].lineno}")
        tokens.add(_token_formula(function, functions))
        for call in calls:
            line = [call.args[0].value, [_arg_name(a) for a in call.args[1:]]]
            if line not in lines:
                lines.append(line)
    # 0.8.5 and 0.10.2's uniform-type path (one group) count num_blocks x block_size: num_blocks // 1 group x block
    tokens = {"blocks_per_group" if t == "blocks_x_block" else t for t in tokens}
    if not any("KV cache size" in template for template, _ in lines):  # 0.7.3: V1 logs the concurrency only
        return {"where": ", ".join(where), "tokens": None, "lines": lines, "concurrency": None}
    assert len(tokens) == 1, tokens
    concurrency = functions.get("get_max_concurrency_for_kv_cache_config")
    return {"where": ", ".join(where), "tokens": tokens.pop(), "lines": lines,
            "concurrency": _concurrency_formula(concurrency) if concurrency else _inline_concurrency(tree)}


def _inline_concurrency(tree: ast.Module) -> str:
    """0.8.5: max_concurrency = num_tokens / max_model_len, computed where it is logged."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "max_concurrency":
            if ast.unparse(node.value).startswith("num_tokens / "):
                return "tokens_over_len"
    return "unknown"


def _is_capacity_log(node: ast.AST) -> bool:
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("info", "info_once") and node.args):  # fmt: skip
        return False
    first = node.args[0]
    return isinstance(first, ast.Constant) and isinstance(first.value, str) and (
        "KV cache size: %s tokens" in first.value or first.value.startswith("Maximum concurrency for"))


def _arg_name(node: ast.AST) -> str:
    text = ast.unparse(node)
    return next((name for needle, name in ARG_NAMES if needle in text), text)


def _token_formula(function: ast.FunctionDef, functions: dict[str, ast.FunctionDef]) -> str:
    for node in ast.walk(function):
        if not isinstance(node, ast.Assign):
            continue
        target = ast.unparse(node.targets[0]).strip("()")
        value = ast.unparse(node.value)
        if target == "num_tokens":
            if "max_concurrency * max_model_len" in value:
                return "concurrency_x_len"
            if "num_blocks // len(" in value and "block_size" in value:  # 0.9.1: the cache config's block size,
                return "blocks_per_group"  # every group's in that release (one block size for all)
            if "num_blocks * " in value and "block_size" in value:
                return "blocks_x_block"
            return f"unknown: {value}"
        if target.startswith("num_tokens,") and value.startswith("get_kv_cache_capacity("):
            return _token_formula(functions["get_kv_cache_capacity"], functions)
    for node in ast.walk(function):  # get_kv_cache_capacity returns the count directly
        if isinstance(node, ast.Return) and "int(max_concurrency * max_model_len)" in ast.unparse(node):
            return "concurrency_x_len"
    return "unknown"


def _concurrency_formula(function: ast.FunctionDef) -> str:
    """'summed_bytes' (<= 0.26: cdiv of every group's bytes over the first group's page), 'summed_blocks' (0.27+: the
    sum of each group's cdiv), 'device_blocks' (0.30+: the same over device groups, host groups their own pool)."""
    text = ast.unparse(function)
    if "num_layer_per_group" in text:
        return "summed_bytes"
    if "host_resident" in text:
        return "device_blocks"
    return "summed_blocks"
