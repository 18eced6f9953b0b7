"""Build kvdoctor's message index: every error message vLLM (and the dependencies its failures surface from) can
print, as a template with its location and the releases that have it.

    .venv/bin/python scripts/build_message_index.py [--wheels DIR] [--out kvdoctor/data/message_index/index.json.gz]

For each vllm-*.whl in DIR (default ~/.cache/kvdoctor/wheels) every vllm/**/*.py is AST-walked for
`raise X(<message>)` (a message held in a local variable is followed to its assignment) and
`logger.error/exception/critical/warning(...)` / `warnings.warn(...)` calls whose message is a string, an
f-string, a %-format, a `.format` call or a concatenation of those. The literal parts are kept, every
placeholder becomes a wildcard; no code is stored. Identical (template, type, file, function) entries across
releases become one entry with release ranges. Triton, torch (CUDA init) and FlashInfer messages come from
their installed packages or wheels, when present. The output is gzip JSON written deterministically (a
rebuild from the same inputs is byte-identical).
"""

from __future__ import annotations

import argparse
import ast
import gzip
import hashlib
import io
import json
import os
import re
import sys
import zipfile
from pathlib import Path

INDEX_FORMAT = 2
LOG_METHODS = {"error": "error", "exception": "error", "critical": "critical", "fatal": "critical",
               "warning": "warning", "warn": "warning", "error_once": "error", "warning_once": "warning"}
MIN_PREFIX = 30  # kvdoctor/explain/message_index.py: an opening literal this long identifies a cut-off line
MIN_LITERAL = 12  # alphanumeric characters of literal text a template needs to be worth matching
WILD = None  # a placeholder in a template's parts list
_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?[diouxXeEfFgGcrsa%]")
_FORMAT_FIELD = re.compile(r"\{\{|\}\}|\{[^{}]*\}")
_WHEEL_VERSION = re.compile(r"^vllm-(\d+\.\d+\.\d+(?:\.post\d+)?)-")

# Where vLLM failures surface from its dependencies: (package, folders of the package worth indexing).
DEPENDENCIES = {
    "triton": ("triton/compiler", "triton/runtime", "triton/backends/nvidia", "triton/language", "triton/_C"),
    "torch": ("torch/cuda", "torch/utils/cpp_extension.py", "torch/_inductor/runtime", "torch/distributed/distributed_c10d.py"),
    "flashinfer": ("flashinfer/*.py", "flashinfer/jit"),
}


# ------------------------------------------------------------------ templates from AST message expressions

def template_of(node: ast.AST, local: dict[str, ast.AST], depth: int = 0) -> list | None:
    """The message expression as a list of literal strings and WILD placeholders, or None if not a message."""
    if depth > 6:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        parts: list = []
        for value in node.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                parts.append(value.value)
            else:
                parts.append(WILD)
        return parts
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = template_of(node.left, local, depth + 1)
        right = template_of(node.right, local, depth + 1)
        if left is None and right is None:
            return None
        return (left or [WILD]) + (right or [WILD])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left = template_of(node.left, local, depth + 1)
        return _split_literals(left, _PERCENT) if left else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        base = template_of(node.func.value, local, depth + 1)
        return _split_literals(base, _FORMAT_FIELD, braces=True) if base else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join":
        return [WILD]
    if isinstance(node, ast.Name) and node.id in local:
        return template_of(local[node.id], {}, depth + 1)
    return None


def _split_literals(parts: list, pattern: re.Pattern[str], braces: bool = False) -> list:
    out: list = []
    for part in parts:
        if part is WILD:
            out.append(WILD)
            continue
        last = 0
        for match in pattern.finditer(part):
            text = match.group(0)
            if text in ("%%", "{{", "}}"):
                continue
            out.append(part[last:match.start()])
            out.append(WILD)
            last = match.end()
        out.append(part[last:])
    if braces:
        out = [p.replace("{{", "{").replace("}}", "}") if p is not WILD else p for p in out]
    else:
        out = [p.replace("%%", "%") if p is not WILD else p for p in out]
    return out


