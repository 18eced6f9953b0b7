"""The architecture map, drawn from the imports: packages in flow order, one-way layers, no cycle at any depth."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "kvdoctor"
# Bottom to top. A package imports only its own layer's and lower layers' packages (never one above it).
LAYERS = [
    {"base"},                         # user errors, the cache folder, safe YAML, version ordering
    {"model"},                        # the records handed between stages: Facts, dry-run results, Report
    {"data", "schemas"},              # bundled catalogues and their readers; the report's JSON schema
    {"vllm_pack"},                    # the knowledge pack: store, release model, candidates, serve parser, selection
    {"builders"},                     # the pack and message-index builders (run as subprocesses; nothing imports them)
    {"inputs"},                       # what the user typed, checked (exit 2)
    {"facts"},                        # probes + collection + what the pack says of them
    {"dryrun"},                       # compiling vLLM's real kernels for the target
    {"rules"},                        # rules as data, the engine that evaluates them over facts
    {"check"},                        # run, reconcile with the dry run, verify fixes
    {"explain", "scan", "matrix", "verify"},  # the other jobs, beside check
    {"report"},                       # every output format
    {"commands"},                     # one module per command
    {"cli", "__main__"},
]


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(p for p in parts if p != "__init__") or "__init__"


def _imports() -> dict[str, set[str]]:
    """module (dotted, under kvdoctor) -> the kvdoctor modules it imports, at any depth of the file."""
    modules = {_module_name(p) for p in PACKAGE.rglob("*.py")}
    found = {}
    for path in PACKAGE.rglob("*.py"):
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kvdoctor"):
                base = node.module.removeprefix("kvdoctor").lstrip(".")
                for alias in node.names:  # `from kvdoctor.pkg import module` imports the module
                    sub = f"{base}.{alias.name}" if base else alias.name
                    targets.add(sub if sub in modules else base)
            elif isinstance(node, ast.Import):
                targets |= {a.name.removeprefix("kvdoctor.") for a in node.names if a.name.startswith("kvdoctor.")}
        found[_module_name(path)] = {t for t in targets if t}
    return found


def _layer(module: str) -> int | None:
    top = module.split(".")[0]
    return next((i for i, names in enumerate(LAYERS) if top in names), None)


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    return sorted(a for a in graph if reaches(a, a, {a}))


def test_every_top_level_package_has_a_layer():
    tops = {m.split(".")[0] for m in _imports()} - {"__init__"}
    assert {t for t in tops if _layer(t) is None} == set()


def test_no_import_runs_back_up_a_layer():
    upward = [f"{m} -> {t}" for m, targets in _imports().items() for t in targets
              if _layer(m) is not None and _layer(t) is not None and _layer(t) > _layer(m)]  # fmt: skip
    assert upward == []


def test_commands_never_import_the_cli_module():
    assert [m for m, targets in _imports().items() if m.startswith("commands") and "cli" in targets] == []


def test_no_cycle_between_top_level_packages():
    graph: dict[str, set[str]] = {}
    for module, targets in _imports().items():
        graph.setdefault(module.split(".")[0], set()).update(t.split(".")[0] for t in targets)
    for node in graph:
        graph[node].discard(node)
    assert _cycles(graph) == []


def test_no_cycle_between_modules_even_through_imports_inside_functions():
    """A loop hidden behind an import inside a function is still a loop: module A needs B needs A."""
    graph = {m: {t for t in targets if t != m} for m, targets in _imports().items()}
    assert _cycles(graph) == []


def test_no_private_name_is_imported_from_another_module():
    """A `_name` imported across modules marks a helper living in the wrong module."""
    private = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kvdoctor"):
                private += [f"{_module_name(path)}: {node.module}.{a.name}" for a in node.names
                            if a.name.startswith("_") and not a.name.startswith("__")]  # fmt: skip
    assert private == []


def test_the_drawing_in_docs_is_current():
    """docs/architecture.md is drawn from the imports by tools/draw_imports.py; a change of arrows redraws it."""
    import subprocess
    import sys

    tool = PACKAGE.parent / "tools" / "draw_imports.py"
    done = subprocess.run([sys.executable, str(tool), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "arrows up a layer: 0." in (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
