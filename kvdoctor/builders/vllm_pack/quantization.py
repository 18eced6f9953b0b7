"""Read each vLLM release's weight-quantization facts from its own source, statically (ast; nothing imported).

    python -m kvdoctor.builders.vllm_pack.quantization --wheels ~/.cache/kvdoctor/wheels \
        [--trees DIR ...] [--versions V ...] [--out kvdoctor/data/vllm_pack/quantization] [--check]

Per release: the methods it registers (`QuantizationMethods` / `QUANTIZATION_METHODS` in
vllm/model_executor/layers/quantization/__init__.py: the valid `--quantization` values), the config class each
maps to (`method_to_config` in `get_quantization_config`, the CUDA branch where the class depends on the
platform), that class's `get_min_capability()` and `get_supported_act_dtypes()` (walking its bases), whether it
defines `override_quantization_method`, the override order and deprecated methods, and vLLM's own messages for a
refusal (vllm/config/vllm.py and vllm/config/model.py); each with its file:line. A release comes from a wheel
(only these .py members are read) or from an unpacked tree such as kvdoctor.dryrun.wheel_fetch writes.
The output is deterministic (sorted keys, no paths, no timestamps): `--check` recomputes and compares.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import zipfile
from pathlib import Path

from kvdoctor.base.versions import pack_order
from kvdoctor.data import DATA_DIR

FORMAT = 1
QUANT_PKG = "vllm/model_executor/layers/quantization"
INIT = f"{QUANT_PKG}/__init__.py"
OUT = DATA_DIR / "vllm_pack" / "quantization"
TORCH_DTYPES = {"half": "float16", "float16": "float16", "bfloat16": "bfloat16", "float": "float32",
                "float32": "float32"}  # fmt: skip
# vLLM's messages, found by a phrase each keeps across releases; placeholders {0}, {1}, ... in their order.
MESSAGES = {
    "capability": "is not supported for the current GPU",
    "unknown_method": "Unknown quantization method",
    "mismatch": "does not match the quantization method specified",
    "act_dtype": "is not supported for quantization method",
    "deprecated": "is deprecated and will be removed",
}
MESSAGE_FILES = ("vllm/config/vllm.py", "vllm/config/model.py", "vllm/config/__init__.py", "vllm/config.py")
_WHEEL = re.compile(r"vllm-(\d+\.\d+\.\d+)(?:-\d+)?-.*\.whl$")


class ReleaseSource:
    """The .py files of one release: a wheel (members read on demand) or an unpacked tree holding vllm/."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.zip = zipfile.ZipFile(path) if path.is_file() else None
        self._cache: dict[str, ast.Module | None] = {}

    def text(self, name: str) -> str | None:
        if self.zip is not None:
            try:
                return self.zip.read(name).decode("utf-8")
            except KeyError:
                return None
        file = self.path / name
        return file.read_text("utf-8") if file.is_file() else None

    def tree(self, name: str) -> ast.Module | None:
        if name not in self._cache:
            text = self.text(name)
            self._cache[name] = ast.parse(text) if text is not None else None
        return self._cache[name]


def module_file(module: str, level: int, here: str, source: ReleaseSource) -> str | None:
    """The file of `from <level dots><module> import ...` written in file `here` (a module or a package)."""
    if level:
        base = here.rsplit("/", level)[0]
        dotted = f"{base}/{module.replace('.', '/')}" if module else base
    else:
        dotted = module.replace(".", "/")
    for name in (f"{dotted}.py", f"{dotted}/__init__.py"):
        if source.text(name) is not None:
            return name
    return None


