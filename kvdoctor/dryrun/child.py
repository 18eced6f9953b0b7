"""Compiler child process: `python -m kvdoctor.dryrun.child` compiles the jobs it reads on stdin.

Input (stdin, JSON): {"jobs": [CompileJob.to_json() + {"path": kernel file on disk}]}.
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
import types
from typing import Any, TextIO

from kvdoctor.dryrun.protocol import RESULT, START

LAYOUT_NOTE = "this vLLM's kernel changed; dry run skipped for it"

# vLLM modules the kernel files import; registered as light stand-ins so vllm/__init__ never runs
_VLLM_PACKAGES = ("vllm", "vllm.v1", "vllm.v1.attention", "vllm.v1.attention.ops")


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


def _install_stand_ins() -> None:
    import triton
    import triton.language as tl

    for name in _VLLM_PACKAGES:
        module = types.ModuleType(name)
        module.__path__ = []
        sys.modules[name] = module
    utils = types.ModuleType("vllm.triton_utils")
    utils.triton, utils.tl = triton, tl
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = types.SimpleNamespace(is_cuda_alike=lambda: True, is_cuda=lambda: True)
    stage2 = types.ModuleType("vllm.v1.attention.ops.triton_decode_attention")
    stage2._fwd_kernel_stage2 = None  # stage 2 is not compiled
    decode = types.ModuleType("vllm.v1.attention.ops.triton_turboquant_decode")
    decode._use_fp8_e4b15 = lambda device=0: 0  # never called: FP8_E4B15 is passed explicitly
    for module in (utils, platforms, stage2, decode):
        sys.modules[module.__name__] = module
    if "torch" not in sys.modules:  # kernel files only use torch in launchers and annotations
        torch = types.ModuleType("torch")
        torch.Tensor, torch.dtype, torch.device = type("Tensor", (), {}), type("dtype", (), {}), type("device", (), {})
        sys.modules["torch"] = torch


_loaded: dict[str, Any] = {}


def _load_module(job: dict[str, Any]) -> Any:
    path = job["path"]
    if path not in _loaded:
        if job["role"] == "probe":
            from kvdoctor.dryrun import probe_kernel as module
        else:
            name = job["source_file"][: -len(".py")].replace("/", ".")
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            sys.modules[name] = module
        _loaded[path] = module
    return _loaded[path]


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
    arg_names = list(getattr(fn, "arg_names", []) or [])
    if arg_names != job["expected_args"]:
        result = _layout_skip(job, f"parameters {arg_names} differ from the known layout {job['expected_args']}")
        return {**result, "seconds": time.perf_counter() - started}
    major, minor = job["capability"]
    options = {"num_warps": job["num_warps"]}
    if job["num_stages"] is not None:
        options["num_stages"] = job["num_stages"]
    _fault(job["kernel"])
    try:
        source = ASTSource(fn, dict(job["signature"]), dict(job["constexprs"]))
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
    jobs = json.load(sys.stdin)["jobs"]
    _install_stand_ins()
    _cheap_triton_key()
    for index, job in enumerate(jobs):
        _emit(out, f"{START} {index}")
        _emit(out, f"{RESULT} {json.dumps({'index': index, **compile_job(job)})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
