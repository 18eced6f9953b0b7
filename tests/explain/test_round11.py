"""Round 11 of issue 28 (batch 15's seen misses, by mechanism): each class on synthetic lines of several shapes
written from the message as vLLM, Triton or the kernel raises it, with a near miss that must not take the family."""

from __future__ import annotations

import pytest

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.similar_reports import rules_family
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


@pytest.mark.parametrize("log, built, device", [
    ("..[ERROR] the socversion Ascend910B1 of bin package does not match the current device socverison Ascend310P3. "
     "Please modify default socversion in run.sh or execute run.sh with socversion parameter.", "Ascend910B1", "Ascend310P3"),
    ("INFO 09-03 08:14:33 [model_runner_v1.py:1] Loading model weights took 14.2 GB\n"
     "[ERROR] the socversion Ascend310P3 of bin package does not match the current device socversion Ascend910B2.\n",
     "Ascend310P3", "Ascend910B2"),
    ("[ERROR] the socversion Ascend910_9391 of bin package does not match the current device socverison Ascend910B4",
     "Ascend910_9391", "Ascend910B4"),
])  # fmt: skip
def test_an_ascend_op_package_for_another_soc_is_no_kernel_image(log, built, device):
    assert _family(log) == "no_kernel_image"
    assert built in _text(log) and device in _text(log)


@pytest.mark.parametrize("line", [
    "nvcc fatal   : A single input file is required for a non-link phase when an outputfile is specified",
    "nvcc fatal : Value 'c++20' is not defined for option 'std'",
    "RuntimeError: Ninja build failed: nvcc fatal   : Unknown option '-Xcompiler=/Zc:__cplusplus'",
])  # fmt: skip
def test_an_nvcc_fatal_error_is_the_jit_toolkit(line):
    assert _family(line) == "flashinfer_jit_toolkit"


@pytest.mark.parametrize("line", [
    "TypeError: Worker.reload_weights() got an unexpected keyword argument 'weights_iterator'",
    "(RayWorker pid=3) TypeError: GPUModelRunner.load_model() got an unexpected keyword argument 'eep_scale_up'",
    "TypeError: WorkerWrapperBase.update_weights_from_ipc() got an unexpected keyword argument 'peft_config'",
])  # fmt: skip
def test_a_keyword_a_vllm_worker_method_does_not_take_is_a_wrapper_mismatch(line):
    assert _family(line) == "wrapper_api_mismatch"


def _not_implemented(caller: str, raiser: str) -> str:
    return ("Traceback (most recent call last):\n"
            f"  File \"{caller}\", line 146, in async_llm_worker\n    result = await method(*args, **kwargs)\n"
            f"  File \"{raiser}\", line 535, in collective_rpc_async\n    raise NotImplementedError\nNotImplementedError\n")


@pytest.mark.parametrize("caller", ["/workspace/ms-swift/swift/llm/infer/rollout.py", "/app/openrlhf/trainer/vllm_engine.py"])
def test_a_bare_not_implemented_in_vllm_called_by_a_framework_is_a_wrapper_mismatch(caller):
    log = ("INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)\n"
           "INFO:     10.0.0.1:42132 - \"POST /init_communicator/ HTTP/1.1\" 200 OK\n"
           + _not_implemented(caller, "/opt/conda/lib/python3.10/site-packages/vllm/engine/async_llm_engine.py"))
    assert _family(log) == "wrapper_api_mismatch"
    assert "collective_rpc_async" in _text(log)


def test_a_not_implemented_raised_by_the_program_itself_is_not_vllm_s():
    log = _not_implemented("/app/trainer/rollout.py", "/app/trainer/engine.py")
    report = explain_text(log)
    # no rule claims it (similar reports may still name a likely family: said as likely, from a reported log)
    assert report.findings[0].rule_id == "KVD399"
    assert rules_family(report) == "other"


@pytest.mark.parametrize("line", [
    "AssertionError: RowParallelLinear already registered!",
    "AssertionError: <class 'vllm.model_executor.layers.fused_moe.layer.FusedMoE'> already registered!",
    "ValueError: QKVParallelLinear is already registered",
])  # fmt: skip
def test_a_vllm_layer_registered_twice_by_a_plugin_is_a_wrapper_mismatch(line):
    assert _family(line) == "wrapper_api_mismatch"


@pytest.mark.parametrize("frames, checked", [
    (("pynccl_wrapper.py", 257, "ncclAllReduce", "self.NCCL_CHECK(self._funcs['ncclAllReduce'](sendbuff))"),
     ("pynccl_wrapper.py", 223, "NCCL_CHECK", "raise RuntimeError(f'NCCL error: {error_str}')")),
    (("cuda_wrapper.py", 150, "cudaIpcOpenMemHandle", "self.CUDART_CHECK(self.funcs['cudaIpcOpenMemHandle'](ptr))"),
     ("cuda_wrapper.py", 120, "CUDART_CHECK", "raise RuntimeError(f'CUDART error: {error_str}')")),
    (("custom_all_reduce.py", 90, "register_buffer", "_check_error(ops.register_buffer(ptr))"),
     ("custom_all_reduce.py", 40, "_check_error", "raise RuntimeError('frobnicated status 7')")),
])  # fmt: skip
def test_an_unknown_failure_raised_by_a_status_checker_names_the_call_it_checked(frames, checked):
    caller, raiser = frames, checked
    log = "Traceback (most recent call last):\n" + "".join(
        f"  File \"/venv/lib/python3.12/site-packages/vllm/distributed/{f}\", line {n}, in {fn}\n    {code}\n"
        for f, n, fn, code in (caller, raiser)) + "RuntimeError: frobnicated status 7 (qux)\n"
    assert f"checking the call in {caller[2]}" in _text(log)


