"""Round 6 of issue 28: the mechanisms behind the seen misses left after batch 10, each on synthetic variants
written from the wordings of vLLM, torch, torch_npu, NumPy and the OpenAI client (never copied from a real log)."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.log_lines import normalise
from kvdoctor.explain.similar_reports import rules_family
from kvdoctor.report.check.text import render


def _text(report) -> str:
    return " ".join(render(report).split())


def test_full_width_punctuation_is_read_as_ascii():
    (line,) = normalise("\u3010\u62a5\u9519\u3011\uff1aValueError\uff1a bad value \uff08x\uff09\n")
    assert line.text == "[\u62a5\u9519]: ValueError:  bad value (x)"


def test_an_exception_glued_to_a_pasted_label_is_a_failure():
    # a reporter's label and a full-width colon in front of torch_npu's allocator message, nothing else in the log
    report = explain_text("\u3010\u95ee\u9898\u3011\uff1aRuntimeError: NPU out of memory. Tried to allocate 2.00 GiB "
                          "(NPU 1; 29.50 GiB total capacity; 27.10 GiB already allocated; 27.10 GiB current active; "
                          "0.90 GiB free; 27.20 GiB reserved in total by PyTorch)\n")
    assert report.exit_code("error") == 1
    assert report.extra["family"] == "oom_profiling"
    text = _text(report)
    assert "NPU ran out of memory allocating 2.00 GiB" in text and "0.90 GiB free" in text


def test_the_allocators_of_other_devices_name_their_device():
    for device in ("XPU", "HIP"):
        report = explain_text(f"torch.OutOfMemoryError: {device} out of memory. Tried to allocate 512.00 MiB\n")
        assert report.extra["family"] == "oom_profiling", device
        assert f"{device} ran out of memory allocating 512.00 MiB" in _text(report)
    cuda = explain_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB (GPU 0; 15.78 GiB "
                        "total capacity; 14.20 GiB already allocated; 0.30 GiB free; 14.40 GiB reserved)\n")
    assert "CUDA ran out of memory allocating 1.00 GiB" in _text(cuda)


def test_a_path_that_is_neither_a_model_directory_nor_a_repo_id():
    # vllm/transformers_utils/config.py:get_config (0.8.5-0.34.0)
    report = explain_text("ValueError: Invalid repository ID or local directory specified: '/mnt/llm'.\n"
                          "Please verify the following requirements:\n")
    assert report.extra["family"] == "model_config_missing"
    assert "/mnt/llm" in report.findings[0].title


def test_numpy_2_under_a_module_built_for_numpy_1():
    log = ("A module that was compiled using NumPy 1.x cannot be run in\n"
           "NumPy 2.1.3 as it may crash. To support both 1.x and 2.x\n"
           "Traceback (most recent call last):\n"
           '  File "/usr/lib/python3/site-packages/torch/__init__.py", line 1, in <module>\n')
    report = explain_text(log)
    assert report.exit_code("error") == 1 and report.findings[0].rule_id == "KVD402"
    text = _text(report)
    assert "NumPy 2.1.3" in text and "numpy<2" in text
    # the NumPy version named in a healthy line is no failure
    assert explain_text("INFO 05-02 10:22:18 [utils.py:1] numpy 2.1.3, torch 2.5.1\n").exit_code("error") == 0


def test_an_error_the_server_answered_a_client_with_is_a_request_time_failure():
    for line in ("openai.InternalServerError: Error code: 500 - {'error': {'message': 'frobnication is not "
                 "available for this model', 'type': 'BadRequestError', 'code': 500}}",
                 "client: {'object': 'error', 'message': 'frobnication is not available', 'code': 400}"):
        report = explain_text(line + "\n")
        assert report.exit_code("error") == 1
        assert report.extra["family"] == "first_request_failure", line
        assert "server's error answer" in _text(report)
    # a start-up failure a client never saw stays a start-up failure
    report = explain_text("ValueError: frobnication is not available for this model\n")
    assert rules_family(report) == "other"  # a similar report may still name a likely family, said as likely


def test_a_function_claimed_by_a_family_claims_only_that_familys_checks():
    # vllm/config/model.py:ModelConfig._verify_quantization raises this; it is no divisibility check
    report = explain_text("ValueError: Unknown quantization method: frobq. Must be one of ['awq', 'gptq'].\n")
    assert report.extra["family"] != "parallel_divisibility"
    # transformers' AutoConfig.register: a name the installed transformers already defines, not one it lacks
    report = explain_text(
        "Traceback (most recent call last):\n"
        '  File "/venv/lib/python3.12/site-packages/transformers/models/auto/configuration_auto.py", line 993, in '
        "register\n"
        '    raise ValueError(f"\'{key}\' is already used by a Transformers config, pick another name.")\n'
        "ValueError: 'frobvit' is already used by a Transformers config, pick another name.\n")
    assert report.extra["family"] != "transformers_unknown_arch"


def test_a_bare_assert_claimed_by_where_vllm_raised_it_is_quoted_and_no_value_reads_unfilled():
    log = ("Traceback (most recent call last):\n"
           '  File "/venv/lib/python3.12/site-packages/vllm/config.py", line 1764, in _get_and_verify_max_len\n'
           '    assert "frob" in rope_scaling\n'
           "AssertionError\n")
    report = explain_text(log)
    assert report.extra["family"] == "max_model_len_derived"
    text = _text(report)
    assert 'vLLM\'s check in _get_and_verify_max_len failed: assert "frob" in rope_scaling' in text
    assert "(not in the log)" not in text
    assert "--max-model-len unknown" not in text  # a fix's flag that needs a missing value is left out


def test_a_traceback_a_logger_printed_at_warning_is_a_failure_quoted_with_its_record():
    # vllm/v1/kv_offload/worker/worker.py logs a failed transfer with logger.warning(..., exc_info=True); cut short
    log = ("(EngineCore_DP0 pid=7) WARNING 11-18 07:48:24 [worker.py:116] Exception in ('GPU', 'CPU') transfer 12: "
           "AssertionError()\n"
           "(EngineCore_DP0 pid=7) WARNING 11-18 07:48:24 [worker.py:116] Traceback (most recent call last):\n"
           '(EngineCore_DP0 pid=7) WARNING 11-18 07:48:24 [worker.py:116]   File "/venv/vllm/v1/kv_offload/worker/'
           'cpu_gpu.py", line 129, in transfer_async\n')
    report = explain_text(log)
    assert report.exit_code("error") == 1
    assert "transfer 12: AssertionError()" in _text(report)
    # a traceback Python reported and dropped stays no failure
    assert explain_text("Exception ignored in: <function Foo.__del__ at 0x7f>\nTraceback (most recent call last):\n"
                        '  File "/venv/x.py", line 3, in __del__\nTypeError: bad\n').exit_code("error") == 0


def test_a_cpp_check_macros_failure_is_a_failure():
    for line in ("topk_ids.size(1) == params->top_k (2 vs. 8) : topk_ids dim1 must match top_k.",
                 "F1204 10:22:18.123 4711 allocator.cc:42] Check failed: used <= limit (9 vs. 8)",
                 "Check failed: status == cudaSuccess"):
        assert explain_text(line + "\n").exit_code("error") == 1, line
    assert explain_text("INFO 05-02 10:22:18 [gpu.py:1] throughput 2x (9 vs. 8 req/s)\n").exit_code("error") == 0


def test_a_refused_request_at_a_server_that_served_the_endpoint_is_the_requests_fault():
    ok = 'INFO:     127.0.0.1:5000 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    refused = 'INFO:     127.0.0.1:5000 - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request\n'
    assert explain_text(ok + refused).exit_code("error") == 0
    # refusing before serving any (a missing chat template refuses them all), or another endpoint: a failure
    assert explain_text(refused + ok).exit_code("error") == 1
    assert explain_text(ok.replace("chat/completions", "completions") + refused).exit_code("error") == 1


def test_a_named_family_stays_when_a_client_printed_the_servers_answer():
    log = ("openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': \"This model's maximum context "
           "length is 4096 tokens. However, you requested 5000 tokens (904 in the messages, 4096 in the completion). "
           "Please reduce the length of the messages or completion.\", 'type': 'BadRequestError', 'code': 400}\n")
    assert explain_text(log).extra["family"] == "prompt_exceeds_max_model_len"


def test_an_error_record_with_a_plain_logger_name_before_its_level():
    # '%(asctime)s %(process)d %(name)s %(levelname)s [...] %(message)s', the message cut by a wrap
    log = ("2024-07-01 07:28:04.488 1 kserve ERROR [__main__.py:<module>():254] Failed to\n"
           "start model server: integer division or modulo by zero\n")
    assert explain_text(log).exit_code("error") == 1
    assert explain_text("2024-07-01 07:28:04.488 1 kserve INFO [__main__.py:<module>():254] Error budget "
                        "kept\n").exit_code("error") == 0


def test_a_traceback_header_split_by_a_hard_wrap():
    log = ("(EngineCore_DP0 pid=7) WARNING 11-18 07:48:24 [worker.py:116] Traceback (most\n"
           "recent call last):\n"
           '(EngineCore_DP0 pid=7) WARNING 11-18 07:48:24 [worker.py:116]   File "/venv/vllm/v1/x.py", line 1, in f\n')
    assert explain_text(log).exit_code("error") == 1


def test_a_warning_cut_short_is_not_taken_for_the_shorter_raise_it_starts_like():
    # vllm/utils/argparse_utils.py logs this at WARNING (0.11-0.34); 0.8.5-0.10.2 raised its shorter first sentence
    log = ("WARNING 05-15 16:01:27 [argparse_utils.py:257] With `vllm serve`, you should provide the model as a "
           "positional argument or in a config file instead of via the `--model` option. The `--model` option wi...\n")
    assert explain_text(log).exit_code("error") == 0


def test_a_program_on_top_of_vllm_using_a_name_this_vllm_lacks():
    cases = {
        "ImportError: cannot import name 'FrobParams' from 'vllm.sampling_params' (/venv/vllm/sampling_params.py)":
            ("FrobParams", "vllm.sampling_params"),
        "AttributeError: module 'vllm.utils' has no attribute 'frob_util'": ("frob_util", "vllm.utils"),
        "AttributeError: 'AsyncLLMEngine' object has no attribute 'engine_frob'": ("engine_frob", "AsyncLLMEngine"),
        "TypeError: build_async_engine_client_from_engine_args() got an unexpected keyword argument 'frob'":
            ("frob", "build_async_engine_client_from_engine_args"),
    }
    for line, shown in cases.items():
        report = explain_text(line + "\n")
        assert report.extra["family"] == "wrapper_api_mismatch", line
        assert all(value in report.findings[0].title for value in shown), report.findings[0].title
    # a vLLM config object's missing attribute is vLLM's own bug, not a framework's; and Python's own wording
    # ("{} object has no attribute {}", a template of vllm/lora too) locates nothing
    report = explain_text("AttributeError: 'SpeculativeConfig' object has no attribute 'get'\n")
    assert report.extra["family"] == "other"


def test_a_frameworks_vllm_client_answered_404_by_a_plain_server():
    # a traceback excerpt without its header; Python's bare `Exception: ...` line
    log = ('  File "/venv/lib/python3.11/site-packages/frobrl/trainer.py", line 626, in __init__\n'
           "    self.vllm_client.update_named_param()\n"
           '  File "/venv/lib/python3.11/site-packages/frobrl/extras/vllm_client.py", line 233, in update_named_param\n'
           '    raise Exception(f"Request failed: {response.status_code}, {response.text}")\n'
           'Exception: Request failed: 404, {"detail":"Not Found"}\n')
    report = explain_text(log)
    assert report.extra["family"] == "wrapper_api_mismatch"
    assert "update_named_param" in report.findings[0].title and "404" in report.findings[0].title


def test_the_traceback_decides_where_a_generic_message_was_raised():
    # "'{}' object has no attribute {}" is also a template of vllm/lora (raised_in: lora_unsupported); a traceback
    # that shows the attribute access in a framework's own code is not that raise
    log = ("Traceback (most recent call last):\n"
           '  File "/venv/site-packages/frobzoo/vllm_utils.py", line 400, in get_state\n'
           "    x = engine.frob_internal\n"
           "AttributeError: 'FrobEngine' object has no attribute 'frob_internal'\n")
    assert explain_text(log).extra["family"] != "lora_unsupported"
    # a Windows path names its package too ('D:\\...\\vllm\\executor\\ray_utils.py')
    log = ("Traceback (most recent call last):\n"
           '  File "D:\\\\env\\\\Lib\\\\site-packages\\\\vllm\\\\executor\\\\ray_utils.py", line 265, in initialize_ray_cluster\n'
           "    raise ValueError(\n"
           "ValueError: The number of required GPUs exceeds the total number of available GPUs in the placement group.\n")
    assert explain_text(log).extra["family"] == "device_placement"


def test_a_platform_plugins_device_word_is_read_as_vllms():
    from kvdoctor.explain.diagnosis import message_origin

    # vllm/config/parallel.py:ParallelConfig.__post_init__, as vllm-ascend prints it
    line = ("ValueError: World size (16) is larger than the number of available NPUs (8) in this node. If this is "
            "intentional and you are using:")
    assert message_origin(line, None) is not None
    assert explain_text(line + "\n").extra["family"] == "device_placement"


def test_a_placement_group_that_never_forms_on_a_cluster_without_its_nodes():
    # vllm/v1/executor/ray_utils.py initialize_ray_cluster's warning, then Ray's node failing to reach the head's GCS
    log = ("No current placement group found. Creating a new placement group.\n"
           "The number of required NPUs exceeds the total number of available NPUs in the placement group.\n"
           "Waiting for creating a placement group of specs.\n"
           "Failed to connect to GCS at address 10.0.0.2:41000 with 5 seconds.\n")
    report = explain_text(log)
    assert report.exit_code("error") == 1 and report.extra["family"] == "device_placement"
    assert explain_text("Failed to get cluster ID from GCS server: Timed out while waiting for GCS to become "
                        "available.\n").exit_code("error") == 1


def test_a_traceback_cut_at_a_raise_with_a_literal_message_is_that_exception():
    log = ("Traceback (most recent call last):\n"
           '  File "/src/frobtuner/hparams/parser.py", line 265, in get_infer_args\n'
           '    raise ValueError("vLLM engine does not support LoRA adapters. Merge them first.")\n')
    report = explain_text(log)
    assert report.extra["family"] == "lora_unsupported"
    assert "does not support LoRA adapters" in report.findings[0].title
    # vLLM 0.7's warning that LoRA turns torch.compile off is no refusal
    assert explain_text("WARNING 05-02 10:22:18 [config.py:1] LoRA is not supported with `torch.compile` yet. "
                        "Disabling `torch.compile`.\n").exit_code("error") == 0


def test_hybrid_spec_unification_and_a_frameworks_device_choice():
    # vllm/v1/core/kv_cache_utils.py:unify_hybrid_kv_cache_specs (0.9-0.26)
    report = explain_text("ValueError: Hybrid KV cache manager is disabled but failed to convert the KV cache specs to "
                          "one unified type.\n")
    assert report.extra["family"] == "hybrid_block_size"
    assert "--kv-events-config" in _text(report)
    report = explain_text("ValueError: The requested device for vllm (cuda:3) is not available. You are likely using "
                          "vLLM without restricting the number of GPUs for training.\n")
    assert report.extra["family"] == "device_placement" and "cuda:3" in _text(report)


def test_an_unknown_failure_in_pythons_own_words_quotes_the_line_that_failed():
    log = ("Traceback (most recent call last):\n"
           '  File "/venv/vllm/model_executor/models/frob.py", line 134, in __init__\n'
           "    self.q_size = self.num_heads * self.frob_dim\n"
           "TypeError: unsupported operand type(s) for *: 'int' and 'NoneType'\n")
    report = explain_text(log)
    assert report.findings[0].rule_id == "KVD399"
    assert "in `self.q_size = self.num_heads * self.frob_dim`" in report.findings[0].cause


def test_a_traceback_excerpt_of_one_frame_and_a_pretty_printed_error_code_are_failures():
    frame = ('(EngineCore_0 pid=62)   File "/usr/lib/python3.12/multiprocessing/process.py", line 108, in run\n'
             "(EngineCore_0 pid=62)     self._target(*self._args, **self._kwargs)\n")
    assert explain_text(frame).exit_code("error") == 1
    assert explain_text('      File "/venv/vllm/engine/frob.py", line 141, in from_engine_args\n'
                        "        return cls(\n               ^^^^\n").exit_code("error") == 1
    assert explain_text('    "param": null,\n    "code": 400\n}\n').exit_code("error") == 1
    # a frame named in prose, and a JSON code of success, are not
    assert explain_text('See File "setup.py", line 3, in main for the entry point\n').exit_code("error") == 0
    assert explain_text('    "code": 200\n}\n').exit_code("error") == 0


def test_methods_of_vllm_a_program_calls_across_releases():
    report = explain_text("TypeError: LLM.generate() got an unexpected keyword argument 'prompt_frob_ids'\n")
    assert report.extra["family"] == "wrapper_api_mismatch" and "prompt_frob_ids" in report.findings[0].title


def test_more_shapes_of_a_failure_with_no_error_line():
    failing = [
        "RuntimeError('Engine loop has died')",  # a logger printing the exception's repr
        "Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:43 (most recent call "
        "first):",
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 (0x7f in /usr/lib/libc10.so)",
        "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED",
        "CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasGemmEx( handle, opa, opb, m, n, k)`",
        " ** On entry to GEMM_EX  parameter number 5 had an illegal value",
        "bash: vllm: command not found",
        "/bin/sh: 1: vllm: not found",
        "zsh: command not found: vllm",
        "FAILED: _C.abi3.so",
        "**ValueError: frob frob**",
        "`ValueError: frob frob`",
        "(raylet) [2024-06-25 16:32:00,123 E 123 123] (raylet) worker_pool.cc:553: Some workers of the worker process "
        "have not registered within the timeout.",
    ]
    for line in failing:
        assert explain_text(line + "\n").exit_code("error") == 1, line
    healthy = ["INFO 05-02 10:22:18 [utils.py:1] cuBLAS returned CUBLAS_STATUS_SUCCESS",
               "bash: nvidia-smi: command not found",  # a tool missing in the container does not stop vLLM
               "INFO 05-02 10:22:18 [gpu.py:1] frame #0 rendered",
               "(raylet) [2024-06-25 16:32:00,123 I 123 123] (raylet) main.cc:1: Raylet started."]
    for line in healthy:
        assert explain_text(line + "\n").exit_code("error") == 0, line


def test_the_lines_only_a_traceback_holds_stand_for_it_in_a_log_cut_after_it():
    for line in ("During handling of the above exception, another exception occurred:",
                 "The above exception was the direct cause of the following exception:",
                 "    For further information visit https://errors.pydantic.dev/2.13/v/value_error",
                 "Repro command: /venv/triton/backends/nvidia/bin/ptxas -lineinfo -v --gpu-name=sm_121a /tmp/x.ptx"):
        assert explain_text(line + "\n").exit_code("error") == 1, line
    report = explain_text("Repo model meta-llama/Llama-2-7b-hf is gated. You must be authenticated to access it.\n")
    assert report.extra["family"] == "hf_download"


def test_other_releases_wordings_of_known_checks():
    # the message index's templates in the same file:function as a family's matched ones (vLLM 0.7-0.34)
    cases = {
        "ValueError: The prompt (total length 9000) is too long to fit into the model (context length 8192).":
            "prompt_exceeds_max_model_len",
        "ValueError: Tensor parallel size (4) cannot be larger than the number of available GPUs (2).":
            "device_placement",
        "ValueError: Not enough resources to allocate 8 DP ranks on DP master node 10.0.0.1, possible to fit 4 DP ranks.":
            "device_placement",
        "ValueError: --kv-cache-dtype nvfp4 requires the SM100 trtllm-gen FlashInfer path.": "nvfp4_kv",
        "LocalEntryNotFoundError: Cannot find the requested files in the disk cache and outgoing traffic has been "
        "disabled.": "hf_download",
        "ValueError: Could not find config.json for remote GGUF model repo.": "model_config_missing",
    }
    for line, family in cases.items():
        assert explain_text(line + "\n").extra["family"] == family, line


def test_a_kubectl_pod_row_whose_status_is_a_failure():
    assert explain_text("vllm-7d9f8c6b5-x2k4p   0/1     Error     3 (40s ago)   2m\n").exit_code("error") == 1
    assert explain_text("vllm-7d9f8c6b5-x2k4p   0/1     Init:Error     0   2m\n").exit_code("error") == 1
    assert explain_text("vllm-7d9f8c6b5-x2k4p   1/1     Running     0   2m\n").exit_code("error") == 0


def test_a_warning_is_taken_for_a_raise_only_in_a_release_that_raises_it():
    # vllm/config/model.py:ModelConfig._verify_tokenizer_mode raises this in 0.9.2-0.11.2 only
    warning = "WARNING 05-02 10:22:18 [config.py:1] Unknown tokenizer mode: frob. Must be one of ['auto', 'slow'].\n"
    assert explain_text(warning).exit_code("error") == 1
    # a release the index holds no raise site of it for (0.6): a warning of that release, not a raise
    assert explain_text("INFO 05-02 10:22:17 [api_server.py:1] vLLM API server version 0.6.3\n" + warning
                        ).exit_code("error") == 0


def test_an_oom_without_its_numbers_and_a_kv_cache_with_no_room():
    for line in ("torch.cuda.OutOfMemoryError: CUDA out of memory.", "[rank0]: torch.OutOfMemoryError: CUDA out of memory"):
        assert explain_text(line + "\n").extra["family"] == "oom_profiling", line
    for line in ("INFO 05-02 10:22:18 [gpu_worker.py:1] Available KV cache memory: 0.00 GiB",
                 "INFO 05-02 10:22:18 [gpu_worker.py:1] Available KV cache memory: -2.77 GiB",
                 "INFO 05-02 10:22:18 [kv_cache_utils.py:1] GPU KV cache size: 0 tokens"):
        report = explain_text(line + "\n")
        assert report.exit_code("error") == 1 and report.extra["family"] == "kv_cache_too_small", line
    assert explain_text("INFO 05-02 10:22:18 [gpu_worker.py:1] Available KV cache memory: 0.50 GiB\n"
                        ).exit_code("error") == 0


def test_the_selectors_reasons_alone_are_a_failure():
    # a log's tail that kept only the end of "No valid attention backend found ... Reasons: {...}"
    tail = ("not supported], TRITON_ATTN: [kv_cache_dtype not supported], FLEX_ATTENTION:\n"
            "[kv_cache_dtype not supported], TURBOQUANT: [kv_cache_dtype not supported,\n"
            "non-causal attention not supported]}\n")
    assert explain_text(tail).exit_code("error") == 1
    assert explain_text("INFO 05-02 10:22:18 [cuda.py:1] Using TRITON_ATTN backend.\n").exit_code("error") == 0


def test_a_kv_cache_that_holds_less_than_one_max_length_request():
    # V0's executor_base.initialize_cache logs this before raise_if_cache_size_invalid raises
    report = explain_text("INFO 05-02 10:22:18 [executor_base.py:1] Maximum concurrency for 32768 tokens per request: "
                          "0.42x\n")
    assert report.extra["family"] == "kv_cache_too_small" and "32768" in report.findings[0].title
    assert explain_text("INFO 05-02 10:22:18 [executor_base.py:1] Maximum concurrency for 32768 tokens per request: "
                        "3.42x\n").exit_code("error") == 0


def test_asyncio_urllib_pip_and_a_reporters_word_for_a_process_that_died():
    for log in ("Exception in callback _log_task_completion(error_callback=<bound method>)",
                "urllib.error: HTTP Error 503: Service Unavailable",
                "  Building wheel for vllm (pyproject.toml) ... error",
                "note: This error originates from a subprocess, and is likely not a problem with pip.",
                "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:10<00:10, 5.00s/it]\n"
                "(it stops here and the container restarts)"):
        assert explain_text(log + "\n").exit_code("error") == 1, log
    assert explain_text("  Building wheel for vllm (pyproject.toml) ... done\n").exit_code("error") == 0
