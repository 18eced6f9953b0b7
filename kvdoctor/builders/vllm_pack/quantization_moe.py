"""vLLM's own fused-MoE backend choice and dense FP4 kernel choice per GPU capability, asked of each release wheel
at hand (issue 25, round 2).

    python -m kvdoctor.builders.vllm_pack.quantization_moe --python ~/.cache/kvdoctor-packenv/bin/python \
        [--wheels ~/.cache/kvdoctor/wheels] [--versions V ...] [--check]

For each release the child (child_quantization.run_moe_backends) imports vLLM in the pack builder's venv, stubs the
platform's capability, answers vLLM's "is this kernel package importable" helpers as the wheel ships them, and
calls the release's own select_fp8_moe_backend / select_mxfp4_moe_backend / select_nvfp4_moe_backend
(fused_moe/oracle/) and init_nvfp4_linear_kernel / init_mxfp4_linear_kernel (kernels/linear/) for each capability
in CAPABILITIES. What it records per capability: the backend (or kernel class) vLLM picks, or its refusal in its
own words. Stored in kvdoctor/data/vllm_pack/quantization/moe_backends.json.gz (sorted keys, gzip with no
timestamp so a rebuild is byte-identical; --check recomputes).
Releases whose wheel is not at hand are not in the file: check leaves their MoE backend undecided.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import tempfile
import zipfile
from pathlib import Path

from kvdoctor.base.versions import pack_order

OUT = Path(__file__).resolve().parents[2] / "data" / "vllm_pack" / "quantization" / "moe_backends.json.gz"
FORMAT = 1
# V100, T4, A100, A10/A40, L4/Ada, H100/H200, B200/GB200, RTX PRO 6000 Blackwell
CAPABILITIES = [[7, 0], [7, 5], [8, 0], [8, 6], [8, 9], [9, 0], [10, 0], [12, 0]]
# Where vLLM asks at run time whether a kernel package is importable: what a GPU install of the wheel has.
# flashinfer: the wheel's Requires-Dist pin; deep_gemm / triton_kernels: vendored under vllm/third_party/.
SHIPPED = {"flashinfer": "flashinfer-python", "deep_gemm": "vllm/third_party/deep_gemm/",
           "triton_kernels": "vllm/third_party/triton_kernels/"}  # fmt: skip


def kernel_packages(wheel: Path, pins: dict[str, str]) -> dict[str, bool]:
    """Which of SHIPPED a GPU install of this wheel has (a pin, or files vendored in the wheel)."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    found = {}
    for package, where in SHIPPED.items():
        found[package] = any(n.startswith(where) for n in names) if where.endswith("/") else where in pins
    return found


def where_in(wheel: Path) -> dict[str, dict[str, str | None]]:
    """kind -> {"select": file:line of the selection function, "refusal": file:line of its "No ... backend
    supports" raise (None where it has none)}, read from the wheel's source (ast)."""
    from kvdoctor.builders.vllm_pack.child_quantization import DENSE_CASES, MOE_CASES

    found: dict[str, dict[str, str | None]] = {}
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        wanted = {f"moe:{kind}": (f"vllm/model_executor/layers/fused_moe/oracle/{case[0]}.py", case[1])
                  for kind, case in MOE_CASES.items()}
        wanted |= {f"dense:{kind}": (case[0].replace(".", "/") + "/__init__.py", case[1])
                   for kind, case in DENSE_CASES.items()}
        for key, (file, function) in wanted.items():
            found[key] = {"select": None, "refusal": None}
            if file not in names:
                continue
            tree = ast.parse(archive.read(file).decode("utf-8"))
            gpt_oss = key == "moe:mxfp4" and any(isinstance(n, ast.FunctionDef) and
                                                 n.name == "select_gpt_oss_mxfp4_moe_backend" for n in tree.body)
            function = "select_gpt_oss_mxfp4_moe_backend" if gpt_oss else function  # what 0.20.x call for gpt-oss
            for node in tree.body:
                if isinstance(node, ast.FunctionDef) and node.name == function:
                    found[key]["select"] = f"{file}:{node.lineno}"
                    raises = [n for n in ast.walk(node) if isinstance(n, ast.Raise) and n.exc is not None
                              and re.search(r"No .* backend supports|Failed to find a kernel", ast.unparse(n.exc))]
                    found[key]["refusal"] = f"{file}:{raises[-1].lineno}" if raises else None
    return found


def ask_release(version: str, wheel: Path, python: str, timeout: float = 900) -> dict:
    """One release's answers: {"packages": {...}, "moe": kind -> SM -> answer, "dense": kind -> SM -> answer}."""
    from kvdoctor.builders.vllm_pack.build import run_child
    from kvdoctor.builders.vllm_pack.wheel import extract, stub_versions

    with tempfile.TemporaryDirectory(prefix=f"vllm-{version}-moe-") as tmp:
        shipped = extract(wheel, Path(tmp))
        pins = {name: spec for name, spec, _ in shipped["requirements"]}
        packages = kernel_packages(wheel, pins)
        request = {"version": version, "tasks": ["module:quantization"], "legacy": True,
                   "compiled_modules": shipped["compiled_modules"], "stub_packages": stub_versions(pins),
                   "moe_backend_capabilities": CAPABILITIES, "moe_packages": packages,
                   "moe_torch": _pinned(pins.get("torch"))}  # fmt: skip
        raw = run_child(python, Path(tmp), request, timeout=timeout)
    answers = raw["quantization"]["moe_backends"]
    return {"packages": packages, "moe": answers["moe"], "dense": answers["dense"],
            "where": where_of(wheel, answers)}


