"""A vLLM source tree inside the scanned checkout (a research fork, a patched copy): a command run by the host's
Python with no image and no pin may run that tree's vLLM, whose parser may add options no release has. Found by
its parser's file (vllm/engine/arg_utils.py) in the command's folder, a folder above it inside the same checkout
(project_pins.checkout_folders), or up to two folders below those (vllm-fork/, third_party/vllm/)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from kvdoctor.scan.project_pins import checkout_folders
from kvdoctor.scan.workload import Workload

PARSER_FILE = Path("vllm") / "engine" / "arg_utils.py"
VERSION = re.compile(r"""^__version__\s*=\s*["']([^"']+)["']""", re.MULTILINE)


def with_source_tree(workload: Workload) -> Workload:
    """The workload with the vLLM source tree its host's Python may run, when no image or pin names a release."""
    if workload.image or workload.vllm_pin or not Path(workload.file).is_file():
        return workload
    tree = source_tree(Path(workload.file))
    if tree is None:
        return workload
    version = _declared_version(tree)
    said = f" (its vllm/__init__.py says {version})" if version else ""
    where = f"the vLLM source tree at {tree}"
    return replace(workload, vllm_tree=where,
                   notes=workload.notes + (f"{where}{said} may be the vLLM this command runs (a fork or a patched "
                                           "copy): options its own parser adds are not judged as refused",))  # fmt: skip


def source_tree(path: Path) -> Path | None:
    """The folder holding a vLLM package with its own parser, nearest the file: in its folder or a folder above it
    up to its checkout's root (a folder with .git), or below the file's folder or that root. Without a checkout root
    in reach, only the file's own folder and those below it (a sibling folder is another project)."""
    chain, root = checkout_folders(path)
    start = chain[0]
    for folder in chain if root else [start]:
        if (folder / PARSER_FILE).is_file():
            return folder / "vllm"
    for folder in dict.fromkeys([start] + ([root] if root else [])):
        found = next((p / "vllm" for p in _below(folder, 2) if (p / PARSER_FILE).is_file()), None)
        if found is not None:
            return found
    return None


def _below(folder: Path, depth: int) -> list[Path]:
    """The folders under this one, `depth` levels deep at most, nearest first (hidden ones left out)."""
    try:
        children = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []
    return children + ([g for c in children for g in _below(c, depth - 1)] if depth > 1 else [])


def _declared_version(tree: Path) -> str | None:
    try:
        match = VERSION.search((tree / "__init__.py").read_text(encoding="utf-8", errors="replace")[:200_000])
    except OSError:
        return None
    return match.group(1) if match else None
