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
from pathlib import Path

from kvdoctor.base.versions import pack_order
from kvdoctor.builders.vllm_pack.quantization_classes import act_dtypes, min_capability, override
from kvdoctor.builders.vllm_pack.quantization_mixed import mixed_precision_facts
from kvdoctor.builders.vllm_pack.quantization_schemes import marlin_facts, scheme_facts
from kvdoctor.builders.vllm_pack.quantization_source import (
    ReleaseSource, assignment, class_chain, function, imports_in, message_template, module_file, string_list,
    walk_statements,
)  # fmt: skip
from kvdoctor.data import DATA_DIR

FORMAT = 1
QUANT_PKG = "vllm/model_executor/layers/quantization"
INIT = f"{QUANT_PKG}/__init__.py"
OUT = DATA_DIR / "vllm_pack" / "quantization"
# vLLM's messages, found by a phrase each keeps across releases; placeholders {0}, {1}, ... in their order.
MESSAGES = {
    "capability": "is not supported for the current GPU",
    "unknown_method": "Unknown quantization method",
    "mismatch": "does not match the quantization method specified",
    "act_dtype": "is not supported for quantization method",
    "deprecated": "is deprecated and will be removed",
}
MESSAGE_FILES = ("vllm/config/vllm.py", "vllm/config/model.py", "vllm/config/__init__.py", "vllm/config.py",
                 "vllm/model_executor/model_loader/loader.py")  # 0.5-0.6: the capability check is the loader's
_RELEASE = r"\d+\.\d+\.\d+(?:\.\d+)?(?:\.post\d+)?"  # 0.8.5.post1 and 0.10.1.1 are releases of their own
_WHEEL = re.compile(rf"vllm-({_RELEASE})(?:-\d+)?-.*\.whl$")


def registered_methods(source: ReleaseSource) -> tuple[list[str], str]:
    """QUANTIZATION_METHODS (the Literal's values, or the list literal older releases write) and where."""
    tree = source.tree(INIT)
    if tree is None:
        raise ValueError(f"{INIT} is not in this release")
    for name in ("QuantizationMethods", "QUANTIZATION_METHODS"):
        node = assignment(tree.body, name)
        values = string_list(node.value) or _dict_keys(node.value) if node is not None else None
        if values:
            return values, f"{INIT}:{node.lineno}"
    raise ValueError(f"{INIT}: no literal QuantizationMethods / QUANTIZATION_METHODS")


def _dict_keys(node) -> list[str] | None:
    """The keys of a dict literal whose keys are all strings (before 0.6.4 QUANTIZATION_METHODS maps each method to
    its config class), else None."""
    if isinstance(node, ast.Dict) and node.keys and all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                                         for k in node.keys):  # fmt: skip
        return [k.value for k in node.keys]
    return None


def method_classes(source: ReleaseSource, methods: list[str]) -> dict[str, tuple[str, str, int]]:
    """method -> (file, class name, line of the mapping) from get_quantization_config's method_to_config (before
    0.6.4: the module's QUANTIZATION_METHODS dict)."""
    tree = source.tree(INIT)
    registry = assignment(tree.body, "QUANTIZATION_METHODS")
    if registry is not None and _dict_keys(registry.value):
        names = imports_in(tree.body)
        mapping = {}
        for key, cls in zip(registry.value.keys, registry.value.values):
            if isinstance(cls, ast.Name) and cls.id in names:
                module, level, name = names[cls.id]
                file = module_file(module, level, INIT, source)
                if file:
                    mapping[key.value] = (file, name, key.lineno)
        return mapping
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
    mixed = mixed_precision_facts(source)  # ModelOpt MIXED_PRECISION per layer (quantization_mixed.py), 0.17.1+
    return {
        "methods": table,
        "registered": methods,  # vLLM's order: its "Must be one of [...]" lists them so
        "methods_where": methods_where,
        "deprecated": (string_list(deprecated.value) or []) if deprecated else [],
        "deprecated_where": f"{INIT}:{deprecated.lineno}" if deprecated else None,
        "overrides_order": overrides_order(source),
        "messages": messages(source),
        "ct_schemes": scheme_facts(source),  # compressed-tensors' per-layer schemes (quantization_schemes.py)
        "marlin": marlin_facts(source),  # what awq_marlin / gptq_marlin's overrides check before they claim
    } | ({"modelopt_mixed": mixed} if mixed else {})


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
    return path.name if re.fullmatch(_RELEASE, path.name) else None


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
