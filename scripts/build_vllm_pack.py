#!/usr/bin/env python3
"""Build kvdoctor's vLLM knowledge pack from released vLLM wheels: vLLM is the source of its own facts.

    python scripts/build_vllm_pack.py --wheels ~/.cache/kvdoctor/wheels [--versions 0.25.1 0.34.0]
        [--python /work/packenv/bin/python] [--out kvdoctor/data/vllm_pack] [--check]

For each release it extracts the wheel's `vllm/**/*.py` (never the compiled `.so`) to a temporary directory and
runs scripts/vllm_pack_child.py in a child process (CPU torch, the platform's device capability stubbed per
target) that asks vLLM's own code: its `vllm serve` parser, its KV-cache and model dtype lists, its attention
backends' checks, priorities, constructor guards, model-runner choice and dtype resolution. The output is one
deterministic JSON file per release (sorted keys, no timestamps, no absolute paths), so a rebuild is
byte-identical; `--check` rebuilds into memory and compares with the shipped files instead of writing.

The builder's Python (`--python`, default $KVDOCTOR_PACK_PYTHON) needs CPU torch and vLLM's pure-Python
dependencies (`.ci/run` creates it: `pip install -e '.[pack]'` in a separate venv); kvdoctor itself never
imports vLLM.
"""
from __future__ import annotations

import argparse
import email.parser
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from vllm_pack_index import build_index, build_selection  # noqa: E402
from vllm_pack_normalise import normalise_release  # noqa: E402

PACK_FORMAT = 1
# Releases the pack covers completely (issue 11), oldest first; older ones get dtype/backend facts only.
FULL_RELEASES = (
    "0.20.0 0.20.1 0.20.2 0.21.0 0.22.0 0.22.1 0.23.0 0.24.0 0.25.0 0.25.1 0.26.0 0.27.0 0.27.1 0.28.0 0.29.0 "
    "0.30.0 0.31.0 0.32.0 0.33.0 0.34.0"
).split()
# Releases before 0.20.0: the facts that decide dtype and backends (the last patch of each minor release).
OLD_RELEASES = "0.10.2 0.11.2 0.12.0 0.13.0 0.14.1 0.15.1 0.16.0 0.17.1 0.18.1 0.19.1".split()
CAPABILITIES = ((7, 0), (7, 5), (8, 0), (8, 6), (8, 7), (8, 9), (9, 0), (10, 0), (10, 3), (11, 0), (12, 0), (12, 1))
# Hard GPU-kernel dependencies of the CUDA wheel that cannot be imported here; modelled as present (import name).
# (torchvision/torchaudio/torchcodec are not stubbed: transformers reads their metadata.)
MODELLED_PACKAGES = {
    "flashinfer-python": "flashinfer",
    "flashinfer-cubin": "flashinfer_cubin",
    "apache-tvm-ffi": "tvm_ffi",
    "tilelang": "tilelang",
    "nvidia-cutlass-dsl": "cutlass",
    "quack-kernels": "quack",
    "tokenspeed-mla": "tokenspeed_mla",
    "humming-kernels": "humming",
    "deep-gemm": "deep_gemm",
    "xformers": "xformers",
}


LEGACY_TASKS = {"module:backends": "module:backend_grid"}


def is_legacy(version: str) -> bool:
    """A release before 0.20.0 (the pack holds its dtype and backend facts, not every kind)."""
    return tuple(int(p) for p in re.findall(r"\d+", version)[:2]) < (0, 20)


def find_wheel(wheels: Path, version: str) -> Path | None:
    # vllm-0.20.1-1-cp38-...: a build tag may follow the version
    for path in sorted(wheels.glob(f"vllm-{version}-*.whl")):
        rest = path.name[len(f"vllm-{version}-"):]
        if rest.startswith("cp") or re.match(r"\d+-cp", rest):
            return path
    return None


