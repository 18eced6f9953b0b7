"""Reading a vLLM release's Python source statically (ast; nothing imported), for the quantization extractor:
the files of a wheel or an unpacked tree, where a module lives, what a module imports, constant lists, classes
and their bases, a method along the class chain and what it returns."""

from __future__ import annotations

import ast
import zipfile
from pathlib import Path


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
