"""What a vLLM release's compressed-tensors code says about per-layer schemes, read statically (ast; nothing
imported): CompressedTensorsConfig._get_scheme_from_parts (which `_is_*` test picks which scheme classes, in the
release's order, and where a branch falls back by capability), each scheme class's get_min_capability(), the
`_check_scheme_supported` refusal, and the capability below which Fp8LinearMethod runs FP8 weights through Marlin.
"""

from __future__ import annotations

import ast
import re

from kvdoctor.builders.vllm_pack.quantization_source import (
    ReleaseSource, class_chain, function, imports_in, message_template, method_of, module_file,
)  # fmt: skip

CT = "vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors.py"
FP8 = "vllm/model_executor/layers/quantization/fp8.py"
CT_MOE = ("vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors_moe/compressed_tensors_moe.py",
          "vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors_moe.py")
MOE_PHRASE = "Unsupported FusedMoe scheme"
MARLIN = "vllm/model_executor/layers/quantization/utils/marlin_utils.py"
MESSAGE_PHRASE = "Quantization scheme is not supported for the current GPU"
# a branch whose body asks one of these chooses between two schemes by the GPU (the first when it holds)
CAPABILITY_SWITCHES = {"_check_scheme_supported": "scheme_min_capability", "cutlass_fp4_supported": "fp4_cutlass"}


def scheme_facts(source: ReleaseSource) -> dict | None:
    """The release's compressed-tensors scheme selection (see the module docstring); None when it has none."""
    tree = source.tree(CT)
    if tree is None:
        return None
    config = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "CompressedTensorsConfig"), None)
    select = function(config.body, "_get_scheme_from_parts") if config else None
    if select is None:
        return None
    branches = _branches(select)
    names = {cls for branch in branches for cls in branch["classes"]}
    imported = imports_in(tree.body)
    classes = {}
    for name in sorted(names):
        classes[name] = _class_minimum(source, imported, name)
    return {
        "select_where": f"{CT}:{select.lineno}",
        "branches": branches,
        "classes": classes,
        "message": _message(tree),
        "fp8_marlin_below": _fp8_marlin_below(source),
        "moe": _moe_facts(source),
    }


def _moe_facts(source: ReleaseSource) -> dict | None:
    """CompressedTensorsMoEMethod.get_moe_method: the `_is_*` branches that pick the experts' method, in order, and
    the refusal when none matches ("Unsupported FusedMoe scheme: ..."); None when the release's file was not read."""
    for file in CT_MOE:
        tree = source.tree(file)
        if tree is None:
            continue
        owner = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "CompressedTensorsMoEMethod"),
                     None)  # fmt: skip
        select = function(owner.body, "get_moe_method") if owner else None
        if select is None:
            return None
        message = None
        for node in ast.walk(select):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
                template = message_template(node.exc.args[0])
                if MOE_PHRASE in template:
                    message = {"template": template, "where": f"{file}:{node.lineno}"}
        branches = [{k: b[k] for k in ("tests", "classes", "line", "any")}
                    for b in _branches(select, prefix=("CompressedTensors", "Unquantized"))]  # fmt: skip
        return {"select_where": f"{file}:{select.lineno}", "branches": branches, "message": message}
    return None


def _branches(select: ast.FunctionDef, prefix: tuple[str, ...] = ("CompressedTensors",)) -> list[dict]:
    """Each `if` whose test calls `self._is_*`: the tests it calls, the scheme classes its body returns (in order),
    the other comparisons its test makes (format, bit width) and what switches between its schemes."""
    found = []
    within: dict[int, str] = {}  # an `if` nested in another `if` (the activation-format block) -> that test
    for outer in ast.walk(select):
        if isinstance(outer, ast.If) and not _tests_of(outer.test):
            for inner in ast.walk(ast.Module(body=outer.body, type_ignores=[])):
                within.setdefault(id(inner), ast.unparse(outer.test))
    for node in ast.walk(select):
        if not isinstance(node, ast.If):
            continue
        tests = _tests_of(node.test)
        if not tests:
            continue
        body = ast.Module(body=node.body, type_ignores=[])
        classes = list(dict.fromkeys(c.func.id for c in ast.walk(body) if isinstance(c, ast.Call)
                                     and isinstance(c.func, ast.Name) and c.func.id.startswith(prefix)))
        calls = {c.func.attr if isinstance(c.func, ast.Attribute) else getattr(c.func, "id", "")
                 for c in ast.walk(body) if isinstance(c, ast.Call)}  # fmt: skip
        switch = next((v for k, v in CAPABILITY_SWITCHES.items() if k in calls), None)
        conditions = sorted({ast.unparse(c) for c in ast.walk(node.test) if isinstance(c, ast.Compare)})
        formats = sorted({ast.unparse(c) for c in ast.walk(body) if isinstance(c, ast.Compare)
                          and "format" in ast.unparse(c)})  # fmt: skip
        if classes:
            found.append({"tests": tests, "classes": classes, "switch": switch, "conditions": conditions,
                          "body_formats": formats, "within": within.get(id(node)), "line": node.lineno,
                          "any": isinstance(node.test, ast.BoolOp) and isinstance(node.test.op, ast.Or)})  # fmt: skip
    return sorted(found, key=lambda b: b["line"])


