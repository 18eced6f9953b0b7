"""Draw kvdoctor's package imports as a Mermaid graph (docs/architecture.md), in the layer order of
tests/test_layers.py: each package above what it imports. `--check` fails when the committed drawing is stale."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "kvdoctor"
DRAWING = ROOT / "docs" / "architecture.md"


def layers() -> list[set[str]]:
    spec = importlib.util.spec_from_file_location("test_layers", ROOT / "tests" / "test_layers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.LAYERS


def package_edges() -> set[tuple[str, str]]:
    """(importer, imported) between top-level packages, imports inside functions included."""
    edges = set()
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        source = parts[0] if len(parts) > 1 else parts[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kvdoctor."):
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.startswith("kvdoctor.")]
            for name in names:
                target = name.split(".")[1]
                if target != source:
                    edges.add((source, target))
    return edges


def drawing() -> str:
    order = layers()
    layer_of = {name: i for i, names in enumerate(order) for name in names}
    edges = sorted(package_edges(), key=lambda e: (-layer_of.get(e[0], -1), e[0], -layer_of.get(e[1], -1), e[1]))
    lines = [
        "# kvdoctor's packages and their imports",
        "",
        "Drawn from the code by `python tools/draw_imports.py` (a test keeps it current). Layers from the bottom"
        " (0) up, as `tests/test_layers.py` lists them; an arrow points from a package to one it imports, always"
        " to the same layer or below. Imports inside functions count.",
        "",
        "```mermaid",
        "flowchart TD",
    ]
    for i in reversed(range(len(order))):
        names = " ".join(sorted(order[i]))
        lines.append(f"  subgraph L{i}[\"{i}: {names}\"]")
        lines += [f"    {name.strip('_')}[\"{name}\"]" for name in sorted(order[i])]
        lines.append("  end")
    lines += [f"  {a.strip('_')} --> {b.strip('_')}" for a, b in edges]
    lines += ["```", ""]
    upward = [f"{a} -> {b}" for a, b in edges if layer_of.get(b, -1) > layer_of.get(a, -1)]
    lines.append(f"{len(edges)} arrows between {len(layer_of)} packages; arrows up a layer: {len(upward)}.")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/architecture.md is stale")
    args = parser.parse_args()
    text = drawing()
    if args.check:
        current = DRAWING.read_text(encoding="utf-8") if DRAWING.is_file() else ""
        if current != text:
            print(f"{DRAWING.relative_to(ROOT)} is stale: run python tools/draw_imports.py", file=sys.stderr)
            return 1
        return 0
    DRAWING.write_text(text, encoding="utf-8")
    print(f"wrote {DRAWING.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