def imports_in(nodes: list[ast.stmt], prefer_cuda: bool = True) -> dict[str, tuple[str, int, str]]:
    """local name -> (module, level, imported name) for the imports in these statements (nested ones too;
    of an `if ...is_cuda()...:` only its body, the branch vLLM takes on NVIDIA GPUs)."""
    found: dict[str, tuple[str, int, str]] = {}
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                found[alias.asname or alias.name] = (node.module or "", node.level, alias.name)
        elif isinstance(node, ast.If):
            cuda = prefer_cuda and "is_cuda" in ast.unparse(node.test)
            found.update(imports_in(node.orelse, prefer_cuda) if not cuda else {})
            found.update(imports_in(node.body, prefer_cuda))
        elif isinstance(node, (ast.Try, ast.With, ast.For)):
            found.update(imports_in(node.body, prefer_cuda))
    return found


def string_list(node: ast.AST | None) -> list[str] | None:
    if isinstance(node, ast.Subscript):  # Literal["awq", ...]
        node = node.slice
    if isinstance(node, (ast.List, ast.Tuple)) and all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                                                      for e in node.elts):  # fmt: skip
        return [e.value for e in node.elts]
    return None


def assignment(nodes, name: str) -> ast.stmt | None:
    """The first `name = ...` / `name: T = ...` among these statements (not nested in functions)."""
    for node in nodes:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return node
    return None


def function(nodes, name: str) -> ast.FunctionDef | None:
    return next((n for n in nodes if isinstance(n, ast.FunctionDef) and n.name == name), None)


def walk_statements(nodes):
    """Every statement in these, nested blocks included (functions too)."""
    for node in nodes:
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                yield from walk_statements([child])


def registered_methods(source: ReleaseSource) -> tuple[list[str], str]:
    """QUANTIZATION_METHODS (the Literal's values, or the list literal older releases write) and where."""
    tree = source.tree(INIT)
    if tree is None:
        raise ValueError(f"{INIT} is not in this release")
    for name in ("QuantizationMethods", "QUANTIZATION_METHODS"):
        node = assignment(tree.body, name)
        values = string_list(node.value) if node is not None else None
        if values:
            return values, f"{INIT}:{node.lineno}"
    raise ValueError(f"{INIT}: no literal QuantizationMethods / QUANTIZATION_METHODS")


def method_classes(source: ReleaseSource, methods: list[str]) -> dict[str, tuple[str, str, int]]:
    """method -> (file, class name, line of the mapping) from get_quantization_config's method_to_config."""
    tree = source.tree(INIT)
    func = function(tree.body, "get_quantization_config")
    if func is None:
        return {}
    names = imports_in(tree.body) | imports_in(func.body)
    local = {}  # `deepseek_config: type[...] = Cls` in the CUDA branch
    for node in walk_statements(func.body):
        if isinstance(node, ast.If) and "is_cuda" in ast.unparse(node.test):
            for inner in walk_statements(node.body):
                if isinstance(inner, (ast.Assign, ast.AnnAssign)) and isinstance(inner.value, ast.Name):
                    target = inner.targets[0] if isinstance(inner, ast.Assign) else inner.target
                    if isinstance(target, ast.Name):
                        local.setdefault(target.id, inner.value.id)
    mapping: dict[str, tuple[str, str, int]] = {}

    def resolve(name: str) -> tuple[str, str] | None:
        name = local.get(name, name)
        if name not in names:
            return None
        module, level, cls = names[name]
        file = module_file(module, level, INIT, source)
        return (file, cls) if file else None

    for node in walk_statements(func.body):
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, ast.Dict) and value.keys and all(isinstance(k, ast.Constant) for k in value.keys):
            for key, cls in zip(value.keys, value.values):
                if isinstance(cls, ast.Name) and (found := resolve(cls.id)):
                    mapping[key.value] = (*found, key.lineno)
        elif isinstance(node, ast.For):  # `for shorthand in _ONLINE_SHORTHANDS: method_to_config.setdefault(s, C)`
            for inner in ast.walk(node):  # or `method_to_config[shorthand] = C`
                if isinstance(inner, ast.Call) and getattr(inner.func, "attr", "") == "setdefault" and \
                        len(inner.args) == 2 and isinstance(inner.args[1], ast.Name):
                    cls_name = inner.args[1].id
                elif isinstance(inner, ast.Assign) and isinstance(inner.targets[0], ast.Subscript) and \
                        isinstance(inner.value, ast.Name):
                    cls_name = inner.value.id
                else:
                    continue
                found = resolve(cls_name)
                for method in methods:
                    if found and method not in mapping:
                        mapping[method] = (*found, inner.lineno)
    return mapping


