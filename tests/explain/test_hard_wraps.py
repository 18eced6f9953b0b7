"""Round 5 of issue 28: logs a terminal or a paste hard-wrapped at a narrow width (80 columns) keep their selector
errors, traceback frames and tagged messages. Each log is a variant of a seen real log's shape (selector errors from
vllm/platforms/cuda.py:get_attn_backend_cls, frames from a Triton compile under AsyncLLMEngine.engine_step, the
free-memory check of vllm/v1/worker/utils.py:request_memory), wrapped with textwrap as a terminal or a mail client
would."""

from __future__ import annotations

import textwrap

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.hard_wraps import rejoin_wrapped_frames, rejoin_wrapped_lines
from kvdoctor.explain.log_lines import _strip_outer, normalise
from kvdoctor.explain.selector import parse_selector_errors
from kvdoctor.explain.tracebacks import parse_chains
from kvdoctor.report.check.text import render


def _wrap(text: str, width: int = 80, drop_whitespace: bool = False) -> str:
    out = []
    for line in text.splitlines():
        out += textwrap.wrap(line, width, drop_whitespace=drop_whitespace, replace_whitespace=False) or [""]
    return "\n".join(out) + "\n"


def _text(report) -> str:
    return " ".join(render(report).split())


SELECTED = ("ValueError: Selected backend AttentionBackendEnum.FLASHINFER is not valid for this configuration. "
            "Reason: ['attention sinks not supported']\n")
NONE_VALID = ("(EngineCore_DP0 pid=7) ERROR 05-02 10:22:18 [core.py:1] ValueError: No valid attention backend found "
              "for cuda with AttentionSelectorConfig(head_size=576, dtype=torch.bfloat16, kv_cache_dtype=fp8_ds_mla, "
              "block_size=64, use_mla=True, has_sink=False, use_sparse=True). Reasons: {FLASH_ATTN_MLA: "
              "[sparse not supported], FLASHMLA_SPARSE: [compute capability not supported]}\n")


def test_a_selector_error_wrapped_anywhere_keeps_its_reasons_and_family():
    for width in (40, 60, 80, 100):
        for drop in (False, True):
            errors = parse_selector_errors(normalise(_wrap(SELECTED, width, drop)))
            assert errors and errors[0].reasons == {"FLASHINFER": ("attention sinks not supported",)}, (width, drop)
            assert explain_text(_wrap(SELECTED, width, drop)).extra["family"] == "attention_sinks", (width, drop)
    for width in (72, 80, 100, 120):  # wide enough to keep the record header on its line
        (error,) = parse_selector_errors(normalise(_wrap(NONE_VALID, width)))
        assert error.config["use_sparse"] == "True" and set(error.reasons) == {"FLASH_ATTN_MLA", "FLASHMLA_SPARSE"}
        assert explain_text(_wrap(NONE_VALID, width)).extra["family"] == "mla_sparse", width


def test_a_selector_message_cut_before_its_reasons_does_not_swallow_the_next_lines():
    log = ("ValueError: Selected backend FLASHINFER is not valid for this configuration.\n"
           "INFO 05-02 10:22:19 [launcher.py:1] Shutting down\n")
    (error,) = parse_selector_errors(normalise(log)) or [None]
    assert error is None or error.reasons.get("FLASHINFER", ()) == ()


FRAMES = (
    "Traceback (most recent call last):\n"
    '  File "/home/user/venvs/vllm/lib/python3.10/site-packages/vllm/engine/async_llm_engine.py", line 868, in '
    "engine_step\n"
    "    request_outputs = await self.engine.step_async(virtual_engine, with_some_long_arguments=True, more=1)\n"
    '  File "/home/user/venvs/vllm/lib/python3.10/site-packages/triton/language/semantic.py", line 759, in cast\n'
    '    assert builder.options.allow_fp8e4nv, "fp8e4nv data type is not supported on CUDA arch < 89"\n'
    "AssertionError: fp8e4nv data type is not supported on CUDA arch < 89\n"
)


def test_wrapped_frame_and_code_lines_are_rejoined_so_the_traceback_keeps_its_frames():
    for drop in (False, True):
        (chain,) = parse_chains(normalise(_wrap(FRAMES, 80, drop)))
        (exception,) = chain.exceptions
        assert exception.type == "AssertionError"
        assert [f.function for f in exception.frames] == ["engine_step", "cast"], drop
        assert exception.frames[0].file.endswith("vllm/engine/async_llm_engine.py") and exception.frames[0].line == 868
    report = explain_text(_wrap(FRAMES))
    assert report.extra["family"] == "first_request_failure"
    assert "engine_step" in _text(report)


def test_rejoining_keeps_line_numbers_and_leaves_other_lines_alone():
    raw = _wrap(FRAMES).splitlines()
    rejoined = rejoin_wrapped_frames(raw)
    assert len(rejoined) == len(raw) and rejoined.count(None) >= 2
    numbers = [line.number for line in normalise(_wrap(FRAMES))]
    assert numbers[-1] == len(raw)  # the exception line keeps its number in the wrapped log
    plain = ["ValueError: x", "  File \"a.py\", line 1, in f", "    g()", "KeyError: 'k'", "INFO 05-02 10:22:18 [a.py:1] y"]
    assert rejoin_wrapped_frames(plain) == plain


def test_a_long_code_line_is_not_joined_with_the_exception_or_a_record_below_it():
    for below in ("torch.OutOfMemoryError: CUDA out of memory.", "KeyError", "RayTaskError(ValueError): x",
                  "ERROR 05-02 10:22:18 [core.py:1] boom", "(EngineCore pid=1) ERROR x", "[rank0]: boom"):
        raw = ['  File "vllm/x.py", line 3, in f', "    " + "y = compute(" + "a, " * 30 + ")", below]
        assert rejoin_wrapped_frames(raw) == raw, below


