"""KVD399, a failure no rule knows: it says what kvdoctor could not find, and where vLLM raises the message when
the message index holds it."""

from __future__ import annotations

from kvdoctor.explain.diagnosis import unknown_failure_rule
from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.message_index import load_index

HEAD = "INFO 05-02 10:22:10 [api_server.py:1] vLLM API server version 0.30.0\n"


def _unknown(text: str):
    report = explain_text(text)
    assert report.exit_code("error") == 1
    (finding,) = [f for f in report.findings if f.rule_id == unknown_failure_rule()]
    return finding


def _raised_message() -> tuple[str, str, str]:
    """A ValueError message raised by vLLM 0.30.0 with no placeholder, that no rule knows: (text, file, function)."""
    for template in load_index().templates():
        if None in template.parts or len(template.text) < 50 or "\n" in template.text:
            continue
        raises = [loc for loc in template.locations
                  if loc.package == "vllm" and loc.kind == "raise" and loc.type == "ValueError" and loc.has_release("0.30.0")]
        if len(raises) == 1 and len(template.locations) == 1:
            report = explain_text(HEAD + f"ValueError: {template.text}\n")
            if report.extra["primary"]["rule_id"] == unknown_failure_rule():
                return template.text, raises[0].file, raises[0].qualname
    raise AssertionError("no vLLM 0.30.0 ValueError message in the index that no rule knows")


def test_a_located_message_names_the_release_and_the_function():
    text, file, function = _raised_message()
    finding = _unknown(HEAD + f"ValueError: {text}\n")
    assert f"vLLM 0.30.0 raises ValueError in {file}:{function}" in finding.cause
    assert "traceback frames" in finding.cause  # what it could not find: where, without frames


def test_an_unlocated_message_says_the_index_does_not_hold_it():
    finding = _unknown("RuntimeError: the flux capacitor is not charged\n")
    assert "does not hold this message" in finding.cause
    assert "vllm 0.20.0-0.34.0" in finding.cause or "vllm " in finding.cause
    assert "the vLLM release" in finding.cause and "a rule whose signature matches it" in finding.cause


# a constructor's assert with no message: the class being built (two frames out, through super().__init__) names the
# component, and a traceback through vLLM's quantization methods is a quantization kernel/scheme failure
_CONSTRUCTOR_ASSERT = """Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/quantization/ipex_quant.py", line 410, in get_quant_method
    return XPUFp8MoEMethod(fp8_config, layer)
  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/quantization/ipex_quant.py", line 438, in __init__
    super().__init__(quant_config, layer)
  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/quantization/fp8.py", line 1097, in __init__
    assert not quant_config.is_checkpoint_fp8_serialized
AssertionError
"""


def test_a_constructor_that_raised_names_the_class_it_was_building():
    finding = _unknown(HEAD + _CONSTRUCTOR_ASSERT)
    assert "while constructing XPUFp8MoEMethod (in get_quant_method" in finding.cause
    assert explain_text(HEAD + _CONSTRUCTOR_ASSERT).extra["family"] == "quant_kernel_scheme"


def test_a_method_that_raised_names_no_class():
    text = _CONSTRUCTOR_ASSERT.replace("line 1097, in __init__", "line 1097, in apply")
    assert "while constructing" not in _unknown(HEAD + text).cause


def test_a_traceback_cut_in_a_constructor_names_the_class_in_its_note():
    cut = "\n".join(_CONSTRUCTOR_ASSERT.splitlines()[:5]) + "\n"  # ends at ipex_quant.py's __init__ frame
    notes = " ".join(explain_text("ERROR: something failed\n" + cut).notes)
    assert "while constructing XPUFp8MoEMethod (in get_quant_method)" in notes


def test_frames_above_a_blank_record_count_and_a_moe_kernel_frame_names_the_moe_family():
    head = "(Worker_TP0 pid=1) ERROR 02-01 09:32:13 [multiproc_executor.py:852] "
    lines = [
        '  File "/v/lib/python3.12/site-packages/flashinfer/fused_moe/core.py", line 1635, in trtllm_fp8_block_scale_moe_op',
        "    result = moe_op.trtllm_fp8_block_scale_moe(",
        '  File "/v/lib/python3.12/site-packages/flashinfer/data/csrc/trtllm_fused_moe_kernel_launcher.cu", line 1580, in launcher',
        '    TVM_FFI_ICHECK_EQ(routing_logits.dtype(), dl_bfloat16) << "routing_logits must be bfloat16.";',
        "    ",
        "RuntimeError: Check failed: routing_logits.dtype() == dl_bfloat16 (float32 vs. bfloat16) : routing_logits must be bfloat16.",
    ]
    report = explain_text("".join(head + line + "\n" for line in lines))
    assert report.exit_code("error") == 1 and report.extra["family"] == "moe_kernel_selection"
    (finding,) = [f for f in report.findings if f.rule_id == unknown_failure_rule()]
    assert "trtllm_fused_moe_kernel_launcher.cu:1580" in finding.cause


