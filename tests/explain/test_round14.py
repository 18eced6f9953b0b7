"""Round 14 of issue 28 (batch 18's seen misses, by mechanism): a JIT build that finished after vLLM's wait notices
says the wait was a slow step; one wait notice echoed by two log handlers is one printing, not a repeat."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text

_SHM = ("(EngineCore_DP0 pid=5) INFO 03-10 20:{m}:48 [shm_broadcast.py:542] No available shared memory broadcast block "
        "found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming work "
        "(e.g. compilation, weight/kv cache quantization).\n")
_WAITS = "".join(_SHM.format(m=m) for m in (12, 13, 14))


def test_wait_notices_then_a_jit_build_that_finished_are_a_slow_step():
    built = "(Worker_TP0 pid=7) [aiter] finish build [module_moe_asm], cost 44.9s\n"
    assert explain_text(_WAITS + built).exit_code("error") == 0
    assert explain_text(_WAITS).exit_code("error") == 1  # the log ends in the waits: a hang


def test_one_wait_notice_echoed_by_two_handlers_is_not_a_repeat():
    lock = "/home/u/.local/lib/python3.10/site-packages/aiter/jit/build/lock_module_moe_sorting"
    echoed = (f"(Worker_TP7 pid=9) [aiter] waiting for baton release at {lock}\n"
              f"(Worker_TP7 pid=9) [2026-03-10 20:21:10] INFO file_baton.py:48: waiting for baton release at {lock}\n")
    assert explain_text(echoed).exit_code("error") == 0
    assert explain_text(echoed + echoed).exit_code("error") == 1  # printed again later: it kept waiting there


def _text(report) -> str:
    from kvdoctor.report.check.text import render

    return " ".join(render(report).split())


def test_triton_finding_no_active_driver_is_said_under_no_gpu_visible():
    log = ("INFO 04-28 01:32:18 [importing.py:44] Triton is installed but 0 active driver(s) found (expected 1). "
           "Disabling Triton to prevent runtime errors.\n"
           "RuntimeError: Device string must not be empty\n")
    report = explain_text(log)
    assert report.extra["family"] == "no_gpu_visible"
    assert "Triton found 0 active driver(s)" in _text(report)
    assert "0 active driver(s)" not in _text(explain_text(log.split("\n", 1)[1]))  # only when the log says it


def test_llvm_fatal_error_is_failure_evidence():
    log = ("INFO 07-31 16:03:44 [llm.py:306] Supported_tasks: ['embed']\n"
           "Unsupported conversion from f16 to f16\n"
           "LLVM ERROR: Unsupported rounding mode for conversion.\n")
    report = explain_text(log)
    assert report.exit_code("error") == 1
    assert "LLVM ERROR: Unsupported rounding mode" in _text(report)


def test_a_kv_cache_left_below_zero_is_read_and_said():
    log = ("(EngineCore pid=208) INFO 06-17 11:30:47 [gpu_model_runner.py:1] Model loading took 3.32 GiB memory\n"
           "(EngineCore pid=208) INFO 06-17 11:30:47 [gpu_worker.py:480] Available KV cache memory: -2.14 GiB\n"
           "(EngineCore pid=208) ValueError: No available memory for the cache blocks. Try increasing "
           "`gpu_memory_utilization` when initializing the engine.\n")
    text = _text(explain_text(log))
    assert "what was left for the KV cache was -2.14 GiB" in text and "2.14 GiB more than the share" in text


def test_an_unknown_failure_whose_words_name_one_familys_feature_is_that_family():
    """explain.yaml word_families: sparse MLA, TurboQuant, a FlashInfer JIT module build; nothing for other words."""
    sparse = ("Check failed: num_tokens > 64 (7 vs. 64) : Decode (num_tokens <= 64) must go through "
              "sparse_mla_sm120_decode_dsv4; got num_tokens=7\nUnsupported sparse-MLA prefill configuration: "
              "model=DSV4 num_heads=32 topk=256\n")
    def by_rules(report):  # the family kvdoctor's rules give, before a similar report's likely one
        return report.extra.get("family_by_rules", report.extra["family"])

    assert by_rules(explain_text(sparse)) == "mla_sparse"
    build = ("Traceback (most recent call last):\n"
             '  File "/usr/local/lib/python3.12/dist-packages/flashinfer/fused_moe/core.py", line 1018, in cutlass_fused_moe\n'
             "    return get_cutlass_fused_moe_module(device_arch).cutlass_fused_moe(\n"
             '  File "/usr/local/lib/python3.12/dist-packages/flashinfer/fused_moe/core.py", line 278, in '
             "get_cutlass_fused_moe_module\n"
             "    module = gen_cutlass_fused_moe_sm120_module(use_fast_build).build_and_load()\n"
             "RuntimeError: Ninja build failed.\n")
    assert by_rules(explain_text(build)) == "flashinfer_jit_toolkit"
    other = explain_text("Check failed: num_tokens > 64 (7 vs. 64) : Decode must go through x\n")
    assert by_rules(other) == "other"
