"""Build kvdoctor's vLLM knowledge pack from released vLLM wheels: vLLM is the source of its own facts.

    python -m kvdoctor.builders.vllm_pack --wheels ~/.cache/kvdoctor/wheels [--versions 0.25.1 0.34.0]
        [--python /work/packenv/bin/python] [--out kvdoctor/data/vllm_pack] [--check]

For each release it extracts the wheel's `vllm/**/*.py` (never the compiled `.so`) to a temporary directory and
runs child.py in a child process (CPU torch, the platform's device capability stubbed per
target) that asks vLLM's own code: its `vllm serve` parser, its KV-cache and model dtype lists, its attention
backends' checks, priorities, constructor guards, model-runner choice and dtype resolution. The output is one
deterministic JSON file per release (sorted keys, no timestamps, no absolute paths), so a rebuild is
byte-identical; `--check` rebuilds into memory and compares with the shipped files instead of writing.

The builder's Python (`--python`, default $KVDOCTOR_PACK_PYTHON) needs CPU torch and vLLM's pure-Python
dependencies, and kvdoctor importable (`.ci/run` creates it: `pip install -e '.[pack]'` in a separate venv);
kvdoctor itself never imports vLLM. The runtime runs this builder in a subprocess for a release newer than the
pack (kvdoctor/vllm_pack/on_the_fly.py); it never imports it.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kvdoctor.base.versions import release_numbers
from kvdoctor.builders.vllm_pack.index import build_index, build_selection
from kvdoctor.builders.vllm_pack.normalise import clean_paths, normalise_release
from kvdoctor.builders.vllm_pack.variants import add_variants, variant_requests
from kvdoctor.builders.vllm_pack.wheel import extract, find_wheel, stub_versions, triton_of_torch
from kvdoctor.data import DATA_DIR

CHILD = "kvdoctor.builders.vllm_pack.child"  # run with -m in the builder's Python (kvdoctor importable there)

PACK_FORMAT = 1
# Releases the pack covers completely (issue 11), oldest first; older ones get dtype/backend facts only.
FULL_RELEASES = (
    "0.20.0 0.20.1 0.20.2 0.21.0 0.22.0 0.22.1 0.23.0 0.24.0 0.25.0 0.25.1 0.26.0 0.27.0 0.27.1 0.28.0 0.29.0 "
    "0.30.0 0.31.0 0.32.0 0.33.0 0.34.0"
).split()
# Releases before 0.20.0: the facts that decide dtype and backends (the last patch of each minor release; 0.7-0.10
# also their V0 engine: the oracle or default that picks it and V0's own selector; 0.5-0.6 their serve parser, dtype
# lists and dtype resolution only, EAGER_PLATFORM_BEFORE; 0.4 has no `vllm serve`: its api_server parser).
OLD_RELEASES = "0.4.3 0.5.5 0.6.3.post1 0.6.6.post1 0.7.3 0.8.5 0.8.5.post1 0.9.2 0.10.2 0.11.2 0.12.0 0.13.0 0.14.1 0.15.1 0.16.0 0.17.1 0.18.1 0.19.1".split()
CAPABILITIES = ((7, 0), (7, 5), (8, 0), (8, 6), (8, 7), (8, 9), (9, 0), (10, 0), (10, 3), (11, 0), (12, 0), (12, 1))
LEGACY_TASKS = {"module:backends": "module:backend_grid"}
# Releases before 0.7 (vllm/scripts.py's CLI, no platform `get_attn_backend_cls`, a platform picked once at import,
# V0 workers only): the builder reads their `vllm serve` parser, dtype lists and dtype resolution (`_get_and_verify_dtype`
# and the worker's bf16 check, module:runtime); the rest is said, not guessed.
EAGER_PLATFORM_BEFORE = (0, 7)
EAGER_PLATFORM_TASKS = ("serve_args", "dtypes", "module:runtime")
EAGER_PLATFORM_NOT_READ = {
    "backend_choice": "vllm/attention/selector.py's which_attn_to_use has another signature and no platform "
                      "get_attn_backend_cls: the builder does not ask it",
    "model_runner": "the V0 engine only: no V1 / V2 model runner to choose between",
}
# Requirements of those wheels that vLLM imports at import time for features the parser and the dtype checks never
# call (0.5's audio input in vllm/multimodal/utils.py, its outlines guided decoding) and the builder's venv lacks:
# modelled as present for vLLM, after transformers has looked for them (so transformers goes on without them).
EAGER_PLATFORM_PACKAGES = {"librosa": "librosa", "soundfile": "soundfile", "outlines": "outlines"}


def is_legacy(version: str) -> bool:
    """A release before 0.20.0 (the pack holds its dtype and backend facts, not every kind)."""
    return release_numbers(version)[:2] < (0, 20)


def run_child(python: str, src: Path, request: dict, timeout: float) -> dict:
    """The child's raw answers for the release extracted at `src` (a RuntimeError with its stderr if it fails)."""
    with tempfile.TemporaryDirectory() as tmp:
        req_path, out_path = Path(tmp) / "req.json", Path(tmp) / "out.json"
        req_path.write_text(json.dumps({**request, "src": str(src)}))
        env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
        env.update(PYTHONDONTWRITEBYTECODE="1", CUDA_VISIBLE_DEVICES="", PYTHONHASHSEED="0")
        proc = subprocess.run([python, "-m", CHILD, str(req_path), str(out_path)],
                              capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp)
        if proc.returncode != 0 or not out_path.exists():
            raise RuntimeError(f"child failed (rc {proc.returncode}):\n{proc.stderr[-4000:]}")
        return json.loads(out_path.read_text())


