"""Round 11 of issue 28 (batch 15's seen misses, by mechanism): each class on synthetic lines of several shapes
written from the message as vLLM, Triton or the kernel raises it, with a near miss that must not take the family."""

from __future__ import annotations

import pytest

from kvdoctor.explain.explain import explain_text
from kvdoctor.report.check.text import render


def _family(log: str) -> str | None:
    return explain_text(log).extra.get("family")


def _text(log: str) -> str:
    return " ".join(render(explain_text(log)).split())


@pytest.mark.parametrize("log", [
    "ValueError: max_lora_rank (4) must be one of (8, 16, 32, 64, 128, 256).",
    "pydantic_core._pydantic_core.ValidationError: 1 validation error for LoRAConfig\n"
    "  Value error, max_lora_rank (1) must be one of (8, 16, 32, 64, 128, 256, 320, 512). [type=value_error]",
    "(APIServer pid=1) pydantic_core._pydantic_core.ValidationError: 1 validation error for LoRAConfig\n"
    "max_lora_rank\n  Input should be 1, 8, 16, 32, 64, 128, 256, 320 or 512 [type=literal_error, input_value=4, input_type=int]",
])  # fmt: skip
def test_a_max_lora_rank_vllm_does_not_allocate_is_lora_rank(log):
    assert _family(log) == "lora_rank"
    assert "--max-lora-rank" in _text(log)


@pytest.mark.parametrize("log, library", [
    ("WARNING 02-28 20:57:36 _core_ext.py:180] Failed to import from vllm._core_C with "
     "ImportError('libtorch_hip.so: cannot open shared object file: No such file or directory')", "libtorch_hip.so"),
    ("WARNING 06-13 11:42:20 _custom_ops.py:14] Failed to import from vllm._C with "
     "ImportError('libc10_cuda.so: cannot open shared object file: No such file or directory')", "libc10_cuda.so"),
    ("ImportError: /opt/venv/lib/python3.12/site-packages/vllm/_C.abi3.so: libtorch_cuda.so: cannot open shared "
     "object file: No such file or directory", "libtorch_cuda.so"),
])  # fmt: skip
def test_vllm_ops_that_cannot_load_a_torch_library_are_another_torch_build(log, library):
    assert _family(log) == "vllm_c_abi_mismatch"
    assert library in _text(log)


def test_a_missing_cuda_runtime_library_is_not_a_torch_build_mismatch():
    log = "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory"
    assert _family(log) != "vllm_c_abi_mismatch"


_FP8 = "ValueError(\"type fp8e4nv not supported in this architecture. The supported fp8 dtypes are ('fp8e4b15', 'fp8e5')\")"


@pytest.mark.parametrize("kernel", ["_w8a8_triton_block_scaled_mm", "_w8a8_block_fp8_matmul", "scaled_mm_kernel"])
def test_fp8e4nv_in_a_quantized_weight_gemm_is_the_checkpoint_not_the_kv_cache(kernel):
    log = f"triton.compiler.errors.CompilationError: at 1:0:\ndef {kernel}(\n^\n{_FP8}\n"
    assert _family(log) == "quant_min_capability"
    assert kernel in _text(log)


def test_fp8e4nv_in_an_attention_kernel_stays_the_kv_cache():
    log = f"triton.compiler.errors.CompilationError: at 1:0:\ndef kernel_unified_attention_2d(\n^\n{_FP8}\n"
    assert _family(log) != "quant_min_capability"


@pytest.mark.parametrize("line", [
    "RuntimeError: Shared memory exceeds 96KB: 146944 bytes",
    "ERROR 05-02 10:22:18 [core.py:1] RuntimeError: shared memory size exceeds the device limit: 232448 bytes",
    "RuntimeError: kernel shared memory usage exceeds the 101376-byte limit: 135168 bytes",
])  # fmt: skip
def test_a_kernel_whose_shared_memory_exceeds_the_gpu_is_head_size_smem(line):
    assert _family(line) == "head_size_smem"


@pytest.mark.parametrize("log", [
    "ValueError: Chunked MM input disabled but max_tokens_per_mm_item (2496) is larger than max_num_batched_tokens "
    "(2048). Please increase max_num_batched_tokens.",
    "(EngineCore_DP0 pid=9) ERROR 01-02 03:04:05 [core.py:1] ValueError: Chunked MM input disabled but "
    "max_tokens_per_mm_item (16384) is larger than max_num_batched_tokens (8192). Please increase max_num_batched_tokens.",
    "Traceback (most recent call last):\n  File \"/venv/lib/python3.12/site-packages/vllm/v1/core/encoder_cache_manager.py\","
    " line 302, in compute_mm_encoder_budget\n    raise ValueError(\nValueError: Chunked MM input disabled but "
    "max_tokens_per_mm_item (2496) is larger than max_num_batched_tokens (2048). Please increase max_num_batched_tokens.",
])  # fmt: skip
def test_an_unchunkable_mm_item_over_the_step_budget_is_batched_tokens_not_the_encoder_cache(log):
    assert _family(log) == "batched_tokens_below_max_len"
    assert "--max-num-batched-tokens" in _text(log)


_STARTED = ("INFO 01-02 03:04:00 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000\n"
            "INFO:     Application startup complete.\n"
            "INFO:     127.0.0.1:5000 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK\n")


@pytest.mark.parametrize("error", [
    "ERROR 01-02 03:04:05 [serving_chat.py:1] Error in preprocessing prompt inputs\nTraceback (most recent call last):\n"
    "  File \"/venv/lib/python3.12/site-packages/vllm/entrypoints/openai/serving_engine.py\", line 626, in _validate_input\n"
    "    raise ValueError(\nValueError: This model's maximum context length is 2048 tokens. However, you requested 5418 "
    "tokens (3918 in the messages, 1500 in the completion). Please reduce the length of the messages or completion.\n",
    "ValueError: This model's maximum context length is 4096 tokens. However, your request has 5000 input tokens. "
    "Please reduce the length of the input messages.\n",
])  # fmt: skip
def test_a_prompt_over_max_model_len_at_a_running_server_keeps_its_family(error):
    log = _STARTED + error + "INFO:     127.0.0.1:5000 - \"POST /v1/chat/completions HTTP/1.1\" 400 Bad Request\n"
    assert _family(log) == "prompt_exceeds_max_model_len"