def test_an_unknown_failure_raised_in_an_ordinary_function_names_no_checked_call():
    log = ("Traceback (most recent call last):\n  File \"/venv/vllm/a.py\", line 3, in load\n    frob()\n"
           "  File \"/venv/vllm/b.py\", line 9, in frob\n    raise RuntimeError('frobnicated status 7')\n"
           "RuntimeError: frobnicated status 7 (qux)\n")
    assert "checking the call" not in _text(log)


_DIED = "(APIServer pid=5) ERROR 04-27 18:09:47 [core_client.py:600] Engine core proc {} died unexpectedly, shutting down client.\n"
_DEAD = ("(APIServer pid=5) ERROR 04-27 18:09:47 [async_llm.py:546] vllm.v1.engine.exceptions.EngineDeadError: EngineCore "
         "encountered an issue. See stack trace (above) for the root cause.\n")


@pytest.mark.parametrize("proc", ["EngineCore_DP0", "EngineCore_DP3", "EngineCore"])
def test_an_engine_core_that_died_with_no_error_of_its_own_was_killed(proc):
    log = _DIED.format(proc) + _DEAD
    assert f"Engine core proc {proc} died unexpectedly" in _text(log)
    assert "killed" in _text(log)


def test_an_engine_core_that_logged_its_own_failure_is_explained_by_that_failure():
    log = ("(EngineCore_DP0 pid=6) ERROR 04-27 18:09:40 [core.py:1] EngineCore encountered a fatal error.\n"
           "(EngineCore_DP0 pid=6) ValueError: frobnicated status 7 (qux)\n" + _DIED.format("EngineCore_DP0") + _DEAD)
    assert "something killed it" not in _text(log)


@pytest.mark.parametrize("log, arch", [
    ("This kernel only supports sm120.\ncudaErrorLaunchFailure: unspecified launch failure\n", "120"),
    ("(EngineCore_DP0 pid=7) This kernel only supports sm100.\nRuntimeError: CUDA error: an illegal instruction was encountered\n", "100"),
    ("This kernel only supports sm90a.\n", "90"),
])  # fmt: skip
def test_a_kernel_arch_guard_names_the_architecture_it_was_built_for(log, arch):
    assert _family(log) == "no_kernel_image"
    assert f"This kernel only supports sm{arch}" in _text(log)
    assert f"built for sm{arch} only" in _text(log)


_SHM = ("(EngineCore pid=127) INFO 04-15 13:42:25 [shm_broadcast.py:681] No available shared memory broadcast block "
        "found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming work.\n")


@pytest.mark.parametrize("done", [
    "(Worker pid=185) INFO 04-15 13:43:42 [monitor.py:76] Initial profiling/warmup run took 107.62 s\n",
    "(EngineCore pid=127) INFO 04-15 13:44:00 [core.py:1] init engine (profile, create kv cache, warmup model) took 140.2 seconds\n",
    "(APIServer pid=1) INFO:     Application startup complete.\n",
])  # fmt: skip
def test_repeated_shm_waits_followed_by_a_finished_step_are_a_slow_step_not_a_hang(done):
    assert explain_text(_SHM * 2 + done).exit_code("error") == 0


def test_repeated_shm_waits_with_no_finished_step_after_them_stay_a_hang():
    log = "(Worker pid=185) INFO 04-15 13:41:24 [cpu_model_runner.py:116] Warming up model for the compilation...\n"
    assert explain_text(log + _SHM * 2).exit_code("error") == 1


@pytest.mark.parametrize("line", [
    "specs=[{'GPU': 1.0, 'node:192.168.50.192': 0.001}, {'GPU': 1.0}] (PACK)",
    "INFO 01-02 03:04:05 [ray_utils.py:1] pending: specs=[{'GPU': 1.0, 'node:10.0.0.7': 0.001}, {'GPU': 1.0}, {'GPU': 1.0}] (STRICT_PACK)",
    "(raylet) specs=[{'node:172.16.0.2': 0.001, 'GPU': 1.0}] (SPREAD)",
])  # fmt: skip
def test_a_pending_placement_group_anchored_to_a_node_is_device_placement(line):
    assert _family(line) == "device_placement"
    assert "node:" in _text(line) and "(" in _text(line)


def test_bundle_specs_without_a_strategy_are_no_failure():
    assert explain_text("INFO 01-02 03:04:05 [ray_utils.py:1] bundles: [{'GPU': 1.0, 'node:10.0.0.7': 0.001}]").exit_code("error") == 0
