"""How a start-up's log becomes an outcome (gpu_verify/startups/outcome.py): realistic log shapes, no GPU."""

from __future__ import annotations

import json

from gpu_verify.startups.outcome import classify, is_env_error, log_tail, stack_dump

COMPILE_CHAIN = [
    {"type": "CompilationError", "message": "at 120:20:\n    k_fp8 = k_vals.to(tl.float8e4b15) if FP8_E4B15 else ...",
     "where": "triton/compiler/code_generator.py:1500 in visit_Call"},
    {"type": "AssertionError", "message": "", "where": "triton/language/extra/cuda/utils.py:94 in convert_custom_float8"},
]


def log(*lines: str, result: dict | None = None) -> str:
    body = list(lines)
    if result is not None:
        body.append("KVD-RESULT " + json.dumps(result))
    return "\n".join(body) + "\n"


def test_tokens_mean_started():
    text = log("KVD-PHASE imported 11.2", "INFO Using FLASH_ATTN backend.", "KVD-PHASE engine_ready 40.0",
               "KVD-PHASE generated 41.5", result={"id": "x", "ok": True, "tokens": [5, 9, 9, 1], "total_s": 41.5})
    out = classify(text, 0)
    assert out["outcome"] == "started"
    assert out["phases"] == {"imported": 11.2, "engine_ready": 40.0, "generated": 41.5}
    assert out["backends_logged"] == ["FLASH_ATTN"]
    assert "4 tokens" in out["summary"]


def test_innermost_error_is_the_deepest_cause():
    out = classify(log("Traceback ...", result={"id": "x", "ok": False, "error": COMPILE_CHAIN}), 0)
    assert out["outcome"] == "failed"
    assert out["innermost"]["type"] == "AssertionError"
    assert out["summary"].startswith("CompilationError <- AssertionError")


def test_auto_message_summary_keeps_the_message():
    chain = [{"type": "ValueError", "message": "Unknown TurboQuant cache dtype: 'auto'. Valid presets: [...]",
              "where": "vllm/model_executor/layers/quantization/turboquant/config.py:88 in from_cache_dtype"}]
    out = classify(log(result={"id": "x", "ok": False, "error": chain}), 0)
    assert out["summary"] == "ValueError: Unknown TurboQuant cache dtype: 'auto'. Valid presets: [...]"


def test_machine_errors_are_not_verdicts():
    abi = [{"type": "ImportError", "message": "/tmp/site/vllm/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDevice",
            "where": None}]
    missing = [{"type": "RuntimeError", "message": "x", "where": None},
               {"type": "ModuleNotFoundError", "message": "No module named 'tilelang'", "where": None}]
    assert is_env_error(abi) and is_env_error(missing)
    assert not is_env_error(COMPILE_CHAIN)
    assert classify(log(result={"id": "x", "ok": False, "error": abi}), 0)["outcome"] == "env_error"


def test_timeout_keeps_the_last_phase_and_the_stack():
    text = log("KVD-PHASE imported 10.0", "KVD-PHASE engine_ready 70.3", "INFO some vLLM line",
               "Thread 0x00007f0000000001 (most recent call first):",
               '  File "/usr/lib/python3.12/threading.py", line 359 in wait',
               "",
               "Current thread 0x00007f0000000002 (most recent call first):",
               '  File "/tmp/site/vllm/v1/attention/ops/triton_turboquant_decode.py", line 566 in triton_turboquant_decode_attention',
               '  File "/tmp/site/vllm/v1/attention/backends/turboquant_attn.py", line 930 in _decode_attention',
               "Killed")
    out = classify(text, -9, timed_out=True)
    assert out["outcome"] == "timeout"
    assert "engine_ready" in out["summary"]
    stack = stack_dump(text)
    assert stack[0].startswith("Thread 0x")
    assert any("triton_turboquant_decode.py" in line for line in stack)
    assert "Killed" not in stack


def test_deadline_cut_is_not_a_timeout():
    assert classify(log("KVD-PHASE imported 3.0"), -9, timed_out=True, cut=True)["outcome"] == "cut"


def test_crash_without_result():
    text = log("KVD-PHASE imported 9.0", "Fatal Python error: Segmentation fault", "", "Current thread 0x1 (most recent call first):")
    out = classify(text, -11)
    assert out["outcome"] == "crashed"
    assert "Segmentation fault" in out["summary"]


def test_log_tail_drops_the_result_line():
    text = log("a", "b", result={"id": "x", "ok": True, "tokens": [1]})
    assert log_tail(text, 5) == ["a", "b"]


def test_an_error_raised_by_the_limits_signal_is_a_timeout_not_a_verdict():
    # FlashInfer's JIT compiler child, killed by the SIGUSR1 the runner sends at the case's limit (drawn grid, 12-07)
    chain = [{"type": "RuntimeError", "message": "Ninja build failed. Ninja output:\nninja: Entering directory ...",
              "where": "flashinfer/jit/cpp_ext.py:380 in run_ninja"},
             {"type": "CalledProcessError", "message": "Command '['ninja', '-v']' died with <Signals.SIGUSR1: 10>.",
              "where": "subprocess.py:571 in run"}]
    text = log("KVD-PHASE imported 20.0", result={"id": "x", "ok": False, "error": chain})
    assert classify(text, 0, timed_out=True)["outcome"] == "timeout"
    assert classify(text, 0)["outcome"] == "failed"  # the same error before any limit is a verdict