def test_a_tagged_message_wrapped_short_of_the_width_keeps_its_process():
    # vllm/v1/worker/utils.py:request_memory; a word wrap leaves lines shorter than the width
    log = ("[2026-02-24T20:21:58Z] (EngineCore_DP0 pid=6940) ValueError: Free memory on device cuda:1 (19.77/22.05 "
           "GiB) on startup is less than desired GPU memory utilization (0.9, 19.84 GiB). Decrease GPU memory "
           "utilization or reduce GPU memory used by other processes.\n")
    wrapped = _wrap(log)
    assert len({line.stream for line in normalise(wrapped)}) == 1
    report = explain_text(wrapped)
    assert report.extra["family"] == "gpu_memory_occupied"
    assert "19.84" in _text(report) and "0.9" in _text(report)


def test_a_crash_line_split_by_a_wrap_is_still_failure_evidence():
    # v1/executor/ray_utils.py _wait_until_pg_ready logs this at INFO while Ray cannot place the group: never healthy
    log = ("(EngineCore pid=84) INFO 06-07 18:13:55 [ray_utils.py:464] Waiting for creating a placement group of specs "
           "for 150 seconds. specs=[{'GPU': 1.0}, {'GPU': 1.0}]. Check `ray status` to see if you have enough "
           "resources.\n")
    for width in (80, 100):
        report = explain_text(_wrap(log, width))
        assert report.exit_code("error") == 1, width
        assert report.extra["family"] == "device_placement", width  # an INFO record a wrap split is matched joined
    # a long healthy record wrapped the same way stays healthy
    healthy = ("(EngineCore pid=84) INFO 06-07 18:13:55 [ray_utils.py:464] Using ray placement group with 2 GPUs and "
               "specs=[{'GPU': 1.0}, {'GPU': 1.0}] on 2 nodes; the group is ready after 3 seconds.\n")
    assert explain_text(_wrap(healthy)).exit_code("error") == 0


def test_a_line_that_matches_one_rule_alone_is_still_joined_for_the_others():
    # csrc cutlass_moe_mm: the first line alone reads as the dense GEMM's refusal (KVD337); the wrapped rest makes
    # it the MoE grouped GEMM's (KVD338), whose family wins
    log = "No compiled cutlass_scaled_mm for CUDA device capability: 120. Required \ncapability: 90 or 100\n"
    assert explain_text(log).extra["family"] == "moe_kernel_selection"


# Whole-log wraps (rejoin_wrapped_lines): a log copied from a terminal, `fold` or a mail client is cut at one width
# everywhere, not only in tracebacks; the rest of each cut line is joined back before the log is read.
RECORD = ("(EngineCore_DP0 pid=7) ERROR 05-02 10:22:18 [core.py:708] ValueError: The model's max seq len (131072) is "
          "larger than the maximum number of tokens that can be stored in KV cache (53248). Try increasing "
          "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.")
HEALTHY = ("(APIServer pid=1) INFO 05-02 10:22:30 [api_server.py:1880] Starting vLLM API server 0 on "
           "http://0.0.0.0:8000 and waiting for the engine core to be ready")


def _cut(text: str, width: int) -> str:
    """A terminal's hard wrap: every line cut at the column, nothing dropped."""
    return "\n".join(line[i:i + width] for line in text.splitlines() for i in range(0, max(len(line), 1), width))


def test_a_log_cut_at_the_column_or_word_wrapped_reads_as_its_whole_lines():
    log = "\n".join([HEALTHY, RECORD, HEALTHY]) + "\n"
    whole = [line.text for line in normalise(log)]
    for wrapped in (_cut(log, 80), _cut(log, 100), _wrap(log, 80), _wrap(log, 120), _wrap(log, 80, True)):
        lines = normalise(wrapped)
        texts = [line.text for line in lines]
        assert texts == whole, wrapped
        assert [line.number for line in lines][1] == 1 + wrapped.splitlines().index(
            next(raw for raw in wrapped.splitlines() if "ERROR" in raw)), "a joined line keeps its first line's number"


def test_a_record_header_wrapped_alone_takes_the_exception_line_after_it():
    header = "(RayWorkerVllm pid=4028887) ERROR 03-28 21:38:23 ray_utils.py:44] "
    log = (header + "\ntorch.distributed.DistBackendError: NCCL error in: \n"
           "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1333, unhandled cuda error \n"
           "(run with NCCL_DEBUG=INFO for details), NCCL version 2.18.1\n"
           + header + "\nncclUnhandledCudaError: Call to CUDA function failed.\n")
    texts = [line.text for line in normalise(log)]
    assert texts[0] == ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
                        "ProcessGroupNCCL.cpp:1333, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL "
                        "version 2.18.1")
    assert texts[1] == "ncclUnhandledCudaError: Call to CUDA function failed."


def test_lines_of_their_own_are_never_joined_in_a_log_that_was_not_wrapped():
    padded = "\n".join(line.ljust(120) for line in (">>> import vllm; vllm.__version__", "'0.9.1'", ">>> x", "1"))
    repeated = "\n".join(["...", "DEBUG 10-09 19:47:51 [scheduler.py:345] cmpl-c7da02 is still in "
                                 "WAITING_FOR_REMOTE_KVS state."] * 2 + ["..."])
    prefixed = "\n".join(f"vllm-1  | {line}" for line in (RECORD[:90], RECORD[:90], "next line", RECORD[:90], "x"))
    for log in (padded, repeated, prefixed, "\n".join([RECORD, "Traceback (most recent call last):", RECORD])):
        raw = log.splitlines()
        assert rejoin_wrapped_lines(raw, list(raw), _strip_outer) == raw, log
