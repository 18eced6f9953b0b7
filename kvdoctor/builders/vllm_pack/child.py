"""Child process of the pack builder (build.py): asks one vLLM release's own code what it does.

Run as `python -m kvdoctor.builders.vllm_pack.child REQUEST.json OUT.json` in the builder's venv (CPU torch,
no GPU; kvdoctor importable); it puts the release's extracted `vllm/**/*.py` first on sys.path. Writes plain
JSON facts; never copies vLLM code, only values, vLLM's own message strings and file:line locations (relative to
the wheel root).

This module sets the stage (stand-ins: child_stubs, the stubbed platform: child_platform) and runs the tasks the
request names: `serve_args` and `dtypes` (child_serve_args) and each `module:X` (child_X.run(this module)). Tasks
read the request (`REQ`), `where` and `rel_path` from here.

Where a compiled extension or a hard dependency would decide (FlashAttention's FA2/FA3 `.so`, FlashInfer),
its presence is modelled from the wheel's file list and requirements and recorded under `modelled`. The child is
hermetic: it reaches no network, and vLLM's probe of FlashInfer's TRT-LLM cubins (`has_nvidia_artifactory`)
answers the request's modelled `flashinfer-cubin` value (kvdoctor/model/modelled.py), with the JIT toolchain
(nvcc, ninja) modelled as found.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import os
import sys
import traceback
import warnings

from kvdoctor.builders.vllm_pack.child_platform import install_platform
from kvdoctor.builders.vllm_pack.child_serve_args import dtype_literals, dump_serve_args
from kvdoctor.builders.vllm_pack.child_stubs import (
    ModelledInputsFinder,
    StubFinder,
    cuda_tensors_on_meta,
    legacy_ops,
    no_network,
    nvml_without_devices,
)

TASKS_PACKAGE = "kvdoctor.builders.vllm_pack"  # `module:X` runs child_X.run(this module) from here
warnings.filterwarnings("ignore")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REQ = json.load(open(sys.argv[1]))
SRC = os.path.realpath(REQ["src"])  # the extracted wheel root (holds vllm/)
__all__ = ["MODELLED_INPUTS", "REQ", "SRC", "install_platform", "main", "rel_path", "where"]


def rel_path(path: str) -> str:
    """A vLLM file path relative to the wheel root; other files by their last components."""
    path = os.path.realpath(path)
    if path.startswith(SRC + os.sep):
        return path[len(SRC) + 1:]
    for marker in ("site-packages" + os.sep, "lib" + os.sep + "python"):
        if marker in path:
            return path.split(marker, 1)[1]
    return os.path.basename(path)


def where(obj) -> str | None:
    """file:line of a function/class definition inside vLLM."""
    try:
        obj = inspect.unwrap(getattr(obj, "__func__", obj))
        file = inspect.getsourcefile(obj)
        line = inspect.getsourcelines(obj)[1]
    except (TypeError, OSError):
        return None
    return f"{rel_path(file)}:{line}" if file else None


cuda_tensors_on_meta(tuple(REQ.get("capability", (9, 0))))
# a dependency installed for real in the builder's venv (xgrammar's tvm_ffi, say) is used as it is
_REAL = {root for root in REQ["stub_packages"] if importlib.util.find_spec(root) is not None}
STUB_FINDER = StubFinder(set(REQ["compiled_modules"]),
                         {k: v for k, v in REQ["stub_packages"].items() if k not in _REAL})
sys.meta_path.insert(0, STUB_FINDER)
# FlashInfer's TRT-LLM cubins: reachable exactly when the request models flashinfer-cubin as installed (a stand-in
# package then, as for a wheel that requires it); vLLM's artifactory probe answers that, never the network
MODELLED_INPUTS = {"flashinfer-cubin": "present" if "flashinfer_cubin" in REQ["stub_packages"] else "absent",
                   **(REQ.get("modelled_inputs") or {})}
sys.meta_path.insert(0, ModelledInputsFinder(MODELLED_INPUTS["flashinfer-cubin"] == "present"))
no_network()
sys.path.insert(0, SRC)


def main() -> None:
    """Run the request's tasks and write their answers (and each task's error) as JSON."""
    out: dict = {"errors": {}}
    if REQ.get("legacy"):
        legacy_ops()
    if REQ.get("eager_platform"):  # before 0.7: NVML asked at import time
        nvml_without_devices()
    if REQ.get("late_stub_packages"):  # transformers decides first whether they are installed (not: it goes on)
        importlib.import_module("transformers.utils.import_utils")
        STUB_FINDER.roots.update({root: version for root, version in REQ["late_stub_packages"].items()
                                  if importlib.util.find_spec(root) is None})
    install_platform(tuple(REQ.get("capability", (9, 0))))
    ctx = sys.modules[__name__]
    tasks = REQ["tasks"]
    if "serve_args" in tasks:
        out["serve_args"] = dump_serve_args(ctx)
    if "dtypes" in tasks:
        dtype_literals(ctx, out)
    for task in tasks:
        if task.startswith("module:"):
            mod = importlib.import_module(f"{TASKS_PACKAGE}.child_{task.split(':', 1)[1]}")
            try:
                out[task.split(":", 1)[1]] = mod.run(ctx)
            except Exception:
                out["errors"][task] = traceback.format_exc()[-3000:]
    json.dump(out, open(sys.argv[2], "w"), sort_keys=True, indent=0)


if __name__ == "__main__":
    main()
