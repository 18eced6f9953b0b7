"""Round 22 of issue 28 (batch 48's first measure): a raise site's message pasted inside quotes, a debugger's exception
pane, and Python's own 'module ... has no attribute' wording that no library's __getattr__ owns."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text


def test_a_quoted_raise_site_message_is_a_failure():
    report = explain_text('"Speculative decoding is not yet supported on VLLM V1"\n')
    assert report.exit_code("error") == 1
    (first, *_) = report.findings
    assert first.rule_id == "KVD349" and "VLLM V1" in first.cause and '"' not in first.cause.rpartition(":")[2]


def test_a_quoted_ordinary_line_stays_no_failure():
    report = explain_text('"Starting the server now"\n')
    assert report.exit_code("error") == 0


DEBUGGER = [
    "Exception has occurred: AttributeError       (note: full exception trace is shown but execution is paused at: "
    "_run_module_as_main)",
    "module 'ray' has no attribute 'is_initialized'",
    '  File "/opt/venv/lib/python3.12/site-packages/vllm/utils/__init__.py", line 2872, in is_in_ray_actor',
    "    return (ray.is_initialized()",
]


def test_a_debuggers_exception_pane_is_read_as_the_exception():
    report = explain_text("\n".join(DEBUGGER) + "\n")
    assert report.exit_code("error") == 1
    (first, *_) = report.findings
    assert "innermost exception: AttributeError: module 'ray' has no attribute 'is_initialized'" in first.evidence
    said = " ".join(first.evidence)
    assert said.count("has no attribute") == 1  # the message once: its own line is not read again as a second one
    assert "flashinfer" not in said  # Python's own wording: no library's __getattr__ is named as its raise site


def test_torch_npus_failed_runtime_call_is_the_failure_with_its_error_code():
    report = explain_text(
        "capture_begin:../torch_npu/csrc/core/npu/NPUGraph.cpp:230 NPU function error: "
        "c10_npu::acl::AclmdlRICaptureBegin(capture_stream_, capture_mode), error code is 207008\n"
        "[Error]: Stream resources are insufficient.\n")
    assert report.exit_code("error") == 1
    (first, *_) = report.findings
    assert "error code is 207008" in first.cause
