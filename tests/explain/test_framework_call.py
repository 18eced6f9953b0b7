"""A failure no rule knows whose traceback runs through a framework built on vLLM (explain/framework_call.py): the
finding names where the two meet and the family is wrapper_api_mismatch, unless the framework only passed on what it
caught or the failure was raised further in by neither. The logs are written here in real logs' shapes."""

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.framework_call import framework_call
from kvdoctor.explain.tracebacks import Frame, LoggedException

SITE = "/opt/conda/lib/python3.11/site-packages"


def _traceback(frames: list[tuple[str, int, str, str]], last: str) -> str:
    body = "".join(f'  File "{file}", line {line}, in {function}\n    {code}\n' for file, line, function, code in frames)
    return "Traceback (most recent call last):\n" + body + last + "\n"


def test_a_framework_calling_into_vllm_is_where_they_meet():
    log = _traceback([
        (f"{SITE}/lighteval/models/vllm/vllm_model.py", 512, "_create_auto_model", "model = LLM(**self.model_args)"),
        (f"{SITE}/vllm/entrypoints/llm.py", 243, "__init__", "self.llm_engine = LLMEngine.from_engine_args("),
        (f"{SITE}/vllm/config/model.py", 871, "_verify_quantization", "raise ValueError("),
    ], "ValueError: Frobnicated weights are not supported by the zorblax loader in this build.")
    report = explain_text(log)
    assert report.exit_code("error") == 1
    assert report.extra["family"] == "wrapper_api_mismatch"
    call = report.extra["framework_call"]
    assert call["framework"] == "lighteval" and call["frame"].endswith("vllm_model.py:512 in _create_auto_model")
    assert call["into_vllm"].endswith("vllm/entrypoints/llm.py:243 in __init__")
    first = report.findings[0]
    assert "where lighteval, a framework built on vLLM, meets vLLM" in first.cause
    assert first.fixes[0].title.startswith("Install the vLLM release lighteval's version pins")


def test_a_frameworks_own_check_in_a_source_checkout():
    log = _traceback([
        ("/workspace/prime-rl/src/prime_rl/orchestrator/zorb.py", 88, "__init__",
         "assert self.zorb_size == expected, f\"...\""),
    ], "AssertionError: zorb size 3 does not match the rollout's 4")
    report = explain_text(log)
    assert report.extra["family"] == "wrapper_api_mismatch"
    assert report.extra["framework_call"]["framework"] == "prime-rl"
    assert report.extra["framework_call"]["into_vllm"] is None


def test_passed_on_or_raised_further_in_is_not_the_meeting():
    frames = lambda *tail: [(f"{SITE}/unsloth_zoo/vllm_utils.py", 1051, "load_vllm", "raise RuntimeError(error)")] + list(tail)
    passed_on = LoggedException("RuntimeError", "something odd", tuple(Frame(f, n, fn, c) for f, n, fn, c in frames()),
                                "", 9)
    assert framework_call(passed_on, {"unsloth_zoo": "Unsloth"}) is None
    further_in = LoggedException("CompilationError", "at 63:4", tuple(
        Frame(f, n, fn, c) for f, n, fn, c in
        [(f"{SITE}/unsloth_zoo/vllm_utils.py", 900, "load_vllm", "kernel[grid](x)"),
         (f"{SITE}/triton/runtime/jit.py", 345, "run", "kernel = self.compile(")]), "", 9)
    assert framework_call(further_in, {"unsloth_zoo": "Unsloth"}) is None
    # a folder named like a framework inside another installed package is not the framework
    inside_torch = LoggedException("ValueError", "x", (Frame(f"{SITE}/torch/swift/x.py", 1, "f", "raise ValueError('x')"),),
                                   "", 9)
    assert framework_call(inside_torch, {"swift": "ms-swift"}) is None


def test_a_failure_a_rule_knows_keeps_its_family():
    log = _traceback([
        (f"{SITE}/verl/workers/fsdp_workers.py", 610, "init_model", "self.rollout = vLLMRollout(...)"),
        (f"{SITE}/vllm/v1/worker/gpu_worker.py", 230, "determine_available_memory", "self.model_runner.profile_run()"),
        (f"{SITE}/torch/cuda/memory.py", 10, "empty", "raise OutOfMemoryError"),
    ], "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB "
       "of which 1.2 GiB is free.")
    report = explain_text(log)
    assert report.extra["family"] != "wrapper_api_mismatch" and "framework_call" not in report.extra