def build_release(version: str, wheel: Path, python: str, tasks: list[str], timeout: float) -> dict:
    """One release's facts in the pack's stored form, asked of the wheel (or tree) at `wheel`."""
    with tempfile.TemporaryDirectory(prefix=f"vllm-{version}-") as tmp:
        src = Path(tmp)
        shipped = extract(wheel, src)
        pins = {name: spec for name, spec, _ in shipped["requirements"]}
        shipped["triton"] = triton_of_torch(pins.get("torch"))
        stub_packages = stub_versions(pins)
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
        eager_platform = release_numbers(version)[:2] < EAGER_PLATFORM_BEFORE
        if eager_platform:
            request["eager_platform"] = True
            request["tasks"] = [t for t in request["tasks"] if t in EAGER_PLATFORM_TASKS]
            # 0.5's vllm/_core_ext.py instantiates a compiled torch class when vllm._core_C is found, else uses its
            # own pure-Python ScalarType: the parser needs neither, so the compiled module is left out
            request["compiled_modules"] = [m for m in request["compiled_modules"] if m != "vllm._core_C"]
            request["late_stub_packages"] = {module: pins[dist].lstrip("=<>!~ ").split(",")[0] or "0"
                                             for dist, module in EAGER_PLATFORM_PACKAGES.items() if dist in pins}
        raw = run_child(python, src, request, timeout)
        variants = {name: run_child(python, src, asked, timeout) for name, asked in variant_requests(request)}
    data = normalise_release(version, raw, shipped, request, PACK_FORMAT)
    if eager_platform:
        not_read = dict(EAGER_PLATFORM_NOT_READ)
        if "dtype" not in data.get("runtime", {}):
            not_read["dtype_resolution"] = "the workers' bf16 check could not be asked: " + \
                str(data.get("build_errors", {}).get("module:runtime", "no check found"))[-300:]
        data["not_read"] = not_read
    add_variants(data, {name: normalise_release(version, answer, shipped, dict(request, **asked), PACK_FORMAT)
                        for (name, asked), answer in zip(variant_requests(request), variants.values())})
    return data


def pack_bytes(text) -> bytes:
    """A file's stored bytes: text as UTF-8, or (bytes given) gzip with mtime 0, so rebuilds are byte-identical."""
    if isinstance(text, str):
        return text.encode()
    return gzip.compress(text, compresslevel=9, mtime=0)


def dumps(data: dict) -> str:
    """The pack's JSON spelling: sorted keys, no spaces, UTF-8 kept, one trailing newline."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """The builder's command line (see the module docstring); 0 when every release built (or matched)."""
    ap = argparse.ArgumentParser(prog="python -m kvdoctor.builders.vllm_pack", description=__doc__.split("\n\n")[0])
    ap.add_argument("--wheels", type=Path, default=Path(os.environ.get(
        "KVDOCTOR_VLLM_WHEELS", Path.home() / ".cache" / "kvdoctor" / "wheels")))
    ap.add_argument("--versions", nargs="*", default=None, help="default: every release with a wheel in --wheels")
    ap.add_argument("--python", default=os.environ.get("KVDOCTOR_PACK_PYTHON", sys.executable))
    ap.add_argument("--out", type=Path, default=DATA_DIR / "vllm_pack")
    ap.add_argument("--tasks", nargs="*", default=["serve_args", "dtypes", "module:backends", "module:runtime"])
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--samples-out", type=Path, default=None,
                    help="also write vLLM's real selections over a sample grid here (the selector's test oracle)")
    ap.add_argument("--check", action="store_true", help="compare with the shipped files; write nothing")
    ap.add_argument("--source", type=Path, default=None, help="a vLLM wheel or unpacked tree (instead of --wheels)")
    ap.add_argument("--refresh-guards", action="store_true",
                    help="re-ask only the constructor guards and splice them into the detail files in --out")
    ap.add_argument("--index-only", action="store_true", help="only rewrite index.json and the selection files from the files in --out")
    ap.add_argument("--variants-only", action="store_true",
                    help="ask only the modelled-input variants (variants.py) and splice them into the files in --out")
    args = ap.parse_args(argv)
    if args.index_only:
        return index_only(args.out, args.check)
    if args.variants_only:
        return refresh_variants(args.versions or FULL_RELEASES, args.wheels, args.python, args.out, args.timeout,
                                args.samples_out)
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
        lazy = ("backends", "backend_grid", "runtime", "variants")
        files = {f"{version}.json": {k: v for k, v in data.items() if k not in lazy + ("samples", "variant_samples")}}
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
            blob = dumps({"version": version, "samples": data["samples"],  # vLLM's answers with a modelled input
                          **({"variants": data["variant_samples"]} if data.get("variant_samples") else {})}).encode()
            with open(args.samples_out / f"{version}.json.gz", "wb") as fh:  # mtime 0: byte-identical
                with gzip.GzipFile(fileobj=fh, mode="wb", mtime=0, filename="") as gz:
                    gz.write(blob)
    if args.check or args.out.exists():
        failed += write_derived(args.out, check=args.check)
    return 1 if failed else 0