def _tests_of(test: ast.expr) -> list[str]:
    return [c.func.attr for c in ast.walk(test) if isinstance(c, ast.Call)
            and isinstance(c.func, ast.Attribute) and c.func.attr.startswith("_is_")]  # fmt: skip


def _class_minimum(source: ReleaseSource, imported: dict, name: str) -> dict:
    """A scheme class's get_min_capability(): its default return (the last one, when an env override returns
    earlier) and where."""
    if name not in imported:
        return {"min_capability": None, "where": None, "conditional": False}
    module, level, cls = imported[name]
    file = module_file(module, level, CT, source)
    chain = class_chain(source, file, cls) if file else []
    found = method_of(chain, "get_min_capability")
    if found is None:
        return {"min_capability": None, "where": None, "conditional": False}
    where, func = found
    returns = [n for n in ast.walk(func) if isinstance(n, ast.Return) and n.value is not None]
    last = returns[-1].value if returns else None
    value = last.value if isinstance(last, ast.Constant) and isinstance(last.value, int) else None
    return {"min_capability": value, "where": f"{where}:{last.lineno if last is not None else func.lineno}",
            "conditional": len(returns) > 1}  # fmt: skip


def _message(tree: ast.Module) -> dict | None:
    """The `_check_scheme_supported` refusal (its >= branch), as a template with {0} min and {1} current."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            parts, count = [], 0
            for arg in node.exc.args:  # placeholders numbered across the arguments
                part = message_template(arg)
                parts.append(re.sub(r"(?<!\{)\{(\d+)\}", lambda m: "{%d}" % (int(m.group(1)) + count), part))
                count += len(re.findall(r"(?<!\{)\{\d+\}", part))
            # several arguments (older releases): the exception prints as their tuple, which is what users see
            template = parts[0] if len(parts) == 1 else "(" + ", ".join(f"'{p}'" for p in parts) + ")"
            if MESSAGE_PHRASE in "".join(parts) and "Min capability" in template:
                return {"template": template, "where": f"{CT}:{node.lineno}"}
    return None


def _fp8_marlin_below(source: ReleaseSource) -> dict | None:
    """`use_marlin = not current_platform.has_device_capability(N)` in Fp8LinearMethod, where the release writes
    it (later releases choose the Marlin kernel in their FP8 kernel selection instead: None here)."""
    tree = source.tree(FP8)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any("use_marlin" in ast.unparse(t) for t in node.targets):
            for call in ast.walk(node.value):
                if isinstance(call, ast.Call) and getattr(call.func, "attr", "") == "has_device_capability" and \
                        call.args and isinstance(call.args[0], ast.Constant):
                    return {"value": call.args[0].value, "where": f"{FP8}:{node.lineno}"}
    return None


def marlin_facts(source: ReleaseSource) -> dict | None:
    """The capability below which Marlin serves no quant type (query_marlin_supported_quant_types'
    `if device_capability < N: return []`) and its group sizes: what awq_marlin / gptq_marlin's overrides check
    (is_awq_marlin_compatible / is_gptq_marlin_compatible -> check_marlin_supported) before they claim a checkpoint."""
    tree = source.tree(MARLIN)
    if tree is None:
        return None
    query = function(tree.body, "query_marlin_supported_quant_types")
    minimum = None
    for node in ast.walk(query) if query else ():
        if isinstance(node, ast.Compare) and ast.unparse(node.left) == "device_capability" and \
                isinstance(node.ops[0], ast.Lt) and isinstance(node.comparators[0], ast.Constant):
            minimum = {"value": node.comparators[0].value, "where": f"{MARLIN}:{node.lineno}"}
            break
    sizes = next((n for n in tree.body if isinstance(n, ast.Assign) and any(
        getattr(t, "id", "") == "MARLIN_SUPPORTED_GROUP_SIZES" for t in n.targets)), None)  # fmt: skip
    try:
        groups = ast.literal_eval(sizes.value) if sizes is not None else None
    except ValueError:  # not a literal list
        groups = None
    if minimum is None:
        return None
    return {"min_capability": minimum["value"], "where": minimum["where"], "group_sizes": groups}