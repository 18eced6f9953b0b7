"""Read one release's model registry with ast (nothing imported): the architecture dicts and the lines they start
on, which of them the registry serves from, _PREVIOUSLY_SUPPORTED_MODELS / _OOT_SUPPORTED_MODELS, the refusal
messages as templates with their file:line, and where the Transformers-backend fallback lives."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

# The registry file moved: models/__init__.py until 0.5.x, models/registry.py after.
REGISTRY_FILES = ("vllm/model_executor/models/registry.py", "vllm/model_executor/models/__init__.py")
# 0.4.x raised the "not supported" error from the model loader, not the registry.
RAISE_FILES = REGISTRY_FILES + ("vllm/model_executor/model_loader/utils.py",)
MEMBERS = RAISE_FILES
# The functions that fall back to vLLM's Transformers backend for an architecture the registry lacks.
FALLBACK_FUNCTIONS = ("_try_resolve_transformers", "resolve_transformers_arch", "resolve_transformers_fallback")
# The refusal messages, each known by a literal fragment of its text.
MESSAGES = {"unsupported": "are not supported for now", "removed": "is not supported anymore",
            "out_of_tree": "is not supported in-tree anymore"}  # fmt: skip
SERVED_FROM = ("_VLLM_MODELS", "_MODELS")  # the merged dict the registry looks architectures up in


@dataclass
class Registry:
    """What one release's registry says."""

    file: str
    dicts: dict[str, dict[str, int]] = field(default_factory=dict)  # dict name -> architecture -> line
    dict_lines: dict[str, int] = field(default_factory=dict)
    served_from: list[str] = field(default_factory=list)  # the dicts merged into _VLLM_MODELS / _MODELS
    previously_supported: dict[str, str] = field(default_factory=dict)  # architecture -> last release serving it
    out_of_tree: dict[str, str] = field(default_factory=dict)  # architecture -> plugin URL
    messages: dict[str, dict[str, str]] = field(default_factory=dict)  # kind -> {template, at}
    fallback: str | None = None  # file:line of the Transformers-backend fallback


def _target(node: ast.stmt) -> str | None:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        return node.target.id
    return None


def _string_items(node: ast.Dict) -> list[tuple[str, ast.expr, int]]:
    """(key, value, line) of the string keys of a dict literal, nested `**{...}` literals included."""
    items = []
    for key, value in zip(node.keys, node.values):
        if key is None and isinstance(value, ast.Dict):
            items += _string_items(value)
        elif isinstance(key, ast.Constant) and isinstance(key.value, str):
            items.append((key.value, value, key.lineno))
    return items


def _template(node: ast.expr) -> str | None:
    """A message expression as text with `{expr}` for each interpolated part (f-strings, implicit concatenation)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _template(node.left), _template(node.right)
        return left + right if left is not None and right is not None else None
    return None


def _read_dicts(tree: ast.Module, registry: Registry) -> None:
    for node in tree.body:
        name = _target(node)
        if name is None or not isinstance(node.value, ast.Dict) or name.startswith("_ROCM"):
            continue
        items = _string_items(node.value)
        if name in SERVED_FROM:
            registry.served_from = [v.id for k, v in zip(node.value.keys, node.value.values)
                                    if k is None and isinstance(v, ast.Name)] or [name]  # fmt: skip
            # (0.4.2 and before: `_MODELS` is itself the literal architecture -> (module, class) dict)
        if not items:
            continue
        strings = {k: v.value for k, v, _ in items if isinstance(v, ast.Constant) and isinstance(v.value, str)}
        if name == "_PREVIOUSLY_SUPPORTED_MODELS":
            registry.previously_supported = strings
        elif name == "_OOT_SUPPORTED_MODELS":
            registry.out_of_tree = strings
        elif not strings:  # architecture -> (module, class)
            registry.dicts[name] = {k: line for k, _, line in items}
            registry.dict_lines[name] = node.lineno


def _read_raises(tree: ast.Module, file: str, registry: Registry) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in FALLBACK_FUNCTIONS and registry.fallback is None:
            registry.fallback = f"{file}:{node.lineno}"
        if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args):
            continue
        text = _template(node.exc.args[0])
        for kind, fragment in MESSAGES.items():
            if text and fragment in text and kind not in registry.messages:
                registry.messages[kind] = {"template": text, "at": f"{file}:{node.lineno}"}


def read_registry(texts: dict[str, str]) -> Registry:
    """The registry of one release from the text of its MEMBERS ('' or missing for a file the wheel lacks)."""
    file = next((f for f in REGISTRY_FILES if texts.get(f)), None)
    if file is None:
        raise ValueError("the wheel has no model registry (models/registry.py or models/__init__.py)")
    registry = Registry(file)
    _read_dicts(ast.parse(texts[file]), registry)
    for name in RAISE_FILES:
        if texts.get(name):
            _read_raises(ast.parse(texts[name]), name, registry)
    missing = [d for d in registry.served_from if d not in registry.dicts]
    if not registry.served_from or missing or "unsupported" not in registry.messages:
        raise ValueError(f"{file}: could not read the served dicts ({registry.served_from}, unread {missing}) "
                         f"or the 'not supported' raise")  # fmt: skip
    return registry
