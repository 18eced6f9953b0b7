"""Issue 28, stop 54 (batches 59-60): a wrapper whose traceback the log ends in before the exception line is placed
by that traceback's frames (a quantization method's weight processing: its family), and only when no exception
line follows them."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text

HEAD = "(Worker_TP2 pid=1288531) ERROR 09-11 19:44:34 [multiproc_executor.py:585] "
SITE = "/ws/.venv/lib/python3.12/site-packages/vllm"
CUT = [
    "WorkerProc failed to start.",
    "Traceback (most recent call last):",
    f'  File "{SITE}/model_executor/model_loader/utils.py", line 112, in process_weights_after_loading',
    "    quant_method.process_weights_after_loading(module)",
    f'  File "{SITE}/model_executor/layers/quantization/compressed_tensors/compressed_tensors.py", line 716, in pro',
]


def _run(lines: list[str]) -> tuple[int, str | None]:
    report = explain_text("".join(HEAD + line + "\n" for line in lines))
    return report.exit_code("error"), report.extra.get("family")


def test_a_wrapper_whose_traceback_is_cut_inside_a_quantization_method_is_that_family():
    assert _run(CUT) == (1, "quant_kernel_scheme")


def test_an_excerpt_that_begins_inside_the_traceback_is_placed_by_its_frames_too():
    assert _run(["WorkerProc failed to start.", "    ^^^^^^"] + CUT[2:]) == (1, "quant_kernel_scheme")


def test_cut_frames_outside_any_feature_module_leave_the_family_to_other_evidence():
    lines = CUT[:2] + [f'  File "{SITE}/v1/worker/gpu_worker.py", line 229, in load_model',
                       "    self.model_runner.load_model(eep_scale_up=eep_scale_up)"]
    assert _run(lines)[1] != "quant_kernel_scheme"