def requirements(metadata_text: str) -> list[tuple[str, str, str]]:
    """(normalised name, specifier, marker) of the wheel's unconditional Requires-Dist lines."""
    msg = email.parser.Parser().parsestr(metadata_text)
    out = []
    for line in msg.get_all("Requires-Dist") or []:
        spec, _, marker = line.partition(";")
        if "extra ==" in marker:
            continue
        m = re.match(r"\s*([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*(.*)", spec)
        if m:
            name = re.sub(r"[-_.]+", "-", m.group(1)).lower()
            out.append((name, m.group(3).strip().strip("()"), marker.strip()))
    return out


def extract_tree(tree: Path, into: Path) -> dict:
    """An unpacked vLLM (a tree or site-packages holding vllm/): its Python files copied under `into`."""
    import shutil

    py = sorted(tree.glob("vllm/**/*.py"))
    for path in py:
        target = into / path.relative_to(tree)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    compiled = sorted({str(p.relative_to(tree)).split(".")[0].replace("/", ".") for p in tree.glob("vllm/**/*.so*")})
    metadata = next(iter(sorted(tree.glob("vllm-*.dist-info/METADATA"))), None)
    return {"compiled_modules": compiled, "requirements": requirements(metadata.read_text()) if metadata else [],
            "py_files": len(py)}


def extract(wheel: Path, into: Path) -> dict:
    """The wheel's Python files and metadata under `into`; what it ships compiled, and its requirements."""
    if wheel.is_dir():
        return extract_tree(wheel, into)
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        py = [n for n in names if n.startswith("vllm/") and n.endswith(".py")]
        for name in py:
            zf.extract(name, into)
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = zf.read(meta_name).decode()
    compiled = sorted({n.split(".")[0].replace("/", ".") for n in names
                       if n.startswith("vllm/") and (n.endswith(".so") or ".so." in n)})
    return {"compiled_modules": compiled, "requirements": requirements(metadata), "py_files": len(py)}


TORCH_PINS = HERE / "vllm_pack_torch_triton.json"