def where_of(wheel: Path, answers: dict) -> dict[str, dict[str, str | None]]:
    """part:kind -> file:line of what answered: the oracle function (where_in), or for answers that carry a "via"
    (the release's pre-oracle code) that function or method (where_via). Static: read from the wheel alone."""
    where = where_in(wheel)
    for part in ("moe", "dense"):
        for kind, by_sm in answers[part].items():
            vias = {a.get("via") for sm in by_sm.values() if isinstance(sm, dict)
                    for a in (sm.values() if part == "moe" else [sm]) if isinstance(a, dict)} - {None}
            if len(vias) == 1:  # answered by the release's pre-oracle code: where that code is
                where[f"{part}:{kind}"] = where_via(wheel, vias.pop())
    return where


# The function a legacy answer's "via" class stands for (child_quantization.LEGACY_MOE / LEGACY_DENSE /
# DENSE_METHODS): a MoE or linear method's __init__, a config class's get_quant_method.
VIA_METHOD = {"Mxfp4Config": "get_quant_method"}
REFUSAL_TEXT = r"not supported|not implemented|No .*backend|does not support|No valid|Please use Blackwell"


def where_via(wheel: Path, via: str) -> dict[str, str | None]:
    """{"select": file:line of the function (or the class's method) a legacy answer came from, "refusal": file:line
    of its refusing raise / assert, or None}, read from the wheel's source (ast)."""
    module, _, name = via.rpartition(".")
    file = module.replace(".", "/") + ".py"
    found: dict[str, str | None] = {"select": None, "refusal": None}
    with zipfile.ZipFile(wheel) as archive:
        if file not in archive.namelist():
            return found
        tree = ast.parse(archive.read(file).decode("utf-8"))
    node = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name), None)
    if isinstance(node, ast.ClassDef):
        method = VIA_METHOD.get(name, "__init__")
        node = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == method), node)
    if node is None:
        return found
    found["select"] = f"{file}:{node.lineno}"
    refusals = [n for n in ast.walk(node) if isinstance(n, (ast.Raise, ast.Assert))
                and re.search(REFUSAL_TEXT, ast.unparse(n))]  # fmt: skip
    found["refusal"] = f"{file}:{refusals[-1].lineno}" if refusals else None
    return found


def _pinned(spec) -> str | None:
    """The version a `==X` requirement pins (the wheel's torch), else None."""
    match = re.fullmatch(r"\s*==\s*([0-9][0-9a-z.+]*)\s*", spec or "")
    return match.group(1) if match else None


def dumps(data: dict) -> str:
    """Sorted keys, one line per release (compact: check reads it at run time)."""
    releases = data["releases"]
    lines = [json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False) for v in releases.values()]
    head = json.dumps({k: v for k, v in data.items() if k != "releases"}, sort_keys=True, separators=(",", ":"))
    body = ",\n".join(f"{json.dumps(k)}:{line}" for k, line in sorted(zip(releases, lines),
                                                                      key=lambda kv: pack_order(kv[0])))
    return head[:-1] + ',"releases":{\n' + body + "\n}}\n"


def main(argv: list[str] | None = None) -> int:
    from kvdoctor.builders.vllm_pack.wheel import find_wheel

    ap = argparse.ArgumentParser(prog="python -m kvdoctor.builders.vllm_pack.quantization_moe",
                                 description=__doc__.split("\n\n")[0])  # fmt: skip
    ap.add_argument("--python", required=True, help="the pack builder's venv python (vLLM's pure-Python deps)")
    ap.add_argument("--wheels", type=Path, default=Path.home() / ".cache" / "kvdoctor" / "wheels")
    ap.add_argument("--versions", nargs="*", default=None)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--check", action="store_true", help="recompute and compare with --out; write nothing")
    args = ap.parse_args(argv)
    stored = json.loads(_read(args.out)) if args.out.is_file() else {"format": FORMAT, "releases": {}}
    versions = args.versions or sorted(stored["releases"], key=pack_order) or []
    releases = dict(stored["releases"])
    failed = 0
    for version in versions:
        wheel = find_wheel(args.wheels, version)
        if wheel is None:
            print(f"{version}: no wheel in {args.wheels}", file=sys.stderr)
            failed += 1
            continue
        releases[version] = ask_release(version, wheel, args.python)
        print(f"{version}: asked", file=sys.stderr)
        if not args.check:  # written after each release: a long run keeps what it asked
            _write(args.out, dumps({"format": FORMAT, "capabilities": CAPABILITIES, "releases": releases}))
    if args.check:
        text = dumps({"format": FORMAT, "capabilities": CAPABILITIES, "releases": releases})
        same = args.out.is_file() and _read(args.out) == text
        print(f"{'identical' if same else 'DIFFERS'} ({args.out})", file=sys.stderr)
        return 0 if same and not failed else 1
    return 1 if failed else 0


def _read(path: Path) -> str:
    """The stored answers' text (gzipped when the name ends in .gz)."""
    import gzip

    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8")


def _write(path: Path, text: str) -> None:
    import gzip

    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data, mtime=0) if path.suffix == ".gz" else data)


if __name__ == "__main__":
    raise SystemExit(main())