def normalise_parts(parts: list) -> list | None:
    """Merge neighbours, keep the first line of a multi-line message, drop templates with too little literal text."""
    merged: list = []
    for part in parts:
        if part is WILD:
            if not merged or merged[-1] is not WILD:
                merged.append(WILD)
        elif part:
            if merged and merged[-1] is not WILD:
                merged[-1] += part
            else:
                merged.append(part)
    # A log line holds one line of the message: cut at the first newline that leaves enough text.
    cut: list = []
    for part in merged:
        if part is not WILD and "\n" in part:
            head = part.split("\n", 1)[0]
            if head:
                cut.append(head)
            if _literal_size(cut) >= MIN_LITERAL:
                break
            cut = [WILD] if not cut else cut + [WILD]
            tail = part.rsplit("\n", 1)[1]
            if tail:
                cut.append(tail)
            continue
        cut.append(part)
    while cut and cut[-1] is not WILD and not cut[-1].strip():
        cut.pop()
    if _literal_size(cut) < MIN_LITERAL:
        return None
    # Leading/trailing whitespace of the literals is unreliable once a logger formats the line.
    if cut and cut[0] is not WILD:
        cut[0] = cut[0].lstrip()
    if cut and cut[-1] is not WILD:
        cut[-1] = cut[-1].rstrip()
    return cut


def _literal_size(parts: list) -> int:
    return sum(sum(ch.isalnum() for ch in p) for p in parts if p is not WILD)


# ------------------------------------------------------------------ walking one source file

class _Collector(ast.NodeVisitor):
    def __init__(self, path: str):
        self.path = path
        self.scope: list[str] = []
        self.locals: list[dict[str, ast.AST]] = [{}]
        self.found: list[tuple] = []

    def _function(self, node):
        self.scope.append(node.name)
        assigned: dict[str, ast.AST] = {}
        for child in ast.walk(node):
            if isinstance(child, ast.Assign) and len(child.targets) == 1 and isinstance(child.targets[0], ast.Name):
                if template_of(child.value, {}) is not None:
                    assigned.setdefault(child.targets[0].id, child.value)
            elif isinstance(child, ast.AugAssign) and isinstance(child.target, ast.Name):
                pass
        self.locals.append(assigned)
        self.generic_visit(node)
        self.locals.pop()
        self.scope.pop()

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node):
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    def visit_Raise(self, node):
        exc = node.exc
        if isinstance(exc, ast.Call):
            name = _callee(exc.func)
            if name and exc.args:
                self._add("raise", name, exc.args[0])
        self.generic_visit(node)

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in LOG_METHODS and node.args:
            owner = _callee(func.value) or ""
            if "log" in owner.lower():
                # logger.error("... %s ...", value): the logger fills the %-placeholders
                self._add(LOG_METHODS[func.attr], None, node.args[0], percent=len(node.args) > 1)
            elif owner == "warnings":
                self._add("warning", None, node.args[0])
        self.generic_visit(node)

    def _add(self, kind: str, exc_type: str | None, message: ast.AST, percent: bool = False):
        parts = template_of(message, self.locals[-1])
        if parts is None:
            return
        if percent:
            parts = _split_literals(parts, _PERCENT)
        parts = normalise_parts(parts)
        if parts is None:
            return
        function = self.scope[-1] if self.scope else "<module>"
        self.found.append((kind, exc_type, tuple(parts), self.path, function))


def _callee(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def templates_in_source(source: bytes, path: str) -> list[tuple]:
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError):
        return []
    collector = _Collector(path)
    collector.visit(tree)
    return collector.found


# ------------------------------------------------------------------ sources: wheels and installed packages

