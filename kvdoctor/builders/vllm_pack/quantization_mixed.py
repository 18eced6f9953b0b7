"""ModelOpt MIXED_PRECISION read from a release (issue 25): which per-layer `quant_algo` values its
ModelOptMixedPrecisionConfig.get_quant_method builds, for a linear layer and for the experts, with the method class
each gets, and what it builds for any other value (UnquantizedLinearMethod for a linear layer, None for the experts).

Read statically (ast) from vllm/model_executor/layers/quantization/modelopt.py: the `isinstance(layer, ...)` blocks of
get_quant_method, the `quant_algo == "X"` / `quant_algo in NAME` / `quant_algo not in NAME` tests inside them (NAME
resolved to the module-level tuple, set or dict keys it names) and the first value each branch returns."""

from __future__ import annotations

import ast

from kvdoctor.builders.vllm_pack.quantization_source import (ReleaseSource, assignment, find_class, function, imports_in,
                                                              module_file)

MODELOPT = "vllm/model_executor/layers/quantization/modelopt.py"
CLASS = "ModelOptMixedPrecisionConfig"
LINEAR_TYPES = ("LinearBase", "ParallelLMHead")
MOE_TYPES = ("FusedMoE", "RoutedExperts")


class _Module:
    """A module's tree with the release it belongs to, so that an imported name can be followed to its file."""

    def __init__(self, source: ReleaseSource, file: str) -> None:
        self.source, self.file, self.body = source, file, source.tree(file).body


def _strings(node: ast.AST | None, module: _Module, depth: int = 0) -> list[str] | None:
    """The strings a name or literal stands for: a tuple/list/set literal, a frozenset/set/tuple(...) of one, a dict's
    keys, `[*NAME, ...]`, or a NAME bound to one of those in the module or in the module it is imported from."""
    if isinstance(node, ast.Name) and depth < 3:
        bound = assignment(module.body, node.id)
        if bound is None and (imported := imports_in(module.body).get(node.id)) is not None:
            file = module_file(imported[0], imported[1], module.file.removesuffix(".py"), module.source)
            if file is None or module.source.tree(file) is None:
                return None
            return _strings(ast.Name(id=imported[2]), _Module(module.source, file), depth + 1)
        value = getattr(bound, "value", None)
        return _strings(value, module, depth + 1) if value is not None and value is not node else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("frozenset", "set", "tuple") \
            and len(node.args) == 1:
        return _strings(node.args[0], module, depth)
    if isinstance(node, ast.Dict):
        keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        return keys if len(keys) == len(node.keys) else None
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        out: list[str] = []
        for item in node.elts:
            if isinstance(item, ast.Constant) and isinstance(item.value, str):
                out.append(item.value)
            elif isinstance(item, ast.Starred) and (inner := _strings(item.value, module, depth)) is not None:
                out.extend(inner)
            else:
                return None
        return out
    return None


def _isinstance_types(test: ast.expr) -> list[str]:
    """The class names of `isinstance(layer, X)` / `isinstance(layer, (X, Y))`, else []."""
    if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance"
            and len(test.args) == 2):
        return []
    kinds = test.args[1]
    elts = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
    return [e.id if isinstance(e, ast.Name) else ast.unparse(e) for e in elts]


def _returned_name(body: list[ast.stmt]) -> str | None:
    """The class or function name the first `return X(...)` of these statements calls ('None' for `return None`)."""
    for node in body:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Return):
                value = sub.value
                if value is None or isinstance(value, ast.Constant) and value.value is None:
                    return "None"
                if isinstance(value, ast.Call):
                    return ast.unparse(value.func).rsplit(".", 1)[-1]
                return ast.unparse(value)
    return None


def _algo_test(test: ast.expr, module: _Module) -> tuple[str, list[str]] | None:
    """('in', algos) for `quant_algo == "X"` or `quant_algo in NAME`, ('not in', algos) for `... not in NAME`, where
    the left side is quant_algo (or quant_algo.lower()/upper()); tests or-ed with another condition are read as the
    algo part of `quant_algo is None or quant_algo not in NAME`."""
    if isinstance(test, ast.BoolOp):
        for value in test.values:
            if (found := _algo_test(value, module)) is not None:
                return found
        return None
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    left = ast.unparse(test.left)
    if not left.startswith("quant_algo"):
        return None
    op, right = test.ops[0], test.comparators[0]
    if isinstance(op, ast.Eq) and isinstance(right, ast.Constant) and isinstance(right.value, str):
        return "in", [right.value]
    if isinstance(op, (ast.In, ast.NotIn)) and (values := _strings(right, module)) is not None:
        return ("in" if isinstance(op, ast.In) else "not in"), values
    return None


def _part(body: list[ast.stmt], module: _Module) -> dict:
    """What one isinstance block builds: algo -> {method, where}, and the fallback for any other algo."""
    built: dict[str, dict] = {}
    fallback: dict | None = None
    generic: list[str] | None = None  # `if quant_algo is None or quant_algo not in NAME: return <fallback>`
    for node in body:
        if isinstance(node, ast.If) and (test := _algo_test(node.test, module)) is not None:
            kind, algos = test
            if kind == "in":
                method = _returned_name(node.body)
                for algo in algos:
                    built.setdefault(algo.upper(), {"method": method, "where": f"{MODELOPT}:{node.lineno}"})
            else:  # the listed algos go on to the statements after this if; the others take its body
                fallback = {"method": _returned_name(node.body), "where": f"{MODELOPT}:{node.lineno}"}
                generic = [a.upper() for a in algos]
        elif isinstance(node, ast.Return) and fallback is None:
            if generic is not None:  # the statement the listed algos reach
                for algo in generic:
                    built.setdefault(algo, {"method": _returned_name([node]), "where": f"{MODELOPT}:{node.lineno}"})
                generic = None
            else:
                fallback = {"method": _returned_name([node]), "where": f"{MODELOPT}:{node.lineno}"}
        elif isinstance(node, ast.Return) and generic is not None:
            for algo in generic:
                built.setdefault(algo, {"method": _returned_name([node]), "where": f"{MODELOPT}:{node.lineno}"})
            generic = None
    return {"built": dict(sorted(built.items())), "otherwise": fallback}


def mixed_precision_facts(source: ReleaseSource) -> dict | None:
    """The release's ModelOptMixedPrecisionConfig per-layer dispatch, or None where the release has no such class."""
    found = find_class(source, MODELOPT, CLASS) if source.tree(MODELOPT) is not None else None
    if found is None or found[0] != MODELOPT:  # before 0.6: no modelopt.py at all
        return None
    module = _Module(source, MODELOPT)
    cls = found[1]
    get = function(cls.body, "get_quant_method")
    if get is None:
        return None
    out: dict = {"class": f"{MODELOPT}:{cls.lineno}", "get_quant_method": f"{MODELOPT}:{get.lineno}",
                 "linear": None, "moe": None, "both": None}  # fmt: skip
    for node in get.body:
        if isinstance(node, ast.If):
            types = _isinstance_types(node.test)
            part = "linear" if any(t in LINEAR_TYPES for t in types) else \
                "moe" if any(t in MOE_TYPES for t in types) else None
            if part and out[part] is None:
                out[part] = _part(node.body, module) | {"at": f"{MODELOPT}:{node.lineno}", "types": types}
            # an algo test before the layer-type blocks (0.34.0's B12X block codecs) serves both kinds
            elif not types and (test := _algo_test(node.test, module)) is not None and test[0] == "in" \
                    and out["both"] is None:
                out["both"] = {"algos": sorted(a.upper() for a in test[1]), "where": f"{MODELOPT}:{node.lineno}"}
    return out
