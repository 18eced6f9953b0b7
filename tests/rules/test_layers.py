"""The structure drawn from the imports: one-way layers, no cycle, the command line thin."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "kvdoctor"
# Lower layers never import higher ones (a layer may import its own and any lower).
LAYERS = [
    {"errors", "yaml_safe", "cache_dir", "facts", "data", "schemas", "turboquant", "dtypes", "vllm_pack", "releases"},
    {"probes", "dryrun", "serve_argv", "kv_dtypes", "attention", "derived", "report", "rules", "check_flags",
     "check_inputs", "vllm_sources", "config_file", "collect"},
    {"reconcile", "verify", "check", "explain", "formats", "matrix", "scan"},
    {"commands"},
    {"cli", "__main__"},
]


def _imports() -> dict[str, set[str]]:
    """module (dotted, under kvdoctor) -> the kvdoctor modules it imports, at any depth of the file."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        module = ".".join(p for p in parts if p != "__init__") or "__init__"
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kvdoctor"):
                targets.add(node.module.removeprefix("kvdoctor").lstrip("."))
            elif isinstance(node, ast.Import):
                targets |= {a.name.removeprefix("kvdoctor.") for a in node.names if a.name.startswith("kvdoctor.")}
        found[module] = {t for t in targets if t}
    return found


def _layer(module: str) -> int | None:
    top = module.split(".")[0]
    return next((i for i, names in enumerate(LAYERS) if top in names), None)


def test_every_top_level_module_has_a_layer():
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

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    assert [a for a in graph if reaches(a, a, {a})] == []
