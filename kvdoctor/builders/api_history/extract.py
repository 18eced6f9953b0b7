"""One module's API from its source, by AST (nothing is imported): its top-level names, each public class's
members and constructor parameters, each public function's parameters.

A module's API is a frozenset of keys, so two releases compare by set difference:
  ("name", module, name)        a top-level def, class, assignment, import or __all__ entry
  ("member", Class, member)     a public class's method, class attribute or self.attribute (Class is qualified)
  ("param", callable, param)    a public class's __init__ / field parameter or a public function's parameter;
                                "**" when it takes arbitrary keywords
  ("star", module, target)      `from target import *`: the build adds target's public names to module's
"""

from __future__ import annotations

import ast

Key = tuple[str, str, str]
ANY_KEYWORD = "**"


def module_name(path: str) -> str | None:
    """'vllm/a/b.py' -> 'vllm.a.b', 'vllm/a/__init__.py' -> 'vllm.a'; None for what is no module."""
    if not path.endswith(".py"):
        return None
    parts = path[:-3].split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) if all(p.isidentifier() for p in parts) else None


def packages_of(module: str) -> list[str]:
    """The packages a module sits in ('vllm.a.b' -> ['vllm', 'vllm.a']): importable even without __init__.py."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def module_api(module: str, source: bytes, is_package: bool = False) -> frozenset[Key]:
    """The keys of one module's source; empty when it does not parse (a release's own syntax error stays its own).
    `is_package`: the source is a package's __init__.py (a relative import starts from the module itself)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return frozenset()
    keys: set[Key] = set()
    for node in _top_level(tree.body):
        for name in _bound_names(node):
            keys.add(("name", module, name))
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            keys.add(("star", module, _absolute(module, is_package, node.level, node.module)))
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            keys |= _class_keys(f"{module}.{node.name}", node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            keys |= {("param", f"{module}.{node.name}", p) for p in _parameters(node.args)}
    return frozenset(keys)


def class_bases(module: str, source: bytes) -> dict[str, list[str]]:
    """Each public top-level class's bases as written, last name only ('vllm.a.AsyncEngineArgs' -> ['EngineArgs']):
    a subclass takes its bases' fields, which the look-up follows."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    found = {}
    for node in _top_level(tree.body):
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            names = [ast.unparse(b).rpartition(".")[2] for b in node.bases if isinstance(b, (ast.Name, ast.Attribute))]
            if names:
                found[f"{module}.{node.name}"] = names
    return found


def _absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The module a (relative) import names."""
    if level == 0:
        return target or ""
    parts = module.split(".")
    base = parts[:len(parts) - level + (1 if is_package else 0)]
    return ".".join(base + ([target] if target else []))


def _top_level(body: list[ast.stmt]):
    """The module's statements, with those under a top-level if / try / with (TYPE_CHECKING, optional imports)."""
    for node in body:
        if isinstance(node, ast.If):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _top_level(block)
        elif isinstance(node, ast.With):
            yield from _top_level(node.body)
        else:
            yield node


def _bound_names(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"]
    if isinstance(node, ast.Assign):
        names = [n for t in node.targets for n in _target_names(t)]
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            names += _string_list(node.value)
        return names
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        names = _target_names(node.target)
        if isinstance(node, ast.AugAssign) and names == ["__all__"]:
            names += _string_list(node.value)
        return names
    if isinstance(node, ast.TypeAlias if hasattr(ast, "TypeAlias") else ()):
        return [node.name.id]
    return []


def _target_names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in _target_names(e)]
    return []


def _string_list(value: ast.expr | None) -> list[str]:
    if isinstance(value, (ast.List, ast.Tuple)):
        return [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _class_keys(qualified: str, node: ast.ClassDef) -> set[Key]:
    members: set[str] = set()
    fields: list[str] = []
    init: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            members.add(item.name)
            if item.name == "__init__":
                init = item
            members.update(_self_attributes(item))
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            members.add(item.target.id)
            if not _is_class_var(item.annotation):
                fields.append(item.target.id)
        elif isinstance(item, ast.Assign):
            members.update(n for t in item.targets for n in _target_names(t))
    # a dataclass, pydantic model or msgspec Struct takes its annotated fields; an explicit __init__ wins
    params = _parameters(init.args)[1:] if init is not None else fields
    keys: set[Key] = {("member", qualified, m) for m in members if not m.startswith("__") or m == "__init__"}
    keys |= {("param", qualified, p) for p in params}
    return keys


def _self_attributes(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """`self.x = ...` (and `self.x: T = ...`) anywhere in a method: the instance attributes it sets."""
    if not function.args.args:
        return set()
    owner = function.args.args[0].arg
    found = set()
    for node in ast.walk(function):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        for target in targets:
            for element in (target.elts if isinstance(target, ast.Tuple) else [target]):
                if (isinstance(element, ast.Attribute) and isinstance(element.value, ast.Name)
                        and element.value.id == owner):
                    found.add(element.attr)
    return found


def _is_class_var(annotation: ast.expr) -> bool:
    text = ast.unparse(annotation) if hasattr(ast, "unparse") else ""
    return text.startswith(("ClassVar", "typing.ClassVar", "Final[ClassVar"))


def _parameters(args: ast.arguments) -> list[str]:
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    if args.kwarg is not None:
        names.append(ANY_KEYWORD)
    return names
