"""Child task `module:quantization`: vLLM's own answer, by import, for each registered quantization method: the
config class get_quantization_config returns, its get_min_capability() and get_supported_act_dtypes(). The
static reader (quantization.py) is what the pack ships; this is its oracle
(tests/vllm_pack/test_quantization_pack.py)."""
from __future__ import annotations


def run(child) -> dict:
    """method -> {"config_class", "min_capability", "act_dtypes"} or {"error"}; vLLM imported in the builder's venv.
    Ask it with the request's "legacy" flag on, so compiled ops that modules call at import are stand-ins."""
    import vllm.model_executor.layers.quantization as quant

    answers = {}
    for method in list(quant.QUANTIZATION_METHODS):
        try:
            cls = quant.get_quantization_config(method)
        except Exception as exc:  # a backend's import fails on a CPU build
            answers[method] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
            continue
        answer = {"config_class": cls.__name__}
        dtypes = lambda: [str(d).replace("torch.", "") for d in cls.get_supported_act_dtypes()]  # noqa: E731
        for key, ask in (("min_capability", lambda: cls.get_min_capability()), ("act_dtypes", dtypes)):
            try:
                answer[key] = ask()
            except Exception as exc:  # abstract, or needs an instance
                answer[key] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
        answers[method] = answer
    return answers
