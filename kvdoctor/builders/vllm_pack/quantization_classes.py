"""What one quantization config class of a vLLM release says of itself, read statically along its class chain:
`get_min_capability()`, `get_supported_act_dtypes()`, and whether (and when) `override_quantization_method` takes
over a checkpoint's method."""

from __future__ import annotations

import ast

from kvdoctor.builders.vllm_pack.quantization_source import ReleaseSource, method_of, returned

TORCH_DTYPES = {"half": "float16", "float16": "float16", "bfloat16": "bfloat16", "float": "float32",
                "float32": "float32"}  # fmt: skip


def min_capability(chain) -> dict:
    found = method_of(chain, "get_min_capability")
    if found is None:
        return {"value": None, "where": None, "expr": None}
    file, func = found
    value = returned(func)
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub) and isinstance(value.operand, ast.Constant):
        value = ast.copy_location(ast.Constant(-value.operand.value), value)  # ipex: -1
    if isinstance(value, ast.Constant) and isinstance(value.value, int) and not isinstance(value.value, bool):
        return {"value": value.value, "where": f"{file}:{value.lineno}", "expr": None}
    return {"value": None, "where": f"{file}:{func.lineno}", "expr": ast.unparse(value) if value else "(computed)"}


def act_dtypes(chain) -> dict:
    found = method_of(chain, "get_supported_act_dtypes")
    if found is None:
        return {"values": None, "where": None}
    file, func = found
    value = returned(func)
    if isinstance(value, (ast.List, ast.Tuple)) and all(isinstance(e, ast.Attribute) and
                                                        e.attr in TORCH_DTYPES for e in value.elts):  # fmt: skip
        names = list(dict.fromkeys(TORCH_DTYPES[e.attr] for e in value.elts))  # vLLM's order: its message lists them
        return {"values": names, "where": f"{file}:{value.lineno}"}
    return {"values": None, "where": f"{file}:{func.lineno}"}


def override(source: ReleaseSource, chain) -> tuple[str | None, list[str], list[str]]:
    """Where the class (or a vLLM base other than QuantizationConfig) defines override_quantization_method, the
    strings it compares with (the checkpoint methods it may claim), and, when it claims only if `--quantization`
    asks for it (every non-None return under a test of the user_quant parameter), the values it asks for."""
    found = method_of([c for c in chain if c[1].name != "QuantizationConfig"], "override_quantization_method")
    if found is None:
        return None, [], []
    func = found[1]
    words = set(method_words(func))
    helpers = {n.func.id if isinstance(n.func, ast.Name) else n.func.attr for n in ast.walk(func)
               if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute))}  # fmt: skip
    for file, cls in chain:  # one level into the helpers it calls (`is_awq_marlin_compatible(hf_quant_cfg)`)
        for node in [*cls.body, *(source.tree(file).body if source.tree(file) else [])]:
            if isinstance(node, ast.FunctionDef) and node.name in helpers and node is not func:
                words |= set(method_words(node))
    return f"{found[0]}:{func.lineno}", sorted(words), when_asked(func)


def method_words(func: ast.FunctionDef) -> list[str]:
    """The strings the override compares the checkpoint's quant_method with (`quant_method == "awq"`,
    `quant_method in (...)`, `quant_method.startswith("modelopt")`), lower case."""
    words: set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any("quant_method" in ast.unparse(side) for side in sides):
                for side in sides:
                    words |= {c.value.lower() for c in ast.walk(side)
                              if isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value != "quant_method"}
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("startswith", "endswith") and "quant_method" in ast.unparse(node.func.value):
            words |= {c.value.lower() for c in node.args if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    return sorted(w for w in words if w)


def when_asked(func: ast.FunctionDef) -> list[str]:
    """The `--quantization` values the override's claims all depend on ([] when some claim does not)."""
    params = [a.arg for a in func.args.args]
    user = params[2] if len(params) > 2 else None  # (cls, hf_quant_cfg, user_quant, ...)
    asked: set[str] = set()

    def guard(test: ast.expr) -> set[str]:
        found = set()
        for node in ast.walk(test):
            if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == user and \
                    all(isinstance(op, (ast.Eq, ast.In)) for op in node.ops):
                for comp in node.comparators:
                    found |= {c.value for c in ast.walk(comp)
                              if isinstance(c, ast.Constant) and isinstance(c.value, str)}
        return found

    def claims(node: ast.AST, guards: set[str]) -> bool:
        """False when a claim here does not depend on the user's value."""
        if isinstance(node, ast.Return):
            value = node.value
            if value is None or (isinstance(value, ast.Constant) and value.value is None):
                return True
            if isinstance(value, ast.IfExp) and isinstance(value.orelse, ast.Constant) and value.orelse.value is None:
                guards = guards | guard(value.test)
            asked.update(guards)
            return bool(guards)
        if isinstance(node, ast.If):
            inner = guards | guard(node.test)
            return all(claims(n, inner) for n in node.body) and all(claims(n, guards) for n in node.orelse)
        return all(claims(n, guards) for n in ast.iter_child_nodes(node) if isinstance(n, ast.stmt))

    return sorted(asked) if user and all(claims(n, set()) for n in func.body) else []