def wheel_sources(wheel: Path, prefix: str = "vllm/"):
    with zipfile.ZipFile(wheel) as archive:
        for name in sorted(archive.namelist()):
            if name.startswith(prefix) and name.endswith(".py"):
                yield name, archive.read(name)


def installed_sources(package: str, folders: tuple[str, ...]):
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None, []
    root = Path(list(spec.submodule_search_locations)[0]).parent
    from importlib.metadata import version

    files = []
    for folder in folders:
        if folder.endswith("/*.py"):
            candidates = sorted((root / folder[:-5]).glob("*.py"))
        else:
            path = root / folder
            candidates = [path] if path.is_file() else sorted(path.rglob("*.py")) if path.is_dir() else []
        for file in candidates:
            files.append((file.relative_to(root).as_posix(), file.read_bytes()))
    return version(package), files


def version_key(version: str) -> tuple:
    return tuple(int(x) if x.isdigit() else 0 for x in re.split(r"[.+]", version.replace("post", "")))


def release_ranges(have: set[str], order: list[str]) -> str:
    """'0.20.0-0.25.1,0.27.0-0.34.0': contiguous runs of the ordered releases."""
    runs: list[list[str]] = []
    previous = False
    for release in order:
        if release in have:
            if previous:
                runs[-1][1] = release
            else:
                runs.append([release, release])
            previous = True
        else:
            previous = False
    return ",".join(a if a == b else f"{a}-{b}" for a, b in runs)


def collect(package: str, releases: list[tuple[str, list[tuple[str, bytes]]]]) -> list[dict]:
    cache: dict[str, list[tuple]] = {}
    where: dict[tuple, set[str]] = {}
    order = [release for release, _ in releases]
    for release, files in releases:
        for path, source in files:
            digest = hashlib.sha1(source).hexdigest()
            if digest not in cache:
                cache[digest] = templates_in_source(source, path)
            for entry in cache[digest]:
                where.setdefault(entry, set()).add(release)
        print(f"  {package} {release}: {len(files)} files, {len(where)} templates so far", file=sys.stderr)
    entries = []
    for (kind, exc_type, parts, path, function), have in where.items():
        entries.append({
            "package": package,
            "kind": kind,
            "type": exc_type,
            "parts": [p if p is not WILD else None for p in parts],
            "file": path,
            "function": function,
            "releases": release_ranges(have, order),
        })
    return entries


def _in_folder(name: str, folder: str) -> bool:
    if folder.endswith("/*.py"):
        return name.startswith(folder[:-4]) and "/" not in name[len(folder) - 4:]
    return name == folder or name.startswith(folder.rstrip("/") + "/")


def dependency_wheel(package: str, folders: tuple[str, ...], deps_dir: Path | None):
    """(version, files) from a `{package}*.whl` in deps_dir (for a dependency that is not installed)."""
    if deps_dir is None:
        return None, []
    for wheel in sorted(deps_dir.glob(f"{package}*.whl")):
        version = wheel.name.split("-")[1]
        with zipfile.ZipFile(wheel) as archive:
            names = sorted(n for n in archive.namelist() if n.endswith(".py") and any(_in_folder(n, f) for f in folders))
            return version, [(n, archive.read(n)) for n in names]
    return None, []


def build(wheels_dir: Path, deps_dir: Path | None = None) -> dict:
    wheels = {}
    for wheel in wheels_dir.glob("vllm-*.whl"):
        match = _WHEEL_VERSION.match(wheel.name)
        if match:
            wheels.setdefault(match.group(1), wheel)
    versions = sorted(wheels, key=version_key)
    if not versions:
        raise SystemExit(f"no vllm-*.whl in {wheels_dir}")
    entries = collect("vllm", [(v, list(wheel_sources(wheels[v]))) for v in versions])
    packages = {"vllm": versions}
    for package, folders in DEPENDENCIES.items():
        version, files = installed_sources(package, folders)
        if version is None:
            version, files = dependency_wheel(package, folders, deps_dir)
        if version is None:
            print(f"  {package}: not installed, skipped", file=sys.stderr)
            continue
        entries += collect(package, [(version, files)])
        packages[package] = [version]
    return pack(entries, packages)


