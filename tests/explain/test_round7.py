"""Round 7 of issue 28: the mechanisms behind the seen misses of batches 11-13, each on synthetic variants written
from the wordings of Python and vLLM (never copied from a real log)."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.similar_reports import rules_family
from kvdoctor.report.check.text import render


def _text(report) -> str:
    return " ".join(render(report).split())


def test_a_pasted_traceback_that_lost_its_indent_keeps_the_callers_frame():
    # a headerless excerpt whose code line sits at column 0: the frame above is still the program that imported
    report = explain_text('File "/app/mytrainer/rollout/engine_glue.py", line 12, in <module>\n'
                          "from vllm.sampling_params import GuidedDecodingParams\n"
                          "ImportError: cannot import name 'GuidedDecodingParams' from 'vllm.sampling_params'\n")
    assert report.extra["family"] == "wrapper_api_mismatch"
    assert "engine_glue.py:12" in _text(report)


def test_a_plain_line_under_a_log_record_is_not_a_frame_code_line():
    report = explain_text("INFO 01-02 03:04:05 [core.py:1] starting\n"
                          "ImportError: cannot import name 'GuidedDecodingParams' from 'vllm.sampling_params'\n")
    assert "raised at" not in _text(report)


def test_a_config_check_behind_pydantics_validator_is_a_serve_argument_refused():
    # pydantic reports a vLLM config dataclass's own check; no rule knows these words, so the report itself explains
    report = explain_text(
        "Traceback (most recent call last):\n"
        '  File "/venv/lib/python3.12/site-packages/vllm/engine/arg_utils.py", line 900, in create_speculative_config\n'
        "    speculative_config = SpeculativeConfig.from_dict(\n"
        '  File "/venv/lib/python3.12/site-packages/pydantic/_internal/_dataclasses.py", line 120, in __init__\n'
        "    s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)\n"
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig\n"
        "  Value error, num_speculative_tokens must be provided with speculative model unless the draft model "
        "config contains an n_predict parameter. [type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]\n")
    assert report.exit_code("error") == 1
    assert report.extra["family"] == "serve_args"
    assert "num_speculative_tokens must be provided" in _text(report)


def test_a_known_message_inside_pydantics_report_keeps_its_own_family():
    report = explain_text("pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
                          "  Value error, The quantization method mxfp4 is not supported for the current GPU. Minimum "
                          "capability: 100. Current capability: 86. [type=value_error, input_value=ArgsKwargs((), {}), "
                          "input_type=ArgsKwargs]\n")
    assert report.extra["family"] == "quant_min_capability"


def test_a_call_python_refused_in_a_vllm_frame_is_not_that_frames_family_check():
    # vLLM's frame called another library with a keyword that library's release does not take: the frame's
    # family (structured output's grammar check) did not fail, the call did; the callee is quoted from the frame
    report = explain_text(
        'File "/venv/lib/python3.12/site-packages/vllm/v1/structured_output/backend_guidance.py", line 150, '
        "in validate_guidance_grammar\n"
        "    err = somelib.Matcher.check(grammar, tokenizer=tok)\n"
        "TypeError: Matcher.check() got some positional-only arguments passed as keyword arguments: 'tokenizer'\n")
    assert report.exit_code("error") == 1
    assert report.extra["family"] != "structured_output_schema"
    assert "somelib.Matcher.check" in _text(report)


def test_a_plugins_missing_name_is_an_api_mismatch_and_its_version_warning_is_shown():
    report = explain_text("/opt/venv/vllm_omni/version.py:50: RuntimeWarning: vLLM and vLLM-Omni appear to have "
                          "mismatched major/minor versions:\n"
                          "ImportError: cannot import name 'AscendWidget' from 'vllm_ascend.ops.widget'\n")
    assert report.extra["family"] == "wrapper_api_mismatch"
    text = _text(report)
    assert "AscendWidget" in text and "mismatched major/minor versions" in text
    assert "No vLLM release" not in text  # the API history holds vLLM's own releases, not the plugin's


def test_a_plugins_version_warning_alone_is_not_a_failure():
    report = explain_text("/opt/venv/vllm_omni/version.py:50: RuntimeWarning: vLLM and vLLM-Omni appear to have "
                          "mismatched major/minor versions:\n"
                          "INFO 05-02 10:22:18 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000\n")
    assert report.exit_code("error") == 0


def test_a_vllm_class_lacking_a_member_it_had_in_other_releases_is_an_api_mismatch():
    # VllmConfig had prompt_adapter_config until prompt adapters were removed (the API history's members table)
    report = explain_text("AttributeError: 'VllmConfig' object has no attribute 'prompt_adapter_config'\n")
    assert report.extra["family"] == "wrapper_api_mismatch"
    assert "prompt_adapter_config" in _text(report)


def test_a_framework_class_or_none_lacking_a_member_is_not_claimed_by_the_history():
    for line in ("AttributeError: 'MyPolicyActor' object has no attribute 'cached_scheduler_outputs'\n",
                 "AttributeError: 'NoneType' object has no attribute 'prompt_adapter_config'\n"):
        assert rules_family(explain_text(line)) != "wrapper_api_mismatch", line
