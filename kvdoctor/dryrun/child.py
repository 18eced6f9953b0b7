"""Compiler child process: `python -m kvdoctor.dryrun.child` compiles the jobs it reads on stdin.

Input (stdin, JSON): {"jobs": [CompileJob.to_json() + {"path": kernel file on disk}], "triton_cache": dir},
read after Triton is imported (a child may be started before its jobs are known).
Output (stdout): for each job a line `KVDOCTOR-START <i>` before compiling it and a line
`KVDOCTOR-RESULT <json>` after, so the parent can tell which kernel was compiling if this process dies.

Test hook: the environment variable KVDOCTOR_DRYRUN_FAULT makes this process misbehave just before
compiling: "hang" (sleeps), "segfault" (SIGSEGV) or "abort" (SIGABRT); "<fault>:<kernel>" limits it to
one kernel. Only this child reads it.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import sys
import time
from typing import Any, TextIO

from kvdoctor.dryrun.protocol import RESULT, START

LAYOUT_NOTE = "this vLLM's kernel changed; dry run skipped for it"


def _fault(kernel: str) -> None:
    spec = os.environ.get("KVDOCTOR_DRYRUN_FAULT", "")
    fault, _, only = spec.partition(":")
    if not fault or (only and only != kernel):
        return
    if fault == "hang":
        time.sleep(3600)
    elif fault == "segfault":
        ctypes.string_at(0)
    elif fault == "abort":
        os.abort()


_loaded: dict[str, Any] = {}


def _load_file(source_file: str, path: str) -> Any:
    """The module of one vLLM file (executed once per path), registered under its vllm name."""
    name = source_file[: -len(".py")].replace("/", ".")
    if path not in _loaded:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        _loaded[path] = module
    sys.modules[name] = _loaded[path]
    return _loaded[path]


def _load_module(job: dict[str, Any]) -> Any:
    if job["role"] == "probe":
        from kvdoctor.dryrun import probe_kernel

        return probe_kernel
    for source_file, path in (job.get("siblings") or {}).items():  # files it imports, from the same release
        _load_file(source_file, path)
    return _load_file(job["source_file"], job["path"])


def _bind_by_name(fn: Any, job: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any]] | str:
    """(signature, constexprs) for the kernel's own parameters, or why its layout is not one kvdoctor knows."""
    import inspect

    known_sig, known_const = job["signature"], job["constexprs"]
    signature: dict[str, str] = {}
    constexprs: dict[str, Any] = {}
    unknown = []
    for name, param in inspect.signature(getattr(fn, "fn", fn)).parameters.items():
        if name in known_const:
            signature[name], constexprs[name] = "constexpr", known_const[name]
        elif name in known_sig:
            signature[name] = known_sig[name]
        elif param.default is not inspect.Parameter.empty:  # the launcher leaves it at its default
            signature[name], constexprs[name] = "constexpr", param.default
        else:
            unknown.append(name)
    if unknown:
        return f"parameters {unknown} of {job['kernel']} are not in any layout kvdoctor knows"
    return signature, constexprs


def _layout_skip(job: dict[str, Any], message: str) -> dict[str, Any]:
    failure = {"kind": "layout_changed", "message": message, "kernel_file": job["source_file"]}
    return {"status": "skipped", "failure": failure, "note": LAYOUT_NOTE}


def compile_job(job: dict[str, Any]) -> dict[str, Any]:
    """Compile one job for its target; a result dict with status, seconds, failure and note."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from kvdoctor.dryrun.classify import describe_failure

    started = time.perf_counter()
    try:
        fn = getattr(_load_module(job), job["kernel"])
    except Exception as exc:  # an import or name we do not know: the file changed
        result = _layout_skip(job, f"cannot load {job['kernel']}: {type(exc).__name__}: {exc}")
        return {**result, "seconds": time.perf_counter() - started}
    if job.get("by_name"):
        bound = _bind_by_name(fn, job)
        if isinstance(bound, str):
            return {**_layout_skip(job, bound), "seconds": time.perf_counter() - started}
        signature, constexprs = bound
    else:
        arg_names = list(getattr(fn, "arg_names", []) or [])
        if arg_names != job["expected_args"]:
            result = _layout_skip(job, f"parameters {arg_names} differ from the known layout {job['expected_args']}")
            return {**result, "seconds": time.perf_counter() - started}
        signature, constexprs = dict(job["signature"]), dict(job["constexprs"])
    major, minor = job["capability"]
    options = {"num_warps": job["num_warps"]}
    if job["num_stages"] is not None:
        options["num_stages"] = job["num_stages"]
    _fault(job["kernel"])
    try:
        source = ASTSource(fn, signature, constexprs)
        compiled = triton.compile(source, target=GPUTarget("cuda", major * 10 + minor, 32), options=options)
        status, failure = "passed", None
        if not compiled.asm.get("cubin"):
            status, failure = "failed", {"kind": "compile_error", "message": "no cubin produced"}
    except Exception as exc:
        root = os.path.dirname(triton.__file__)
        status, failure = "failed", describe_failure(exc, job["path"], job["source_file"], root)
    return {"status": status, "failure": failure, "note": None, "seconds": time.perf_counter() - started}


def _emit(out: TextIO, line: str) -> None:
    out.write(line + "\n")
    out.flush()


def _cheap_triton_key() -> None:
    """Triton keys its compile cache on a sha256 of its own sources and libtriton (~0.4 s, once per
    process: most of a one-kernel child's time). This child's Triton cache is kvdoctor's own, so the
    version plus libtriton's size and mtime identify the build well enough."""
    import functools
    import importlib

    import triton

    library_dir = os.path.join(os.path.dirname(triton.__file__), "_C")
    try:
        names = sorted(os.listdir(library_dir))
        libtriton = next(os.path.join(library_dir, n) for n in names if n.startswith("libtriton."))  # not libtriton/
        stat = os.stat(libtriton)
    except (OSError, StopIteration):
        return  # an unusual layout: keep Triton's own (slower) key
    key = functools.lru_cache(maxsize=1)(lambda: f"{triton.__version__}-kvdoctor-{stat.st_size}-{stat.st_mtime_ns}")
    for name in ("triton.runtime.cache", "triton.compiler.compiler"):  # where releases 3.0-3.9 look it up
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "triton_key"):
            module.triton_key = key


def main() -> int:
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout = sys.stderr  # compiler chatter must not mix with the result lines
    import triton  # before the payload: a child started early (warm_children) is ready when it comes
    import triton.language as tl

    from kvdoctor.dryrun import stand_ins

    stand_ins.install(triton, tl)
    _cheap_triton_key()
    try:
        message = json.load(sys.stdin)
    except ValueError:
        return 0  # a warm child nobody needed: its stdin closed empty
    if message.get("triton_cache"):
        os.environ["TRITON_CACHE_DIR"] = message["triton_cache"]  # Triton reads it at each compile
    jobs = message["jobs"]
    for index, job in enumerate(jobs):
        _emit(out, f"{START} {index}")
        _emit(out, f"{RESULT} {json.dumps({'index': index, **compile_job(job)})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