_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{3,}")  # kvdoctor/explain/message_index.py splits log lines the same way


def pack(entries: list[dict], packages: dict[str, list[str]]) -> dict:
    """Templates grouped by their rarest literal word (the look-up key at match time), locations shared."""
    entries = sorted(entries, key=lambda e: (e["package"], e["file"], e["function"], e["kind"], e["type"] or "",
                                            json.dumps(e["parts"])))
    files = sorted({e["file"] for e in entries})
    file_id = {f: i for i, f in enumerate(files)}
    locations, location_id, by_parts = [], {}, {}
    for e in entries:
        location = (e["package"], e["kind"], e["type"], file_id[e["file"]], e["function"], e["releases"])
        if location not in location_id:
            location_id[location] = len(locations)
            locations.append(list(location))
        by_parts.setdefault(json.dumps(e["parts"]), []).append(location_id[location])
    words = {key: set(_WORD.findall(" ".join(p for p in json.loads(key) if p))) for key in by_parts}
    frequency: dict[str, int] = {}
    for found in words.values():
        for word in found:
            frequency[word] = frequency.get(word, 0) + 1
    anchors: dict[str, list] = {}
    for key in sorted(by_parts):
        if not words[key]:
            continue
        anchor = min(words[key], key=lambda w: (frequency[w], -len(w), w))
        anchors.setdefault(anchor, []).append([json.loads(key), sorted(set(by_parts[key]))])
    # A line cut short keeps only a template's opening: key those by the rarest word of the opening literal.
    prefixes: dict[str, list] = {}
    for anchor in sorted(anchors):
        for position, (parts, _) in enumerate(anchors[anchor]):
            first = next((p for p in parts if p is not None), "")
            opening = set(_WORD.findall(first)) if len(first) >= MIN_PREFIX else set()
            if opening:
                word = min(opening, key=lambda w: (frequency[w], -len(w), w))
                prefixes.setdefault(word, []).append([anchor, position])
    return {"format": INDEX_FORMAT, "packages": packages, "files": files, "locations": locations, "anchors": anchors,
            "prefixes": prefixes}


def unpack(index: dict) -> list[dict]:
    """The entries a packed index was made from (to re-pack it without re-reading the wheels)."""
    entries = []
    for group in index["anchors"].values():
        for parts, location_ids in group:
            for number in location_ids:
                package, kind, exc_type, file_id, function, releases = index["locations"][number]
                entries.append({"package": package, "kind": kind, "type": exc_type, "parts": parts,
                                "file": index["files"][file_id], "function": function, "releases": releases})
    return entries


def write(index: dict, out: Path) -> None:
    data = json.dumps(index, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as gz:
        gz.write(data)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(buffer.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheels", type=Path, default=Path(os.environ.get("KVDOCTOR_VLLM_WHEELS", Path.home() / ".cache" / "kvdoctor" / "wheels")))
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).resolve().parents[1] / "kvdoctor/data/message_index/index.json.gz")
    parser.add_argument("--deps", type=Path, default=None,
                        help="folder with wheels of dependencies that are not installed (flashinfer_python-*.whl)")
    parser.add_argument("--repack", type=Path, default=None,
                        help="re-pack an existing index (after a change to the packing) instead of reading wheels")
    args = parser.parse_args()
    if args.repack:
        old = json.loads(gzip.decompress(args.repack.read_bytes()))
        index = pack(unpack(old), old["packages"])
    else:
        index = build(args.wheels, args.deps)
    write(index, args.out)
    print(f"{sum(len(g) for g in index['anchors'].values())} templates from {index['packages']} -> {args.out} "
          f"({args.out.stat().st_size // 1024} KiB)", file=sys.stderr)


if __name__ == "__main__":
    main()