def triton_of_torch(torch_spec: str | None) -> dict | None:
    """The Triton version torch pins (torch's own Requires-Dist), from the committed table or, for a torch the
    table lacks, from the package index's metadata (`pip install --dry-run --report`, no download)."""
    if not torch_spec or not torch_spec.startswith("=="):
        return None
    torch_version = torch_spec[2:]
    table = json.loads(TORCH_PINS.read_text()) if TORCH_PINS.exists() else {}
    if torch_version not in table:
        with tempfile.TemporaryDirectory() as tmp:
            report = Path(tmp) / "report.json"
            proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps",
                                   "--ignore-installed", "-q", "--report", str(report), f"torch=={torch_version}"],
                                  capture_output=True, text=True, timeout=300,
                                  # the index's own torch (a local CPU build has no Triton pin)
                                  env={**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": ""})
            if proc.returncode != 0 or not report.exists():
                return None
            requires = json.loads(report.read_text())["install"][0]["metadata"].get("requires_dist", [])
        pins = [r.split(";")[0].strip() for r in requires if r.startswith("triton") and "Linux" in r]
        table[torch_version] = pins[0].replace("triton", "", 1).strip() if pins else None
        TORCH_PINS.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    spec = table.get(torch_version)
    return {"spec": spec, "torch": torch_version, "where": f"torch=={torch_version} METADATA (Requires-Dist)"} \
        if spec else None


def run_child(python: str, src: Path, request: dict, timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        req_path, out_path = Path(tmp) / "req.json", Path(tmp) / "out.json"
        req_path.write_text(json.dumps({**request, "src": str(src)}))
        env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
        env.update(PYTHONDONTWRITEBYTECODE="1", CUDA_VISIBLE_DEVICES="", PYTHONHASHSEED="0")
        proc = subprocess.run([python, str(HERE / "vllm_pack_child.py"), str(req_path), str(out_path)],
                              capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp)
        if proc.returncode != 0 or not out_path.exists():
            raise RuntimeError(f"child failed (rc {proc.returncode}):\n{proc.stderr[-4000:]}")
        return json.loads(out_path.read_text())


def build_release(version: str, wheel: Path, python: str, tasks: list[str], timeout: float) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"vllm-{version}-") as tmp:
        src = Path(tmp)
        shipped = extract(wheel, src)
        pins = {name: spec for name, spec, _ in shipped["requirements"]}
        shipped["triton"] = triton_of_torch(pins.get("torch"))
        stub_packages = {}
        for dist, module in MODELLED_PACKAGES.items():
            if dist in pins:
                stub_packages[module] = pins[dist].lstrip("=<>!~ ").split(",")[0] or "0"
        request = {
            "version": version,
            "tasks": tasks,
            "compiled_modules": shipped["compiled_modules"],
            "stub_packages": stub_packages,
            "capabilities": [list(c) for c in CAPABILITIES],
        }
        if is_legacy(version):  # before 0.20.0: vLLM's own backend answers over a grid, not a replay
            request["legacy"] = True
            request["tasks"] = [LEGACY_TASKS.get(t, t) for t in tasks]
        raw = run_child(python, src, request, timeout)
    return normalise_release(version, raw, shipped, request, PACK_FORMAT)


def pack_bytes(text) -> bytes:
    """A file's stored bytes: text as UTF-8, or (bytes given) gzip with mtime 0, so rebuilds are byte-identical."""
    if isinstance(text, str):
        return text.encode()
    return gzip.compress(text, compresslevel=9, mtime=0)


def dumps(data: dict) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wheels", type=Path, default=Path(os.environ.get(
        "KVDOCTOR_VLLM_WHEELS", Path.home() / ".cache" / "kvdoctor" / "wheels")))
    ap.add_argument("--versions", nargs="*", default=None, help="default: every release with a wheel in --wheels")
    ap.add_argument("--python", default=os.environ.get("KVDOCTOR_PACK_PYTHON", sys.executable))
    ap.add_argument("--out", type=Path, default=REPO / "kvdoctor" / "data" / "vllm_pack")
    ap.add_argument("--tasks", nargs="*", default=["serve_args", "dtypes", "module:backends", "module:runtime"])
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--samples-out", type=Path, default=None,
                    help="also write vLLM's real selections over a sample grid here (the selector's test oracle)")
    ap.add_argument("--check", action="store_true", help="compare with the shipped files; write nothing")
    ap.add_argument("--source", type=Path, default=None, help="a vLLM wheel or unpacked tree (instead of --wheels)")
    ap.add_argument("--refresh-guards", action="store_true",
                    help="re-ask only the constructor guards and splice them into the detail files in --out")
    ap.add_argument("--index-only", action="store_true", help="only rewrite index.json and the selection files from the files in --out")
    args = ap.parse_args(argv)
    if args.index_only:
        return index_only(args.out, args.check)
    if args.refresh_guards:
        return refresh_guards(args.versions or FULL_RELEASES, args.wheels, args.python, args.out, args.timeout)

    versions = args.versions or [v for v in OLD_RELEASES + FULL_RELEASES if find_wheel(args.wheels, v)]
    failed = 0
    if args.source and len(versions) != 1:
        ap.error("--source builds one release: pass --versions X")
    for version in versions:
        wheel = args.source or find_wheel(args.wheels, version)
        if wheel is None:
            print(f"{version}: no wheel in {args.wheels} (pip download --no-deps vllm=={version})", file=sys.stderr)
            failed += 1
            continue
        start = time.monotonic()
        try:
            data = build_release(version, wheel, args.python, args.tasks, args.timeout)
        except Exception as exc:  # one broken release must not stop the others
            print(f"{version}: FAILED {exc}", file=sys.stderr)
            failed += 1
            continue
        # attention selection and run-time facts go in a file of their own, read only when needed
        lazy = ("backends", "backend_grid", "runtime")
        files = {f"{version}.json": {k: v for k, v in data.items() if k not in lazy + ("samples",)}}
        if any(k in data for k in lazy):
            files[f"{version}.detail.json"] = {"format": data["format"], "version": version,
                                               **{k: data[k] for k in lazy if k in data}}
        for name, content in files.items():
            text = dumps(content)
            if is_legacy(version) or name.endswith(".detail.json"):  # gzipped: the pack's size budget (detail
                name, text = name + ".gz", text.encode()                # files are read lazily, once)
            target = args.out / name
            if args.check:
                same = target.exists() and target.read_bytes() == pack_bytes(text)
                print(f"{name}: {'identical' if same else 'DIFFERS'} ({len(text)} bytes, "
                      f"{time.monotonic() - start:.1f} s)")
                failed += not same
            else:
                args.out.mkdir(parents=True, exist_ok=True)
                target.write_bytes(pack_bytes(text))
                print(f"{name}: {len(text)} bytes, {time.monotonic() - start:.1f} s, "
                      f"errors: {sorted(data.get('build_errors', {})) or 'none'}")
        if args.samples_out and ("backends" in data or "backend_grid" in data):
            args.samples_out.mkdir(parents=True, exist_ok=True)
            blob = dumps({"version": version, "samples": data["samples"]}).encode()
            with open(args.samples_out / f"{version}.json.gz", "wb") as fh:  # mtime 0: byte-identical
                with gzip.GzipFile(fileobj=fh, mode="wb", mtime=0, filename="") as gz:
                    gz.write(blob)
    if args.check or args.out.exists():
        failed += write_derived(args.out, check=args.check)
    return 1 if failed else 0