def test_the_check_that_would_have_caught_it_is_the_logged_command_with_the_logs_own_variables():
    log = ("$ export MODEL=mistralai/Mistral-7B-v0.1\n"
           "$ python3 -m vllm.entrypoints.openai.api_server --model $MODEL \\\n"
           "    --enable-prefix-caching --max-model-len=4096 | tee server.log &\n"
           "NotImplementedError: Sliding window is not allowed with prefix caching enabled!\n")
    (note,) = [n for n in explain_text(log).notes if "would have caught" in n]
    assert note.endswith("kvdoctor check -- python -m vllm.entrypoints.openai.api_server --model "
                         "mistralai/Mistral-7B-v0.1 --enable-prefix-caching --max-model-len=4096")  # tee is not vLLM's


def test_a_size_not_divisible_by_a_parallel_rank_is_parallel_divisibility_and_other_words_are_not():
    shard = ("ValueError: shard_map applied to the function '_ragged_paged_attention' was given argument arrays with "
             "axis sizes that are not evenly divisible by the corresponding mesh axis sizes\n")
    assert explain_text(shard).extra["family"] == "parallel_divisibility"
    assert explain_text("ValueError: the flux capacitor is not charged\n").extra["family"] == "other"


def test_frames_around_a_pasters_elision_and_above_an_unprefixed_exception_line_are_its_frames():
    """A traceback pasted with its middle cut ('...') and without its header still places the failure in vLLM; an
    exception line pasted apart from its records (an issue title) takes the frames logged right above it."""
    head = "(EngineCore_DP0 pid=270) ERROR 11-19 12:16:36 [v1/engine/core.py:842] "
    cut = [
        head + 'File "/usr/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 3934, in _dummy_sampler_run',
        head + "sampler_output = self.sampler(",
        head + "^^^^^^^^^^^^^",
        head + 'File "/usr/lib/python3.12/dist-packages/torch/nn/modules/module.py", line 1775, in _wrapped_call_impl',
        head + "return self._call_impl(*args, **kwargs)",
        "...",
        head + "logits_sort, logits_idx = logits.sort(dim=-1, descending=False)",
        head + "^^^^^^^^^^^^^^^",
        head + "RuntimeError: the flux capacitor is not charged",
    ]
    finding = _unknown("\n".join(cut) + "\n")
    assert any("in vLLM at /usr/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py:3934 in "
               "_dummy_sampler_run (`sampler_output = self.sampler(`)" in line for line in finding.evidence)
    record = "ERROR 02-08 04:34:00 engine.py:389] "
    titled = [
        record + '  File "/src/vllm/vllm/model_executor/models/deepseek_v2.py", line 591, in <lambda>',
        record + "    lambda prefix: DeepseekV2DecoderLayer(",
        "RuntimeError: the flux capacitor is not charged",
    ]
    finding = _unknown("\n".join(titled) + "\n")
    assert "raised at /src/vllm/vllm/model_executor/models/deepseek_v2.py:591 in <lambda>" in finding.evidence
    alone = _unknown(record + "something else went wrong\nRuntimeError: the flux capacitor is not charged\n")
    assert "raised at unknown (no traceback frames in the log)" in alone.evidence  # no frame above: none taken


def test_an_xla_status_line_is_failure_evidence_and_an_hbm_exhaustion_is_a_start_up_oom():
    """XLA's status codes head a TPU failure whose exception type was not pasted; HBM exhaustion is the TPU's OOM."""
    report = explain_text("RESOURCE_EXHAUSTED: CompileTimeHbmOom\n")
    assert report.exit_code("error") == 1 and report.extra["family"] == "oom_profiling"
    report = explain_text("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: "
                          "Attempting to allocate 2.00G. That was not possible. There are 1.50G free.\n")
    assert report.extra["family"] == "oom_profiling" and "2.00G" in report.findings[0].cause
    assert explain_text("INVALID_ARGUMENT: the flux capacitor is not charged\n").exit_code("error") == 1
    assert explain_text("INFO 05-02 10:22:18 [tpu_worker.py:1] status INTERNAL: ok\n").exit_code("error") == 0
