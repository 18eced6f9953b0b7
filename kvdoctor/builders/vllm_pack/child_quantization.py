"""Child task `module:quantization`: vLLM's own answer, by import, for each registered quantization method: the
config class get_quantization_config returns, its get_min_capability() and get_supported_act_dtypes(). The
static reader (quantization.py) is what the pack ships; this is its oracle
(tests/vllm_pack/test_quantization_pack.py)."""
from __future__ import annotations


def run(child) -> dict:
    """method -> {"config_class", "min_capability", "act_dtypes"} or {"error"}; vLLM imported in the builder's venv.
    Ask it with the request's "legacy" flag on, so compiled ops that modules call at import are stand-ins."""
    import vllm.model_executor.layers.quantization as quant

    if child.REQ.get("scheme_configs"):
        return {"schemes": run_schemes(child)}
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


def run_schemes(child) -> dict:
    """vLLM's own compressed-tensors scheme choice for the request's `scheme_configs` (name -> quantization_config)
    on each of `scheme_capabilities` ([major, minor]): CompressedTensorsConfig.from_config, then
    _get_scheme_from_parts and _check_scheme_supported for every config group, with the platform's capability
    stubbed. name -> "SM" -> {"schemes": [class names], "error": vLLM's message or None}."""
    import inspect

    from vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors import CompressedTensorsConfig

    import vllm.platforms as platforms

    platform = type(platforms._current_platform)  # the stub child.main installed, which vLLM's modules hold
    _skip_scheme_init()
    answers: dict = {}
    for name, quant_config in child.REQ.get("scheme_configs", {}).items():
        answers[name] = {}
        for major, minor in child.REQ.get("scheme_capabilities", []):
            platform.capability_now = (major, minor)
            with _default_vllm_config():  # FP8 schemes build kernels that read the current config
                answers[name][f"{major}{minor}"] = _schemes_of(CompressedTensorsConfig, quant_config, inspect)
                answers[name][f"{major}{minor}"]["moe"] = _moe_of(CompressedTensorsConfig, quant_config, inspect)
    return answers


def _moe_of(config_class, quant_config: dict, inspect) -> str:
    """vLLM's CompressedTensorsMoEMethod.get_moe_method for experts targeted like the config's first group: the
    method class it picks, or its refusal. The layer lookup is answered with that group (a MoE layer object is not
    built here) and the methods are made without their __init__ (kernel set-up needs a GPU)."""
    import importlib
    import pkgutil
    import types

    from vllm.model_executor.layers.quantization.compressed_tensors import compressed_tensors_moe as moe_module

    modules = [moe_module]
    for info in pkgutil.iter_modules(getattr(moe_module, "__path__", [])):
        try:
            modules.append(importlib.import_module(f"{moe_module.__name__}.{info.name}"))
        except Exception:  # a backend module this CPU build cannot import: get_moe_method's own import fails too
            continue
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, type) and value.__name__.endswith(("MoEMethod", "MoeMethod")):
                value.__init__ = lambda self, *args, **kwargs: None
    try:
        config = config_class.from_config(quant_config)
        scheme = next(iter(config.target_scheme_map.values()))
        if scheme.get("format") is None:  # what get_scheme_dict fills in
            scheme["format"] = config.quant_format
        config.get_scheme_dict = lambda layer, layer_name=None: scheme
        config._add_fused_moe_to_target_scheme_map = lambda: None
        layer = types.SimpleNamespace(ckpt_gate_proj_name="gate_proj", ckpt_up_proj_name="up_proj",
                                      ckpt_down_proj_name="down_proj", moe_config=None, moe=None,
                                      hidden_size=4096, intermediate_size_per_partition=14336,
                                      local_num_experts=8, global_num_experts=8)  # a Mixtral-8x7B-sized layer
        select = moe_module.CompressedTensorsMoEMethod.get_moe_method
        params = list(inspect.signature(select).parameters)
        args = [config, layer] + (["model.layers.0.mlp.experts"] if len(params) > 2 else [])
        return type(select(*args)).__name__
    except Exception as exc:
        return f"error: {exc}"[:300]


def _skip_scheme_init() -> None:
    """Scheme constructors build kernels (they read a model config this child has not): the choice is the question,
    so every scheme class is made without running its __init__."""
    from vllm.model_executor.layers.quantization.compressed_tensors import schemes

    base = schemes.CompressedTensorsScheme
    for value in vars(schemes).values():
        if isinstance(value, type) and issubclass(value, base):
            value.__init__ = lambda self, *args, **kwargs: None


def _default_vllm_config():
    """vLLM's default VllmConfig made current (what its own op tests do); a no-op where the release has none."""
    import contextlib

    try:
        from vllm.config import VllmConfig, set_current_vllm_config
    except ImportError:
        return contextlib.nullcontext()
    return set_current_vllm_config(VllmConfig())


def _schemes_of(config_class, quant_config: dict, inspect) -> dict:
    try:
        config = config_class.from_config(quant_config)
        choose = config._get_scheme_from_parts
        accepted = inspect.signature(choose).parameters
        schemes = []
        for scheme_dict in config.target_scheme_map.values():
            kwargs = {"weight_quant": scheme_dict.get("weights"), "input_quant": scheme_dict.get("input_activations")}
            for key, value in (("output_quant", scheme_dict.get("output_activations")),
                               ("format", scheme_dict.get("format"))):  # fmt: skip
                if key in accepted:
                    kwargs[key] = value
            scheme = choose(**kwargs)
            schemes.append(type(scheme).__name__)
            config._check_scheme_supported(scheme.get_min_capability())
        return {"schemes": schemes, "error": None}
    except Exception as exc:  # vLLM's refusal: the message users see
        return {"schemes": [], "error": str(exc)[:300], "type": type(exc).__name__}