def find_class(source: ReleaseSource, file: str, name: str, depth: int = 0) -> tuple[str, ast.ClassDef] | None:
    """The class `name` as file `file` defines or imports it."""
    tree = source.tree(file)
    if tree is None or depth > 5:
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return file, node
    imported = imports_in(tree.body).get(name)
    if imported:
        target = module_file(imported[0], imported[1], file, source)
        if target:
            return find_class(source, target, imported[2], depth + 1)
    return None


def class_chain(source: ReleaseSource, file: str, name: str) -> list[tuple[str, ast.ClassDef]]:
    """The class and its bases vLLM defines (first base first), down to QuantizationConfig."""
    chain, todo = [], [(file, name)]
    while todo and len(chain) < 12:
        found = find_class(source, *todo.pop(0))
        if found is None:
            continue
        chain.append(found)
        where, cls = found
        todo = [(where, b.id) for b in cls.bases if isinstance(b, ast.Name)] + todo
    return chain


def method_of(chain, name: str) -> tuple[str, ast.FunctionDef] | None:
    for file, cls in chain:
        if (func := function(cls.body, name)) is not None:
            return file, func
    return None


def returned(func: ast.FunctionDef) -> ast.expr | None:
    """The value of the function's only return statement (None when there are several or none)."""
    returns = [n for n in ast.walk(func) if isinstance(n, ast.Return) and n.value is not None]
    return returns[0].value if len(returns) == 1 else None


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


def message_template(node: ast.expr) -> str:
    """A string / f-string / their concatenation as text with {0}, {1}, ... for its values, in order."""
    parts: list[str] = []
    count = 0

    def add(n: ast.AST) -> None:
        nonlocal count
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            parts.append(n.value.replace("{", "{{").replace("}", "}}"))
        elif isinstance(n, ast.JoinedStr):
            for value in n.values:
                add(value)
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add):
            add(n.left)
            add(n.right)
        else:  # a formatted value or any other expression
            parts.append(f"{{{count}}}")
            count += 1

    add(node)
    return "".join(parts)


def messages(source: ReleaseSource) -> dict:
    """vLLM's refusal messages (the first raise of each, in MESSAGE_FILES order) with file:line."""
    found: dict[str, dict] = {}
    for file in MESSAGE_FILES:
        tree = source.tree(file)
        if tree is None:
            continue
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args):
                continue
            template = message_template(node.exc.args[0])
            for key, phrase in MESSAGES.items():
                if key not in found and phrase in template:
                    found[key] = {"template": template, "where": f"{file}:{node.lineno}"}
    return found


def overrides_order(source: ReleaseSource) -> dict:
    for file in MESSAGE_FILES:
        tree = source.tree(file)
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "overrides"
                                                    for t in node.targets):  # fmt: skip
                values = string_list(node.value)
                if values:
                    return {"values": values, "where": f"{file}:{node.lineno}"}
    return {"values": None, "where": None}


