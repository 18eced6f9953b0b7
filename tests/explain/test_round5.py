"""Round 5 of issue 28: the mechanisms behind the misses of batches 8-9 of the real logs, each on synthetic variants
(reworded, cut short, reordered, under another process's tag) written from vLLM's, Ray's and torch's own wordings
(file:function beside each), never copied from a real log."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.log_lines import normalise
from kvdoctor.explain.message_index import load_index
from kvdoctor.explain.tracebacks import parse_chains
from kvdoctor.report.check.text import render


def _text(report) -> str:
    return " ".join(render(report).split())


def test_a_line_that_stops_inside_a_templates_opening_literal_is_located():
    index = load_index()
    # v1/executor/ray_utils.py:initialize_ray_cluster, "Placement group bundle cannot have more than 1 {}."
    assert index.locate("ValueError: Placement group bundle cannot have more than 1") is not None
    assert index.locate("ValueError: Placement group bundle") is None  # under MIN_PREFIX characters of it


def test_frames_pasted_under_their_exception_line_are_its_frames():
    # v1/core/kv_cache_utils.py:unify_kv_cache_spec_page_size raises a bare AssertionError
    log = ("AssertionError\n"
           '  File "vllm/v1/core/kv_cache_utils.py", line 1030, in unify_kv_cache_spec_page_size\n'
           "    assert max_page_size % layer_page_size == 0\n"
           "INFO 05-02 10:22:18 [launcher.py:1] Shutting down\n")
    (chain,) = parse_chains(normalise(log))
    (exception,) = chain.exceptions
    assert [f.function for f in exception.frames] == ["unify_kv_cache_spec_page_size"]
    assert exception.message == ""  # the frame is not part of the message
    report = explain_text(log)
    assert report.extra["family"] == "hybrid_block_size"
    assert "unify_kv_cache_spec_page_size" in _text(report)


def test_torch_c10_records_with_a_three_digit_date_are_failure_evidence():
    # torch's ProcessGroupNCCL watchdog, c10 logging ('[E822 ...]': the month's leading zero dropped)
    for line in ("[rank0]:[E822 16:31:16.131931664 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective "
                 "operation timeout: WorkNCCL(SeqNum=5730, OpType=BROADCAST) ran for 600009 milliseconds",
                 "E1204 10:22:18.123456 4711 socket.cpp:1] [c10d] connect failed"):
        report = explain_text(line + "\n")
        assert report.exit_code("error") == 1, line
    quiet = explain_text("[rank0]:[I822 16:31:16.131931664 ProcessGroupNCCL.cpp:632] [Rank 0] NCCL initialized\n")
    assert quiet.exit_code("error") == 0


def test_the_moe_grouped_gemms_own_no_kernel_wording_is_the_moe_family():
    # csrc cutlass_moe_mm (scaled_mm_entry.cu) vs the dense cutlass_scaled_mm's check
    moe = explain_text("RuntimeError: No compiled cutlass_scaled_mm for CUDA device capability: 120. "
                       "Required capability: 90 or 100\n")
    assert moe.extra["family"] == "moe_kernel_selection"
    assert "90 or 100" in _text(moe)
    dense = explain_text("NotImplementedError: No compiled cutlass_scaled_mm for a compute capability less than "
                         "CUDA device capability: 75\n")
    assert dense.extra["family"] == "quant_kernel_scheme"


def test_request_time_refusals_name_the_server_option_they_need():
    # entrypoints/openai/serving_chat.py (tool_choice "auto"); multimodal/processing.py:validate_num_items
    for line, shows in (
        ('{"object": "error", "message": "\\"auto\\" tool choice requires --enable-auto-tool-choice and '
         '--tool-call-parser to be set", "type": "BadRequestError", "code": 400}', "--enable-auto-tool-choice"),
        ("ValueError: At most 2 video(s) may be provided in one prompt.", "--limit-mm-per-prompt"),
    ):
        report = explain_text(line + "\n")
        assert report.extra["family"] == "first_request_failure", line
        assert shows in _text(report)


def test_a_wrapper_passing_a_keyword_this_vllm_lacks():
    for cls in ("AsyncEngineArgs", "LLM", "SamplingParams"):
        report = explain_text(f"TypeError: {cls}.__init__() got an unexpected keyword argument 'new_flag'\n")
        assert report.extra["family"] == "wrapper_api_mismatch", cls
        assert "new_flag" in _text(report) and cls in _text(report)


def test_vllms_argument_parser_refusals_under_either_program_name():
    for prog in ("api_server.py", "vllm"):
        report = explain_text(f"{prog}: error: unrecognized arguments: --enable-reasoning\n")
        assert report.extra["family"] == "serve_args", prog
        assert "--enable-reasoning" in _text(report)


def test_a_missing_local_model_path_read_as_a_repo_id_under_a_ray_tag():
    log = ("(RayWorkerWrapper pid=4, ip=10.0.0.2) ERROR 06-21 03:49:38 worker_base.py:148] "
           "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or "
           "'namespace/repo_name': '/data/models/qwen'. Use `repo_type` argument if needed.\n")
    report = explain_text(log)
    assert report.extra["family"] == "model_config_missing"
    assert "/data/models/qwen" in _text(report)


def test_more_last_words_are_failure_evidence_and_their_healthy_forms_are_not():
    failing = [
        "3f2a   vllm/vllm-openai:latest   \"vllm serve\"   2 minutes ago   Exited (1) 1 minute ago",  # docker ps
        "Process exited with signal 9",
        "[rank1]:[W1204 10:22:18.000 ProcessGroupNCCL.cpp:1] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=1) ran for 600000 milliseconds before timing out.",
        "Unable to determine the device handle for GPU0000:01:00.0: Unknown Error",  # nvidia-smi, a GPU lost
        "[rank0]:[W1204 10:22:18.000 ProcessGroupNCCL.cpp:1] [PG ID 0 PG GUID 0 Rank 0] Timeout at NCCL work: 5, last "
        "enqueued NCCL work: 5, last completed NCCL work: 4.",
        "INFO 05-02 10:22:18 [api_server.py:1] vLLM API server version 0.9.2\n    RuntimeError: Engine loop has died",
    ]
    for log in failing:
        assert explain_text(log + "\n").exit_code("error") == 1, log
    healthy = [
        "3f2a   vllm/vllm-openai:latest   \"vllm serve\"   2 minutes ago   Exited (0) 1 minute ago",
        "INFO 05-02 10:22:18 [api_server.py:1] vLLM API server version 0.9.2\n    Started server process [7]",
    ]
    for log in healthy:
        assert explain_text(log + "\n").exit_code("error") == 0, log


def test_an_error_line_is_quoted_with_the_lines_that_continue_it():
    # the container runtime's error, wrapped by the terminal: the flag it names is on the last line
    log = ("docker: Error response from daemon: failed to create task for container: error running prestart hook #0:\n"
           "invoking the NVIDIA Container Runtime Hook directly (e.g. specifying the docker --gpus flag) is not\n"
           "supported. Please use the NVIDIA Container Runtime (e.g. specify the --runtime=nvidia flag) instead\n")
    report = explain_text(log)
    assert report.exit_code("error") == 1
    assert "--runtime=nvidia" in _text(report)


def test_rocm_and_argparse_shapes_of_known_families():
    assert explain_text("RuntimeError: HIP error: invalid device function\n").extra["family"] == "no_kernel_image"
    report = explain_text("usage: vllm serve [model_tag] [options]\nvllm serve: error: argument --limit-mm-per-prompt: "
                          "Value image=5 cannot be converted to <function loads at 0x7f4b777cfc70>.\n")
    assert report.extra["family"] == "serve_args" and "image=5" in _text(report)


# The same raise site's wording in other releases (message index: renderers/params.py, fp8.py:create_weights,
# executor/ray_utils.py:initialize_ray_cluster, qwen3_next.py:__init__, deepseek_v41/attention.py,
# chat_utils.py:validate_chat_template), each filled in as a log would print it.
SIBLING_WORDINGS = [
    ("ValueError: This model's maximum context length is 4096 tokens. However, your prompt contains 5016 input tokens, "
     "which exceeds this limit even without any output tokens.", "prompt_exceeds_max_model_len", "4096"),
    ("ValueError: You passed 5016 input tokens and requested 16 output tokens. However, the model's context length is "
     "only 4096 tokens, resulting in a maximum input length of 4080 tokens.", "prompt_exceeds_max_model_len", "5016"),
    ("ValueError: Weight output_partition_size = 1408 is not divisible by weight quantization block_n = 128.",
     "parallel_divisibility", "1408"),
    ("ValueError: The output_size of gate's and up's weight = 704 is not divisible by weight quantization block_n = 128.",
     "parallel_divisibility", "704"),
    ("ValueError: The number of required GPUs exceeds the total number of available GPUs in the placement group."
     "Required number of devices: 8. Total number of devices: 4.", "device_placement", "8"),
    ("NotImplementedError: Qwen3Next currently does not support prefix caching", "hybrid_block_size", "Qwen3Next"),
    ("ValueError: Weight input_size_per_partition = 1376 is not divisible by group_size = 128. Consider reducing "
     "tensor_parallel_size or running with --quantization gptq.", "parallel_divisibility", "group_size = 128"),
    ("ValueError: DeepseekV4 packed KV layouts only support fp8 kv-cache, got bfloat16.", "mla_sparse", "bfloat16"),
    ("ValueError: the supplied chat template path doesn't exist", "serve_args", "chat template"),  # the flag's value (KVD423)
]


def test_other_releases_wordings_of_a_known_raise_site_land_in_its_family():
    for log, family, shows in SIBLING_WORDINGS:
        report = explain_text(log + "\n")
        assert report.extra["family"] == family, log
        assert shows in _text(report), (shows, log)


def test_the_command_line_in_a_log_gives_the_runs_serve_facts():
    from kvdoctor.explain.command_line import command_facts

    log = ("$ vllm serve nvidia/Llama-3.1-8B --kv-cache-dtype nvfp4 \\\n"
           "    --tensor-parallel-size=2 --gpu-memory-utilization 0.85 \\\n"
           "    --max-model-len 8192\n"
           "INFO 05-02 10:22:18 [api_server.py:1] vLLM API server version 0.30.0\n")
    facts = command_facts(normalise(log))
    assert facts["model.model_id"] == "nvidia/Llama-3.1-8B" and facts["serve.kv_cache_dtype"] == "nvfp4"
    assert facts["serve.tensor_parallel_size"] == 2 and facts["serve.max_model_len"] == 8192
    assert facts["serve.gpu_memory_utilization"] == 0.85
    assert command_facts(normalise("python -m vllm.entrypoints.openai.api_server --model m\n"))[
        "serve.tensor_parallel_size"] == 1  # the command shows no -tp: vLLM's default
    assert command_facts(normalise("pip install vllm\n")) == {}
    assert command_facts(normalise("usage: vllm serve [model_tag] [options]\n")) == {}  # argparse, not a run
    assert "serve.tensor_parallel_size" not in command_facts(normalise("vllm serve m --tensor-parallel-size $TP\n"))


def test_a_selector_refusal_without_the_kv_dtype_takes_it_from_the_command():
    refusal = "ValueError: Selected backend FLASHINFER is not valid for this configuration. Reason: ['kv_cache_dtype not supported']\n"
    for dtype, family in (("nvfp4", "nvfp4_kv"), ("turboquant_4bit_nc", "turboquant"), ("fp8", "kv_dtype_backend")):
        assert explain_text(f"vllm serve m --kv-cache-dtype {dtype}\n" + refusal).extra["family"] == family, dtype


def test_a_marlin_tile_refusal_on_one_gpu_is_the_kernel_not_the_parallel_layout():
    refusal = ("ValueError: Weight input_size_per_partition = 10944 is not divisible by min_thread_k = 128. Consider "
               "reducing tensor_parallel_size or running with --quantization gptq.\n")
    assert explain_text("vllm serve m --quantization awq_marlin\n" + refusal).extra["family"] == "quant_kernel_scheme"
    assert explain_text("vllm serve m -tp 4\n" + refusal).extra["family"] == "parallel_divisibility"
    assert explain_text(refusal).extra["family"] == "parallel_divisibility"  # the layout unknown: as before
    # vLLM's own engine config wins over the command it was given
    config = "INFO 05-02 10:22:18 [llm_engine.py:1] Initializing an LLM engine (v0.6.3) with config: tensor_parallel_size=2\n"
    assert explain_text("vllm serve m\n" + config + refusal).extra["family"] == "parallel_divisibility"


WRAPPER = ("Traceback (most recent call last):\n  File \"/usr/bin/vllm\", line 8, in <module>\n    sys.exit(main())\n"
           "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n")


def test_a_wrapper_exception_after_the_failing_processs_own_error_line_is_not_the_failure():
    # torch's NCCL watchdog (c10 record) or the container runtime's error, then vLLM's wrapper
    for failure, shows in (
        ("[rank0]:[E822 16:31:16.131931664 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation "
         "timeout: WorkNCCL(SeqNum=5730, OpType=BROADCAST) ran for 600009 milliseconds before timing out.",
         "Watchdog caught collective operation timeout"),
        ("docker: Error response from daemon: could not select device driver \"\" with capabilities: [[gpu]].",
         "could not select device driver"),
    ):
        report = explain_text(failure + "\n" + WRAPPER)
        assert report.exit_code("error") == 1
        assert shows in report.findings[0].cause, report.findings[0].cause
    # the wrapper's own traceback, logged at ERROR by vLLM, does not replace it (a request-time wrapper keeps its frames)
    alone = explain_text(WRAPPER)
    assert "Engine core initialization failed" in alone.findings[0].cause


def test_a_failed_import_printed_alone_is_the_failure_and_a_failure_no_family_names_is_other():
    log = ("(TemporaryActor pid=1) No module named 'vllm'\n(TemporaryActor pid=1) Traceback (most recent call last):\n"
           "(TemporaryActor pid=1)   File \"/venv/lib/python3.12/site-packages/ray/_private/serialization.py\", line "
           "460, in deserialize_objects\n")
    report = explain_text(log)
    assert report.exit_code("error") == 1 and report.extra["family"] == "other"
    assert "No module named 'vllm'" in _text(report)
    assert explain_text("WARNING 05-02 10:22:18 [x.py:1] Failed to import: No module named 'xformers'\n"
                        ).exit_code("error") == 0


def test_records_of_other_logging_formats_are_not_joined_as_one_message():
    from kvdoctor.explain.tracebacks import continued

    log = ("2025-03-09 17:31:06.118 | WARNING  | __main__:main:19 - Processing your request...\n"
           "2025-03-09 17:31:06.120 | INFO     | app.agent.base:run:137 - Executing step 1/30\n"
           "2025-03-09 17:31:06.249 | ERROR    | app.llm:ask_tool:260 - API error: Error code: 400\n")
    lines = normalise(log)
    assert all(continued(lines, i) is None for i in range(len(lines))), [line.text for line in lines]
    assert continued(normalise("ValueError: first part\nsecond part\n"), 0) == "ValueError: first part second part"


def test_an_oom_allocating_the_kv_cache_is_memory_taken_after_the_profile_not_the_profile():
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 642.00 MiB. GPU\n"
    for frame in ('  File "/venv/lib/python3.11/site-packages/vllm/worker/cache_engine.py", line 64, in _allocate_kv_cache',
                  '  File "/venv/vllm/v1/worker/gpu_model_runner.py", line 3780, in _allocate_kv_cache_tensors'):
        report = explain_text(f"Traceback (most recent call last):\n{frame}\n    tensor = torch.zeros(size)\n{oom}")
        assert report.extra["family"] == "gpu_memory_occupied", frame
        assert "642.00 MiB" in _text(report)
    profile = explain_text('Traceback (most recent call last):\n  File "/venv/vllm/v1/worker/gpu_model_runner.py", '
                           f'line 9, in profile_run\n    self._dummy_run()\n{oom}')
    assert profile.extra["family"] == "oom_profiling"


def test_an_exception_python_reported_and_dropped_does_not_fail_the_run():
    ignored = ("INFO 05-02 10:22:18 [launcher.py:1] Shutting down FastAPI HTTP server.\n"
               "Exception ignored in: <function _ExecutorManagerThread.__del__ at 0x7f>\n"
               "Traceback (most recent call last):\n"
               '  File "/usr/lib/python3.10/concurrent/futures/process.py", line 1, in __del__\n'
               "ImportError: sys.meta_path is None, Python is likely shutting down\n")
    assert explain_text(ignored).exit_code("error") == 0
    failing = ignored + ('Traceback (most recent call last):\n  File "vllm/x.py", line 1, in f\n'
                         "ValueError: the run's own failure\n")
    report = explain_text(failing)
    assert report.exit_code("error") == 1 and "the run's own failure" in report.findings[0].cause


def test_cuda_803_804_by_the_code_alone_when_the_text_is_cut():
    log = ("RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
           "NumCudaDevices() that might have already set an error? Error 804: forward compat...\n")
    report = explain_text(log)
    assert report.extra["family"] == "cuda_compat_803" and "804" in _text(report)


def test_a_reporters_note_that_there_was_no_error_is_not_failure_evidence():
    head = "INFO 05-02 10:22:18 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000\n"
    for note in ("运行正常，没有报错", "启动成功，无异常", "没有任何报错", "不会报错"):  # 'no error', 'no exception'
        assert explain_text(head + note + "\n").exit_code("error") == 0, note
    for note in ("报错信息如下", "启动失败"):  # 'the error message follows', 'start-up failed'
        assert explain_text(head + note + "\n").exit_code("error") == 1, note


def test_an_error_count_or_rate_of_none_is_not_failure_evidence():
    head = "INFO 05-02 10:22:18 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000\n"
    for line in ("Error rate: 0.00%", "error: none", "Error count: 0"):
        assert explain_text(head + line + "\n").exit_code("error") == 0, line
    for line in ("error: cannot find -lcuda", "Error rate: 5%", "ERROR: Could not build wheels for vllm"):
        assert explain_text(head + line + "\n").exit_code("error") == 1, line


def test_an_error_quoted_as_an_example_in_backticks_is_not_failure_evidence():
    # vllm/utils: the ulimit warning, pasted without its record header
    warning = ("Found ulimit of 1024 and failed to automatically increase with error current limit exceeds maximum "
               "limit. This can cause fd limit errors like `OSError: [Errno 24] Too many open files`. Consider "
               "increasing with ulimit -n\n")
    assert explain_text(warning).exit_code("error") == 0
    assert explain_text("worker-3 OSError: [Errno 28] No space left on device\n").exit_code("error") == 1


def test_a_python_call_in_the_log_gives_the_runs_facts_too():
    from kvdoctor.explain.command_line import command_facts

    facts = command_facts(normalise('llm = LLM(model="nvidia/X", kv_cache_dtype="nvfp4",\n    tensor_parallel_size=2)\n'))
    assert facts["model.model_id"] == "nvidia/X" and facts["serve.kv_cache_dtype"] == "nvfp4"
    assert facts["serve.tensor_parallel_size"] == 2
    # variables are not values; a call the log cuts short does not default what it does not show
    variables = command_facts(normalise("    llm = LLM(model=args.model, tensor_parallel_size=args.tp)\n"))
    assert "model.model_id" not in variables and "serve.tensor_parallel_size" not in variables
    assert "serve.tensor_parallel_size" not in command_facts(normalise('args = AsyncEngineArgs(model="m",\n'))
    refusal = ("ValueError: Selected backend FLASHINFER is not valid for this configuration. "
               "Reason: ['kv_cache_dtype not supported']\n")
    assert explain_text('llm = LLM(model="m", kv_cache_dtype="nvfp4")\n' + refusal).extra["family"] == "nvfp4_kv"


def test_a_log_cut_to_its_last_lines_keeps_torchs_cuda_error_epilogue_as_failure_evidence():
    for tail in ("Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
                 "Device-side assertions were explicitly omitted for this error check; the error probably arose while "
                 "initializing the DSA handlers.",  # batch 74 (LMCache demo#6): torch's third wording
                 "[rank0]: For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
                 "HIP kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
                 "might be incorrect.",
                 "{'GPU': 1.0} * 2 (PACK): 1+ pending placement groups",  # ray status: a group it cannot place
                 "compilation terminated."):
        assert explain_text(tail + "\n").exit_code("error") == 1, tail
    for healthy in ("0 pending placement groups", "INFO 05-02 10:22:18 [x.py:1] CUDA_LAUNCH_BLOCKING is not set"):
        assert explain_text(healthy + "\n").exit_code("error") == 0, healthy


def test_a_traceback_cut_to_its_caret_lines_is_a_failure_but_not_inside_an_ignored_one():
    cut = "    return self._process_result_message(result)\n           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    assert explain_text(cut).exit_code("error") == 1
    ignored = ("Exception ignored in: <function X.__del__ at 0x7f>\nTraceback (most recent call last):\n"
               '  File "/usr/lib/python3.10/a.py", line 1, in __del__\n    self.close()\n    ^^^^^^^^^^^^\n'
               '  File "/usr/lib/python3.10/b.py", line 2, in close\n    x()\n'
               "ImportError: sys.meta_path is None, Python is likely shutting down\n")
    assert explain_text(ignored).exit_code("error") == 0


def test_a_json_records_fields_pasted_without_braces_are_read_as_the_record():
    """A structured logger's record copied without its braces ('"message":"...Error: ..."', as a serverless worker's
    log viewer shows it) is read as that record: its message is the line, so its exception is failure evidence."""
    from kvdoctor.explain.explain import explain_text
    from kvdoctor.explain.log_lines import json_fields

    line = ('"message":"huggingface_hub.utils._errors.HfHubHTTPError: 504 Server Error: Gateway Time-out for url: '
            'https://huggingface.co/api/models/org/model",')
    assert json_fields(line)[0].startswith("huggingface_hub.utils._errors.HfHubHTTPError: 504")
    assert json_fields('"not json": at all') is None and json_fields("plain text") is None
    report = explain_text(line + "\n")
    assert report.exit_code("error") == 1 and report.extra.get("family") == "hf_download"


def test_prose_quoting_what_happened_in_inline_code_is_failure_evidence():
    # a lab note's summary line: the exception it hit, quoted in backticks, is the failure (an example is not)
    note = "**Problem:** deploying the model we hit `GatedRepoError: 401 Client Error. Access to model is restricted.`\n"
    report = explain_text(note)
    assert report.exit_code("error") == 1 and report.extra["family"] == "hf_download"
    listed = "  - `ValueError: Paged attention: requested memory exceeds available RAM`\n"
    assert explain_text(listed).exit_code("error") == 1
    assert explain_text("Errors such as `ValueError: x` are retried.\n").exit_code("error") == 0
