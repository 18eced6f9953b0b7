"""Round 19 of issue 28: the mechanisms behind misses of batch 44 and older seen logs (a record pasted without its
time, a traceback cut at both ends, a frame whose line number an excerpt elided, a communication library's error
record), each on synthetic lines written from vLLM's, UCX's and Python's own formats, never copied from a real log."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.log_lines import normalise
from kvdoctor.explain.tracebacks import parse_chains
from kvdoctor.report.check.text import render


def _text(report) -> str:
    return " ".join(render(report).split())


def test_a_vllm_record_pasted_without_its_time_is_still_a_record():
    """'INFO [file.py:N] msg' ends the message of an exception above it instead of being joined onto it."""
    lines = normalise("NotImplementedError: \"remainder_cuda\" not implemented for 'Float8_e4m3fn'\n"
                      "INFO [__init__.py:389] Selected FlashInferFp8DeepGEMMDynamicBlockScaledKernel for Fp8LinearMethod\n")
    assert lines[1].level == "INFO" and lines[1].source == "__init__.py:389"
    (chain,) = parse_chains(lines)
    assert chain.innermost.joined == "\"remainder_cuda\" not implemented for 'Float8_e4m3fn'"


def test_a_frame_whose_line_number_the_excerpt_elided_is_still_a_frame():
    log = ('Traceback (most recent call last):\n'
           '  File "vllm/utils/deep_gemm.py", line ..., in should_use_deepgemm_for_fp8_linear\n'
           '    and weight_shape[0] % N_MULTIPLE == 0\n'
           "TypeError: unsupported operand type(s) for %: 'Tensor' and 'int'\n")
    (chain,) = parse_chains(normalise(log))
    (frame,) = chain.innermost.frames
    assert (frame.file, frame.line, frame.function) == ("vllm/utils/deep_gemm.py", 0, "should_use_deepgemm_for_fp8_linear")


def test_a_traceback_cut_at_both_ends_is_one_failure_with_its_innermost_frames():
    """An excerpt that starts inside a traceback logged at ERROR and stops before its exception: one failure,
    named by its innermost frames, not each frame's line as an error message of its own."""
    tag = "(EngineCore_DP0 pid=9) ERROR 11-06 06:17:47 [core.py:784] "
    log = "".join(tag + line + "\n" for line in [
        '  File "/opt/venv/lib/python3.12/site-packages/vllm/model_executor/layers/fused_moe/layer.py", line 500, '
        "in __init__",
        "    self.quant_method = quant_config.get_quant_method(self, prefix)",
        '  File "/opt/venv/lib/python3.12/site-packages/vllm/model_executor/layers/quantization/moe_wna16.py", '
        "line 161, in get_quant_method",
        "    return MoeWNA16Method(self, layer.moe_config)",
    ])
    report = explain_text(log)
    assert report.exit_code("error") == 1
    text = _text(report)
    assert "a traceback cut at both ends" in text and "vllm/model_executor/layers/quantization/moe_wna16.py" in text
    assert "ERROR: self.quant_method" not in text  # a code line is not a message


def test_a_cut_traceback_ending_in_an_assert_is_that_assertion():
    tag = "(Worker_TP0 pid=70) ERROR 02-08 08:39:04 [multiproc_executor.py:852] "
    log = "".join(tag + line + "\n" for line in [
        '  File "/usr/lib/python3.12/site-packages/vllm/model_executor/layers/mamba/ops/causal_conv1d.py", '
        "line 1160, in causal_conv1d_update",
        "    assert num_cache_lines >= batch",
    ])
    (chain,) = parse_chains(normalise(log))
    assert chain.innermost.type == "AssertionError"
    assert "num_cache_lines >= batch" in _text(explain_text(log))


def test_a_ucx_error_record_is_the_failure_before_a_cut_engine_traceback():
    log = ("[1754890927.298391] [node-0:270  :0]    ib_mlx5dv_md.c:1100 UCX  ERROR mlx5_3: ibv_modify_qp(UMR QP "
           "0x1a2b) failed to modify to RTR: No such device\n"
           "ERROR 08-10 22:42:07 [core.py:586] EngineCore failed to start.\n"
           "ERROR 08-10 22:42:07 [core.py:586] Traceback (most recent call last):\n"
           'ERROR 08-10 22:42:07 [core.py:586]   File "/usr/lib/python3.12/site-packages/vllm/v1/engine/core.py", '
           "line 577, in run_engine_core\n"
           "ERROR 08-10 22:42:07 [core.py:586]     engine_core = EngineCoreProc(*args, **kwargs)\n")
    text = _text(explain_text(log))
    assert "mlx5_3: ibv_modify_qp" in text and "ERROR: engine_core = EngineCoreProc" not in text


