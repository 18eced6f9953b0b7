"""Round 2 of issue 28, item 2: the family of a failure from what the log says around it. Synthetic logs written from
the raise sites' templates (file:function beside each)."""

from __future__ import annotations

import pytest

from kvdoctor.explain.explain import explain_text

# v1/attention/selector.py (the short form names no KV dtype); the run's arguments as vLLM logs them
SELECTED = ("ValueError: Selected backend FLASHINFER is not valid for this configuration. "
            "Reason: ['kv_cache_dtype not supported']\n")


def _args(kv: str) -> str:
    return f"INFO 04-19 12:29:22 [utils.py:1] non-default args: {{'model': 'm', 'kv_cache_dtype': '{kv}'}}\n"


@pytest.mark.parametrize("kv, family", [
    ("nvfp4", "nvfp4_kv"), ("turboquant_k8v4", "turboquant"), ("fp8", "kv_dtype_backend"),
])
def test_a_selector_refusal_without_the_kv_dtype_takes_the_runs_kv_dtype(kv, family):
    assert explain_text(_args(kv) + SELECTED).extra["family"] == family


def test_a_selector_refusal_with_no_kv_dtype_anywhere_stays_kv_dtype_backend():
    assert explain_text(SELECTED).extra["family"] == "kv_dtype_backend"


ENGINE = "(EngineCore_DP0 pid=200) ERROR 05-02 10:22:18 [core.py:708] "
WORKER = "(VllmWorker TP0 pid=300) ERROR 05-02 10:22:17 [multiproc_executor.py:1] "
API = "(APIServer pid=1) "


def _engine_failed(message: str) -> str:
    """EngineCore failed to start, the worker's traceback with the real error, the API server's wrapper last."""
    return (f"{WORKER}WorkerProc failed to start.\n{ENGINE}EngineCore failed to start.\n"
            f"{WORKER}Traceback (most recent call last):\n"
            f'{WORKER}  File "/x/vllm/model_executor/layers/attention/attention.py", line 230, '
            f"in _init_kv_cache_quant\n"
            f"{WORKER}    raise ValueError(\n{WORKER}{message}\n"
            f"{API}RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {{}}\n")


def test_engine_core_failed_to_start_names_the_error_of_another_process():
    # model_executor/layers/attention/attention.py:_init_kv_cache_quant (0.20-0.34)
    report = explain_text(_engine_failed("ValueError: fp8_e5m2 kv-cache is not supported with fp8 checkpoints."))
    assert report.extra["family"] == "kv_dtype_backend"
    assert report.findings[0].rule_id == "KVD395"


def test_an_unknown_error_of_another_process_is_the_failure_not_the_wrapper():
    report = explain_text(_engine_failed("ValueError: a message no rule or index entry knows"))
    assert report.findings[0].rule_id == "KVD399"
    assert any("a message no rule or index entry knows" in e for e in report.findings[0].evidence)
