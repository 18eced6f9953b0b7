"""kvdoctor's own probe kernel (not vLLM's), compiled when no vLLM kernels can be read.

It loads model-dtype values and converts them to the fp8 format vLLM would write for the KV-cache dtype
on the target GPU (FP8_FORMAT: 0 none, 1 fp8e4b15, 2 fp8e4nv, 3 fp8e5), which is the conversion that
decides the TurboQuant k8v4 bug. WIDEN_FIRST=1 models releases that cast keys to float32 first. Imported only inside the compiler child process: it imports Triton.
"""

import triton
import triton.language as tl


@triton.jit
def kvdoctor_probe_fp8_convert(In_ptr, Out_ptr, BLOCK: tl.constexpr, FP8_FORMAT: tl.constexpr,
                               WIDEN_FIRST: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    vals = tl.load(In_ptr + offs)
    if WIDEN_FIRST:  # what vLLM >= 0.26.0 does before the fp8 cast (PR #39988)
        vals = vals.to(tl.float32)
    if FP8_FORMAT == 1:
        out = vals.to(tl.float8e4b15).to(tl.uint8, bitcast=True)
    elif FP8_FORMAT == 2:
        out = vals.to(tl.float8e4nv).to(tl.uint8, bitcast=True)
    elif FP8_FORMAT == 3:
        out = vals.to(tl.float8e5).to(tl.uint8, bitcast=True)
    else:
        out = vals.to(tl.float32).to(tl.uint8)
    tl.store(Out_ptr + offs, out)