def refresh_guards(versions: list[str], wheels: Path, python: str, out: Path, timeout: float) -> int:
    """Re-ask only the constructor guards (`module:guards`) and splice them into the shipped detail files; the
    same answers a full rebuild gives (`.ci/run` rebuilds 0.25.1 and 0.34.0 in full and compares)."""
    from vllm_pack_normalise import _clean

    failed = 0
    for version in versions:
        path, wheel = out / f"{version}.detail.json.gz", find_wheel(wheels, version)
        if not path.exists() or wheel is None:
            print(f"{version}: no detail file or no wheel", file=sys.stderr)
            failed += 1
            continue
        detail = json.loads(gzip.decompress(path.read_bytes()))
        names = sorted(n for n, c in detail["backends"]["classes"].items() if "import_error" not in c)
        with tempfile.TemporaryDirectory(prefix=f"vllm-{version}-") as tmp:
            shipped = extract(wheel, Path(tmp))
            pins = {name: spec for name, spec, _ in shipped["requirements"]}
            stubs = {m: pins[d].lstrip("=<>!~ ").split(",")[0] or "0" for d, m in MODELLED_PACKAGES.items() if d in pins}
            raw = run_child(python, Path(tmp), {"version": version, "tasks": ["module:guards"],
                                                "compiled_modules": shipped["compiled_modules"], "stub_packages": stubs,
                                                "capabilities": [list(c) for c in CAPABILITIES],
                                                "guard_classes": names}, timeout)
        if "guards" not in raw.get("guards", {}):
            print(f"{version}: FAILED {raw.get('errors')}", file=sys.stderr)
            failed += 1
            continue
        detail["backends"]["guards"] = _clean(raw["guards"]["guards"])
        detail["backends"]["query_quant"] = _clean(raw["guards"]["query_quant"])
        path.write_bytes(pack_bytes(dumps(detail).encode()))
        print(f"{version}: guards of {', '.join(sorted(raw['guards']['guards']))}; "
              f"query quantization: {', '.join(sorted(raw['guards']['query_quant']))}")
    return 1 if failed else 0


def derived_files(out: Path) -> dict[str, bytes]:
    """The files derived from the release files in `out`: the summary index and the per-capability selection
    facts (gzipped), as they are stored."""
    files = {"index.json": pack_bytes(dumps(build_index(out)))}
    for name, text in build_selection(out).items():
        files[name + ".gz"] = pack_bytes(text.encode())
    return files


def write_derived(out: Path, check: bool = False) -> int:
    """Write (or, with check, compare) the derived files; the number that differ."""
    differ = 0
    for name, blob in derived_files(out).items():
        target = out / name
        if check:
            same = target.exists() and target.read_bytes() == blob
            print(f"{name}: {'identical' if same else 'DIFFERS'} ({len(blob)} bytes)")
            differ += not same
        else:
            target.write_bytes(blob)
            print(f"{name}: {len(blob)} bytes")
    return differ


def index_only(out: Path, check: bool = False) -> int:
    """Rewrite (or compare) index.json and the selection files from the release files already in `out`."""
    return 1 if write_derived(out, check) else 0

if __name__ == "__main__":
    sys.exit(main())