def release_facts(source: ReleaseSource) -> dict:
    """One release's quantization facts (see the module docstring)."""
    methods, methods_where = registered_methods(source)
    classes = method_classes(source, methods)
    init = source.tree(INIT)
    deprecated = assignment(init.body, "DEPRECATED_QUANTIZATION_METHODS")
    table = {}
    for method in methods:
        if method not in classes:
            table[method] = {"config_class": None, "mapped_at": None, "min_capability": None,
                             "min_capability_where": None, "min_capability_expr": None, "act_dtypes": None,
                             "act_dtypes_where": None, "override_where": None, "override_mentions": [],
                             "override_when_asked": []}  # fmt: skip
            continue
        file, cls, line = classes[method]
        chain = class_chain(source, file, cls)
        cap, dtypes = min_capability(chain), act_dtypes(chain)
        override_where, mentions, asked = override(source, chain)
        table[method] = {
            "config_class": f"{chain[0][0]}:{chain[0][1].name}" if chain else f"{file}:{cls}",
            "mapped_at": f"{INIT}:{line}",
            "min_capability": cap["value"], "min_capability_where": cap["where"], "min_capability_expr": cap["expr"],
            "act_dtypes": dtypes["values"], "act_dtypes_where": dtypes["where"],
            "override_where": override_where, "override_mentions": mentions, "override_when_asked": asked,
        }  # fmt: skip
    return {
        "methods": table,
        "registered": methods,  # vLLM's order: its "Must be one of [...]" lists them so
        "methods_where": methods_where,
        "deprecated": (string_list(deprecated.value) or []) if deprecated else [],
        "deprecated_where": f"{INIT}:{deprecated.lineno}" if deprecated else None,
        "overrides_order": overrides_order(source),
        "messages": messages(source),
    }


def release_file(version: str, source: ReleaseSource) -> dict:
    """What `<out>/<version>.json` holds."""
    return {"format": FORMAT, "version": version, **release_facts(source)}


def dumps(data: dict) -> str:
    """The stored spelling: sorted keys, one line per method, UTF-8 kept, one trailing newline."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"


def release_of(path: Path) -> str | None:
    """The vLLM version of a wheel file name, or of a tree fetched by kvdoctor (its folder name)."""
    if path.is_file():
        match = _WHEEL.search(path.name)
        return match.group(1) if match else None
    return path.name if re.fullmatch(r"\d+\.\d+\.\d+", path.name) else None


def sources(wheels: Path | None, trees: list[Path]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for tree_dir in trees:  # a folder of release trees (<version>/vllm/...) or one tree
        for path in ([tree_dir] if (tree_dir / "vllm").is_dir() else sorted(tree_dir.iterdir())):
            if (version := release_of(path)) and (path / INIT).is_file():
                found[version] = path
    for path in sorted(wheels.glob("vllm-*.whl")) if wheels and wheels.is_dir() else ():
        if version := release_of(path):
            found[version] = path  # a whole wheel wins over a fetched tree
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kvdoctor.builders.vllm_pack.quantization",
                                 description=__doc__.split("\n\n")[0])  # fmt: skip
    ap.add_argument("--wheels", type=Path, default=Path.home() / ".cache" / "kvdoctor" / "wheels")
    ap.add_argument("--trees", type=Path, nargs="*", default=[],
                    help="folders of unpacked release trees, <version>/vllm/... (e.g. fetched by range requests)")
    ap.add_argument("--versions", nargs="*", default=None)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--check", action="store_true", help="recompute and compare with --out; write nothing")
    args = ap.parse_args(argv)
    found = sources(args.wheels, args.trees)
    failed = 0
    for version in sorted(args.versions or found, key=pack_order):
        if version not in found:
            print(f"{version}: no wheel or tree", file=sys.stderr)
            failed += 1
            continue
        try:
            text = dumps(release_file(version, ReleaseSource(found[version])))
        except (ValueError, SyntaxError, OSError) as exc:
            print(f"{version}: {exc}", file=sys.stderr)
            failed += 1
            continue
        path = args.out / f"{version}.json"
        if args.check:
            same = path.is_file() and path.read_text("utf-8") == text
            failed += not same
            print(f"{version}: {'identical' if same else 'DIFFERS'} ({path})", file=sys.stderr)
        else:
            args.out.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"{version}: {text.count('config_class')} methods -> {path}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