def refresh_guards(versions: list[str], wheels: Path, python: str, out: Path, timeout: float) -> int:
    """Re-ask only the constructor guards (`module:guards`) and splice them into the shipped detail files; the
    same answers a full rebuild gives (`.ci/run` rebuilds 0.25.1 and 0.34.0 in full and compares)."""
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
            stubs = stub_versions(pins)
            raw = run_child(python, Path(tmp), {"version": version, "tasks": ["module:guards"],
                                                "compiled_modules": shipped["compiled_modules"], "stub_packages": stubs,
                                                "capabilities": [list(c) for c in CAPABILITIES],
                                                "guard_classes": names}, timeout)
        if "guards" not in raw.get("guards", {}):
            print(f"{version}: FAILED {raw.get('errors')}", file=sys.stderr)
            failed += 1
            continue
        detail["backends"]["guards"] = clean_paths(raw["guards"]["guards"])
        detail["backends"]["query_quant"] = clean_paths(raw["guards"]["query_quant"])
        detail["backends"]["layer_guards"] = clean_paths(raw["guards"]["layer_guards"])
        path.write_bytes(pack_bytes(dumps(detail).encode()))
        print(f"{version}: guards of {', '.join(sorted(raw['guards']['guards']))}; "
              f"query quantization: {', '.join(sorted(raw['guards']['query_quant']))}")
    return 1 if failed else 0


def refresh_variants(versions: list[str], wheels: Path, python: str, out: Path, timeout: float,
                     samples_out: Path | None) -> int:
    """Ask only the variants of each release (the backends task with a modelled input stated otherwise) and splice
    them into its shipped core and detail files (and samples): what a full build writes, as long as the first read
    rebuilds byte-identically (`.ci/run` rebuilds 0.25.1 and 0.34.0 in full and compares)."""
    failed = 0
    for version in versions:
        core_path, detail_path = out / f"{version}.json", out / f"{version}.detail.json.gz"
        wheel = find_wheel(wheels, version)
        if is_legacy(version) or not core_path.exists() or not detail_path.exists() or wheel is None:
            print(f"{version}: not a replayed release with shipped files and a wheel", file=sys.stderr)
            failed += 1
            continue
        start = time.monotonic()
        core = json.loads(core_path.read_text("utf-8"))
        detail = json.loads(gzip.decompress(detail_path.read_bytes()))
        with tempfile.TemporaryDirectory(prefix=f"vllm-{version}-") as tmp:
            shipped = extract(wheel, Path(tmp))
            pins = {name: spec for name, spec, _ in shipped["requirements"]}
            request = {"version": version, "tasks": ["module:backends"], "compiled_modules": shipped["compiled_modules"],
                       "stub_packages": stub_versions(pins), "capabilities": [list(c) for c in CAPABILITIES]}
            asked = variant_requests(request)
            answers = {name: run_child(python, Path(tmp), req, timeout) for name, req in asked}
        data = {"backends": detail["backends"]}
        add_variants(data, {name: normalise_release(version, answers[name], shipped, req, PACK_FORMAT)
                            for name, req in asked})
        if "variants" not in data:
            print(f"{version}: no variant ({data.get('build_errors') or 'nothing to ask'})", file=sys.stderr)
            failed += bool(asked)
            continue
        core["modelled_inputs"] = data["modelled_inputs"]
        detail["variants"] = data["variants"]
        core_path.write_bytes(pack_bytes(dumps(core)))
        detail_path.write_bytes(pack_bytes(dumps(detail).encode()))
        if samples_out is not None and (samples_out / f"{version}.json.gz").exists():
            path = samples_out / f"{version}.json.gz"
            stored = json.loads(gzip.decompress(path.read_bytes()))
            stored["variants"] = data["variant_samples"]
            with open(path, "wb") as fh:  # mtime 0, no file name: as main() writes it
                with gzip.GzipFile(fileobj=fh, mode="wb", mtime=0, filename="") as gz:
                    gz.write(dumps(stored).encode())
        print(f"{version}: variants {', '.join(sorted(data['variants']))}, {time.monotonic() - start:.1f} s")
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
