"""Light stand-ins for the vLLM (and torch) modules the kernel files import, so vllm/__init__ never runs.

Only what the kernel files touch at import time or inside @triton.jit code is given, with vLLM's CUDA values
(fp8 = float8_e4m3fn, range +-448). An import kvdoctor does not provide fails the load, which the child
reports as a changed layout: a new dependency is said, not guessed. Imported only in the compiler child.
"""

from __future__ import annotations

import enum
import logging
import sys
import types

# (min, max) of the float types the kernel files ask torch.finfo about
_FINFO = {"float8_e4m3fn": (-448.0, 448.0), "float8_e5m2": (-57344.0, 57344.0), "float8_e4m3fnuz": (-240.0, 240.0),
          "float16": (-65504.0, 65504.0), "bfloat16": (-3.3895e38, 3.3895e38), "float32": (-3.4028e38, 3.4028e38)}  # fmt: skip

_PACKAGES = ("vllm", "vllm.v1", "vllm.v1.attention", "vllm.v1.attention.ops", "vllm.v1.attention.backends",
             "vllm.utils", "vllm.model_executor", "vllm.model_executor.layers",
             "vllm.model_executor.layers.quantization", "vllm.model_executor.layers.quantization.utils")  # fmt: skip


class KVQuantMode(enum.IntEnum):
    """The members whose values are the same in vLLM 0.20.0-0.34.0 (later ones were renumbered)."""

    NONE = 0
    FP8_PER_TENSOR = 1
    INT8_PER_TOKEN_HEAD = 2
    FP8_PER_TOKEN_HEAD = 3


def _module(name: str, **attrs) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


def _torch() -> types.ModuleType:
    class dtype:  # noqa: N801 - torch's name
        def __init__(self, name: str) -> None:
            self.name = name

        def __repr__(self) -> str:
            return f"torch.{self.name}"

    dtypes: dict[str, dtype] = {}

    def getattr_(name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return dtypes.setdefault(name, dtype(name))  # torch.int8, torch.float8_e4m3fn, ...

    def finfo(of):
        low, high = _FINFO.get(getattr(of, "name", ""), (-3.4028e38, 3.4028e38))
        return types.SimpleNamespace(min=low, max=high)

    torch = _module("torch", Tensor=type("Tensor", (), {}), dtype=dtype, device=type("device", (), {}), finfo=finfo)
    torch.__getattr__ = getattr_
    return torch


def install(triton, tl) -> None:
    """Register the stand-ins in sys.modules (torch only when the real one is not already imported)."""
    torch = sys.modules.get("torch") or _torch()
    for name in _PACKAGES:
        _module(name).__path__ = []
    fp8 = torch.float8_e4m3fn
    platform = types.SimpleNamespace(
        is_cuda_alike=lambda: True, is_cuda=lambda: True, is_rocm=lambda: False, is_xpu=lambda: False,
        fp8_dtype=lambda: fp8, is_fp8_fnuz=lambda: False,
    )  # fmt: skip
    _module("vllm.triton_utils", triton=triton, tl=tl)
    _module("vllm.platforms", current_platform=platform)
    _module("vllm.logger", init_logger=logging.getLogger)
    _module("vllm.envs", VLLM_BATCH_INVARIANT=False)

    def quantized(kv_cache_dtype) -> bool:
        return str(kv_cache_dtype) not in ("auto", "float16", "bfloat16", "float32", "half", "float")

    _module("vllm.utils.torch_utils", is_quantized_kv_cache=quantized)
    _module("vllm.v1.kv_cache_interface", KVQuantMode=KVQuantMode, is_quantized_kv_cache=quantized)
    _module("vllm.model_executor.layers.quantization.utils.quant_utils", FP8_DTYPE=fp8,
            get_fp8_min_max=lambda: (-448.0, 448.0))  # fmt: skip
    _module("vllm.v1.attention.ops.triton_decode_attention", _fwd_kernel_stage2=None)  # TurboQuant: not compiled
    _module("vllm.v1.attention.ops.triton_turboquant_decode", _use_fp8_e4b15=lambda device=0: 0)  # passed explicitly
