"""An unknown failure raised inside one of vLLM's quantized GEMM / quantize custom ops (vllm/_custom_ops.py) is the
quantization kernel scheme's family (issue 28 batch 70: a CUDA 11.8 build's int8-only CUTLASS scaled_mm given FP8),
and a failure that only passes through _custom_ops elsewhere is not."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text

FRAMES = """\
ERROR 07-24 22:52:39 engine.py:100] Traceback (most recent call last):
ERROR 07-24 22:52:39 engine.py:100]   File "/usr/lib/python3.10/site-packages/vllm/model_executor/layers/linear.py", line 900, in forward
ERROR 07-24 22:52:39 engine.py:100]     output = self.quant_method.apply(self, input_, bias)
ERROR 07-24 22:52:39 engine.py:100]   File "/usr/lib/python3.10/site-packages/vllm/_custom_ops.py", line 251, in {op}
ERROR 07-24 22:52:39 engine.py:100]     torch.ops._C.{op}(out, a, b)
ERROR 07-24 22:52:39 engine.py:100]   File "/usr/lib/python3.10/site-packages/torch/_ops.py", line 854, in __call__
ERROR 07-24 22:52:39 engine.py:100]     return self_._op(*args, **(kwargs or {{}}))
ERROR 07-24 22:52:39 engine.py:100] RuntimeError: Expected a.dtype() == torch::kInt8 to be true, but got false.
"""


def test_a_failure_in_a_quantized_gemm_op_is_the_kernel_schemes():
    for op in ("cutlass_scaled_mm", "gptq_marlin_gemm", "scaled_fp8_quant"):
        report = explain_text(FRAMES.format(op=op))
        assert (report.exit_code("error"), report.extra.get("family")) == (1, "quant_kernel_scheme"), op


def test_a_failure_in_another_custom_op_is_not():
    log = FRAMES.format(op="rms_norm").replace("linear.py", "layernorm.py").replace(
        "self.quant_method.apply(self, input_, bias)", "ops.rms_norm(out, x, self.weight.data, eps)").replace(
        "Expected a.dtype() == torch::kInt8 to be true, but got false.", "CUDA error: an illegal memory access")
    report = explain_text(log)
    assert report.extra.get("family") != "quant_kernel_scheme"
