"""Round 15 of issue 28 (the seen misses that are classes, by mechanism), each from the real message templates."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text


def _text(report) -> str:
    from kvdoctor.report.check.text import render

    return " ".join(render(report).split())


def test_llvm_fatal_error_is_quoted_with_the_diagnostic_printed_above_it():
    # Triton's MLIR lowering prints its diagnostic bare, then LLVM's report_fatal_error line
    log = ("INFO 07-31 16:03:44 [llm.py:306] Supported_tasks: ['embed']\n"
           "Unsupported conversion from f16 to f16\n"
           "LLVM ERROR: Unsupported rounding mode for conversion.\n")
    assert "Unsupported conversion from f16 to f16; LLVM ERROR: Unsupported rounding mode" in _text(explain_text(log))
    # a log record above is not the diagnostic
    bare = log.replace("Unsupported conversion from f16 to f16\n", "")
    assert "Supported_tasks: ['embed']; LLVM ERROR" not in _text(explain_text(bare))


_UP = ("(APIServer pid=41) INFO 06-27 02:22:36 [api_server.py:486] Starting vLLM API server 0 on http://0.0.0.0:8080\n"
       '(APIServer pid=41) INFO:     10.0.0.3:52630 - "GET /v1/models HTTP/1.1" 200 OK\n')
_IMPORT_WARNING = ("(APIServer pid=41) WARNING 06-27 02:06:38 [interface.py:225] Failed to import from vllm._C: "
                   "ImportError('libcuda.so.1: cannot open shared object file: No such file or directory')\n")
_CRASH = ("(EngineCore_DP0 pid=243) ERROR 06-27 02:23:02 [core.py:1008] EngineCore encountered a fatal error.\n"
          "(EngineCore_DP0 pid=243) ERROR 06-27 02:23:02 [core.py:1008] Traceback (most recent call last):\n"
          '(EngineCore_DP0 pid=243) ERROR 06-27 02:23:02 [core.py:1008]   File "/x/vllm/v1/engine/core.py", line 411, '
          "in step\n"
          "(EngineCore_DP0 pid=243) ERROR 06-27 02:23:02 [core.py:1008]     model_output = future.result()\n"
          "(EngineCore_DP0 pid=243) ERROR 06-27 02:23:02 [core.py:1008] RuntimeError: Failed to execute the model "
          "status=1006 message=Execution Out-Of-Bounds Memory Access\n")


def test_a_warning_the_server_came_up_after_is_not_why_it_crashed_later():
    report = explain_text(_IMPORT_WARNING + _UP + _CRASH)
    assert report.findings[0].rule_id != "KVD341"
    assert "status=1006 message=Execution Out-Of-Bounds Memory Access" in _text(report)
    # the same warning with no server coming up between it and the crash still counts
    assert explain_text(_IMPORT_WARNING + _CRASH).findings[0].rule_id == "KVD341"


def test_vllm_ready_line_with_a_server_index_is_the_ready_line():
    from kvdoctor.explain.log_lines import normalise
    from kvdoctor.explain.verdict import ready_after

    assert ready_after(normalise(_UP), 0) is not None


_TORCHSCRIPT = (
    "  File \"/x/torch/nn/modules/module.py\", line 1786, in _call_impl\n"
    "    return forward_call(*args, **kwargs)\n"
    "RuntimeError: The following operation failed in the TorchScript interpreter.\n"
    "Traceback of TorchScript, serialized code (most recent call last):\n"
    '  File "code/__torch__/neuronx_distributed/trace/spmd.py", line 17, in forward\n'
    "    return (nxd_model).forward(_0, )\n"
    "            ~~~~~~~~~~~~~~~~~~ <--- HERE\n"
    "\n"
    "Traceback of TorchScript, original code (most recent call last):\n"
    '  File "/x/neuronx_distributed/trace/spmd.py", line 32, in forward\n'
    "            output = self.models[bucket_idx].forward(inputs)\n"
    "                     ~~~~~~~~~~~~~~~~~~~~~~~ <--- HERE\n"
    "RuntimeError: Failed to execute the model status=1006 message=Execution Out-Of-Bounds Memory Access\n")


def test_a_torchscript_interpreter_error_is_read_as_the_original_error_it_ends_with():
    log = "Traceback (most recent call last):\n" + _TORCHSCRIPT
    report = explain_text(log)
    finding = report.findings[0]
    assert "innermost exception: RuntimeError: Failed to execute the model status=1006" in _text(report)
    assert any("module.py:1786" in line for line in finding.evidence)  # the Python frames it was raised through


def test_a_missing_chat_template_keeps_its_family_at_request_time_and_says_the_clients_400s():
    log = ("INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)\n"
           + ("ERROR 02-22 18:32:42 serving_chat.py:147] Error in applying chat template from request: As of "
              "transformers v4.44, default chat template is no longer allowed, so you must provide a chat template "
              "if the tokenizer does not define one.\n"
              'INFO:     ::1:33760 - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request\n') * 3)
    report = explain_text(log)
    assert report.extra["family"] == "chat_template_missing"
    assert "3 request(s) to /v1/chat/completions were answered 400 Bad Request" in _text(report)


_NCCL_CRASH = (
    "(RayWorkerWrapper pid=221) ERROR 11-11 09:36:27 worker_base.py:464] Error executing method init_device. This "
    "might cause deadlock in distributed execution.\n"
    "(RayWorkerWrapper pid=221) ERROR 11-11 09:36:27 worker_base.py:464] Traceback (most recent call last):\n"
    '(RayWorkerWrapper pid=221) ERROR 11-11 09:36:27 worker_base.py:464]   File "/x/vllm/distributed/device_communicators'
    '/pynccl_wrapper.py", line 223, in NCCL_CHECK\n'
    '(RayWorkerWrapper pid=221) ERROR 11-11 09:36:27 worker_base.py:464]     raise RuntimeError(f"NCCL error: {error_str}")\n'
    "(RayWorkerWrapper pid=221) ERROR 11-11 09:36:27 worker_base.py:464]            ^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    "(RayWorkerWrapper pid=221) ERROR 11-11 09:36:27 worker_base.py:464] RuntimeError: NCCL error: unhandled system "
    "error (run with NCCL_DEBUG=INFO for details)\n"
    "Fatal Python error: Segmentation fault\n"
    "*** SIGSEGV received at time=1731346587 on cpu 0 ***\n")


def test_nccl_failing_to_reach_a_rank_is_the_network_interface_family():
    warn = ("node1:908:1048 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to "
            "fe80::1cec:56ff:fe9c:9ac7%11<42363> failed : Network is unreachable\n")
    report = explain_text(_NCCL_CRASH + warn)
    assert report.extra["family"] == "gloo_network_iface"
    assert "NCCL_SOCKET_IFNAME" in _text(report) and "Network is unreachable" in _text(report)


def test_an_error_pointing_at_its_details_has_them_quoted_first_and_no_traceback_parts():
    # an NCCL WARN line no rule knows: quoted first under the unknown failure, before the ERROR records above it
    warn = "node1:908:1048 [0] transport/net_ib.cc:1 NCCL WARN NET/IB : Got async event : port error\n"
    report = explain_text(_NCCL_CRASH + warn)
    cited = [line for line in report.findings[0].evidence if line.startswith("failure line")]
    assert "NCCL WARN NET/IB : Got async event" in cited[0]
    assert not any("Traceback (most" in line or line.rstrip().endswith("^^^") for line in cited)


def test_a_waiter_that_gave_up_has_its_limit_quoted_and_a_zero_limit_said():
    log = ("Jul 25 14:36:08 host lemond[594237]: 2026-07-25 14:36:08.360 [Info] (vLLM) Starting vllm-server on port 8001...\n"
           "Jul 25 14:36:08 host lemond[594237]: Waiting for vllm-server to be ready (timeout: {limit})...\n"
           "Jul 25 14:36:08 host lemond[594237]: 2026-07-25 14:36:08.362 [Error] (WrappedServer) vllm-server failed "
           "to start within timeout\n")
    zero = _text(explain_text(log.format(limit="0s")))
    assert "said its limit at line 2" in zero and "a limit of zero gives up the moment the wait starts" in zero
    long = _text(explain_text(log.format(limit="600s")))
    assert "said its limit at line 2" in long and "a limit of zero" not in long


def test_another_components_error_record_is_quoted_under_a_known_failure():
    log = ("AssertionError: Error in memory profiling. Initial free memory 23.4375 GiB, current free memory 23.4375 GiB."
           "\n\n[HAMI-core ERROR (utils.c:160)]: host pid is error!\n")
    report = explain_text(log)
    assert report.findings[0].rule_id != "KVD399"  # a rule knows the assert
    assert "another component's error record, line 3: [HAMI-core ERROR (utils.c:160)]: host pid is error!" in _text(report)
    # the shim's record alone is failure evidence
    assert explain_text("[HAMI-core ERROR (utils.c:160)]: host pid is error!\n").exit_code("error") == 1
    assert explain_text("[HAMI-core Msg(7:140:libvgpu.c:836)]: Initialized\n").exit_code("error") == 0


def test_a_plain_line_rule_has_the_logs_exception_quoted_beside_it():
    log = ("(Worker_TP1 pid=67809) ERROR 05-19 13:26:50 [multiproc_executor.py:962] AttributeError: 'Parameter' object "
           "has no attribute 'load_row_parallel_weight'\n"
           "(EngineCore pid=67456) ERROR 05-19 13:26:50 [core.py:1337] Invocation of collective_rpc method failed\n")
    report = explain_text(log)
    assert report.findings[0].rule_id == "KVD358"  # the framework's RPC rule, on a plain line
    assert ("exception in the log, line 1: AttributeError: 'Parameter' object has no attribute "
            "'load_row_parallel_weight'") in _text(report)


def test_a_cutlass_gemm_status_is_the_quantized_kernel_family():
    log = ("(EngineCore pid=293) ERROR 08-14 08:00:06 [core.py:1330] RuntimeError: cutlass_gemm_caller, /workspace/csrc/"
           "libtorch_stable/quantization/w8a8/cutlass/c3x/cutlass_gemm_caller.cuh:62, Error Internal\n")
    report = explain_text(log)
    assert report.extra["family"] == "quant_kernel_scheme" and report.findings[0].rule_id == "KVD425"
    assert "Error Internal" in report.findings[0].title
    # CUTLASS's success is no failure, and a status alone names no kernel
    assert explain_text("RuntimeError: Error Internal\n").findings[0].rule_id != "KVD425"


def test_waking_from_sleep_mode_without_the_memory_is_gpu_memory_occupied_even_after_start_up():
    log = ("(APIServer pid=47967) INFO:     Application startup complete.\n"
           '(APIServer pid=47967) INFO:     127.0.0.1:51530 - "POST /wake_up HTTP/1.1" 200 OK\n'
           "(EngineCore pid=48200) ERROR 06-02 14:31:01 [core.py:1365] RuntimeError: CUDA Error: out of memory at "
           "/workspace/csrc/cumem_allocator.cpp:139\n"
           "(APIServer pid=47967) Exception: Call to wake_up method failed: CUDA Error: out of memory at "
           "/workspace/csrc/cumem_allocator.cpp:139\n")
    report = explain_text(log)
    assert report.findings[0].rule_id == "KVD426" and report.extra["family"] == "gpu_memory_occupied"
    # the allocator's OOM at start-up (no wake_up) is not this rule's
    start_up = "RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62\n"
    assert explain_text(start_up).findings[0].rule_id != "KVD426"
