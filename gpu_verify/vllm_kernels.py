"""Load vLLM's TurboQuant kernel files from an unpacked wheel tree for real launches on a GPU.

Like kvdoctor's compiler child, it registers light stand-ins for the vllm modules the files import, so
vllm/__init__ never runs; unlike it, torch and the GPU are real. Each version gets its own module names, so
two versions live in one process.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STORE = "vllm/v1/attention/ops/triton_turboquant_store.py"
DECODE = "vllm/v1/attention/ops/triton_turboquant_decode.py"
STAGE2 = "vllm/v1/attention/ops/triton_decode_attention.py"


@dataclass
class VllmKernels:
    """One vLLM version's kernel modules, loaded from files on disk."""

    version: str
    root: Path
    store: Any
    decode: Any

    def path(self, rel: str) -> Path:
        return self.root / rel

    def force_fp8_e4b15(self, flag: int | None) -> None:
        """Make the launchers' `_use_fp8_e4b15` answer flag (None: vLLM's own rule on this GPU)."""
        if flag is None:
            self.store._use_fp8_e4b15 = self.decode._use_fp8_e4b15
            self.decode._FP8_E4B15.clear()
            return
        forced = lambda device=0: flag  # noqa: E731
        self.store._use_fp8_e4b15 = forced
        self.decode._FP8_E4B15.update({i: flag for i in range(16)})


def tree_version(root: Path) -> str:
    for meta in sorted(root.glob("vllm-*.dist-info/METADATA")):
        match = re.search(r"^Version:\s*(\S+)", meta.read_text(), re.MULTILINE)
        if match:
            return match.group(1)
    raise SystemExit(f"{root}: no vllm-*.dist-info/METADATA")


def _install_stand_ins() -> None:
    import triton
    import triton.language as tl

    for name in ("vllm", "vllm.v1", "vllm.v1.attention", "vllm.v1.attention.ops"):
        if name not in sys.modules:
            module = types.ModuleType(name)
            module.__path__ = []
            sys.modules[name] = module
    utils = types.ModuleType("vllm.triton_utils")
    utils.triton, utils.tl = triton, tl
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = types.SimpleNamespace(
        is_cuda_alike=lambda: True, is_cuda=lambda: True, is_rocm=lambda: False
    )
    sys.modules["vllm.triton_utils"] = utils
    sys.modules["vllm.platforms"] = platforms


def _exec(name: str, path: Path, alias: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.modules[alias] = module  # what the next file's `from vllm... import` finds
    spec.loader.exec_module(module)
    return module


def load_kernels(root: Path) -> VllmKernels:
    """The store and decode modules (with the real stage-2 kernel) of the vLLM tree at root."""
    _install_stand_ins()
    version = tree_version(root)
    tag = "v" + version.replace(".", "_")
    _exec(f"vllm_{tag}_decode_attention", root / STAGE2, "vllm.v1.attention.ops.triton_decode_attention")
    decode = _exec(f"vllm_{tag}_tq_decode", root / DECODE, "vllm.v1.attention.ops.triton_turboquant_decode")
    store = _exec(f"vllm_{tag}_tq_store", root / STORE, "vllm.v1.attention.ops.triton_turboquant_store")
    return VllmKernels(version, root, store, decode)