def test_a_v0_worker_record_is_the_workers_exception_with_the_frames_under_it():
    """executor/multiproc_worker_utils.py (V0): "Exception in worker %s while processing method %s: %s, %s", the
    message without its type, then the traceback under the same record header."""
    tag = "(VllmWorkerProcess pid=7) ERROR 09-20 08:05:48 multiproc_worker_utils.py:226] "
    log = "".join(tag + line + "\n" for line in [
        "Exception in worker VllmWorkerProcess while processing method init_device: widgets are not supported, "
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.10/site-packages/vllm/worker/worker.py", line 170, in init_device',
        "    self.init_widgets()",
    ])
    (chain,) = parse_chains(normalise(log))
    exception = chain.innermost
    assert (exception.type, exception.message) == ("Error", "widgets are not supported")
    assert [f.function for f in exception.frames] == ["init_device"]
    assert explain_text(log).exit_code("error") == 1


COLAB_CUT = """\
INFO 07-02 23:55:15 [model_runner.py:1203] Model loading took 2.2550 GiB and 30.916279 seconds
---------------------------------------------------------------------------
RuntimeError                              Traceback (most recent call last)
[/usr/local/lib/python3.11/dist-packages/vllm/lora/ops/triton_ops/lora_expand_op.py](https://localhost:8080/#) in _lora_expand(inputs)
    120
--> 121     _lora_expand_kernel[grid](
    122         inputs,

[/usr/local/lib/python3.11/dist-packages/triton/runtime/jit.py](https://localhost:8080/#) in run(self, grid, *args)
--> 569             kernel = self.compile(src, target=target, options=options.__dict__)
"""


def test_an_ipython_traceback_cut_before_its_message_is_a_failure_of_the_type_its_header_names():
    """IPython prints the exception's type in the header: a notebook's traceback cut before its last line still
    shows the failure, with the innermost frame and the innermost in vLLM."""
    report = explain_text(COLAB_CUT)
    assert report.exit_code("error") == 1
    text = _text(report)
    assert "RuntimeError (an IPython traceback the log cuts before its message" in text
    assert "vllm/lora/ops/triton_ops/lora_expand_op.py in _lora_expand" in text


def test_an_ipython_traceback_with_its_exception_line_or_a_keyboard_interrupt_is_not_read_as_cut():
    complete = COLAB_CUT + "RuntimeError: PassManager::run failed\n"
    assert "cuts before its message" not in _text(explain_text(complete))
    interrupted = COLAB_CUT.replace("RuntimeError      ", "KeyboardInterrupt ")
    assert "cuts before its message" not in _text(explain_text(interrupted))


def test_the_suggested_check_reruns_the_command_vllms_non_default_args_record_stands_for():
    """api_server's 'non-default args: {...}' (0.10+): each readable top-level arg as its flag; an enum's repr, a
    long config dump and where the server listens are left out, and a record the log cut loses only its last item."""
    from kvdoctor.explain.log_facts import read_facts

    record = ("(APIServer pid=1) INFO 07-16 19:30:20 [api_utils.py:273] non-default args: {'model_tag': 'org/m', "
              "'host': '0.0.0.0', 'model': 'org/m', 'tensor_parallel_size': 4, 'enable_expert_parallel': True, "
              "'enforce_eager': False, 'gpu_memory_utilization': 0.94, 'cpu_offload_params': ['experts'], "
              "'kv_transfer_config': {'kv_connector': 'OffloadingConnector', 'kv_role': 'kv_both'}, "
              "'compilation_config': {'mode': <CompilationMode.VLLM_COMPILE: 3>, 'backend': 'inductor'}, "
              "'max_num_seqs': 1, 'max_num_batched_tok")
    facts, _ = read_facts(normalise(record + "\n"))
    assert facts["logged.command"] == (
        "vllm serve org/m --tensor-parallel-size 4 --enable-expert-parallel --gpu-memory-utilization 0.94 "
        "--cpu-offload-params experts --kv-transfer-config "
        "'{\"kv_connector\":\"OffloadingConnector\",\"kv_role\":\"kv_both\"}' --max-num-seqs 1")
