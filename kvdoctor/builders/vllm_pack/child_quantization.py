"""Child task `module:quantization`: vLLM's own answer, by import, for each registered quantization method: the
config class get_quantization_config returns, its get_min_capability() and get_supported_act_dtypes(). The
static reader (quantization.py) is what the pack ships; this is its oracle
(tests/vllm_pack/test_quantization_pack.py)."""
from __future__ import annotations


def run(child) -> dict:
    """method -> {"config_class", "min_capability", "act_dtypes"} or {"error"}; vLLM imported in the builder's venv.
    Ask it with the request's "legacy" flag on, so compiled ops that modules call at import are stand-ins."""
    import vllm.model_executor.layers.quantization as quant

    if child.REQ.get("moe_backend_capabilities"):
        return {"moe_backends": run_moe_backends(child)}
    if child.REQ.get("scheme_configs"):
        return {"schemes": run_schemes(child)}
    if child.REQ.get("mixed_configs"):
        return {"mixed": run_mixed(child)}
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


def run_mixed(child) -> dict:
    """vLLM's own ModelOptMixedPrecisionConfig dispatch for the request's `mixed_configs` (name -> the checkpoint's
    quantization config): from_config, then get_quant_method for each quantized_layers entry, asked with a layer of
    the class vLLM builds there (LinearBase; ParallelLMHead for lm_head; the experts class for a routed-experts entry,
    its prefix cut after the `experts` segment). The method classes modelopt.py names are replaced by recorders, so
    the answer is the name get_quant_method calls (vLLM's dispatch runs; no kernel is built). name -> prefix ->
    class name, "None", or {"error"}."""
    import vllm.model_executor.layers.quantization.modelopt as modelopt

    cls = getattr(modelopt, "ModelOptMixedPrecisionConfig", None)
    if cls is None:
        return {}
    from vllm.model_executor.layers.quantization.base_config import QuantizeMethodBase

    experts_class = getattr(modelopt, "RoutedExperts", None) or getattr(modelopt, "FusedMoE")
    linear_class = modelopt.LinearBase
    head_class = getattr(modelopt, "ParallelLMHead", None)
    if head_class is None:
        from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead as head_class
    for attr in list(vars(modelopt)):  # record what get_quant_method builds (a quantize method) instead of building it
        value = getattr(modelopt, attr)
        if isinstance(value, type) and issubclass(value, QuantizeMethodBase) or attr == "build_linear_method":
            setattr(modelopt, attr, (lambda name: lambda *a, **k: name)(attr))
    answers: dict = {}
    for name, quant_config in child.REQ["mixed_configs"].items():
        answers[name] = {}
        try:
            config = cls.from_config(quant_config)
        except Exception as exc:  # vLLM refuses the config itself
            answers[name]["<config>"] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            continue
        section = quant_config.get("quantization") if isinstance(quant_config.get("quantization"), dict) else {}
        for key in section.get("quantized_layers") or quant_config.get("quantized_layers") or {}:
            parts = key.split(".")
            if "experts" in parts:
                prefix, kind = ".".join(parts[: parts.index("experts") + 1]), experts_class
            elif parts[-1] == "lm_head":
                prefix, kind = key, head_class
            else:
                prefix, kind = key, linear_class
            layer = kind.__new__(kind)
            layer.moe_config = None
            try:
                got = config.get_quant_method(layer, prefix)
                answers[name][prefix] = "None" if got is None else got if isinstance(got, str) else type(got).__name__
            except Exception as exc:
                answers[name][prefix] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
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


def _default_vllm_config(family: dict | None = None):
    """vLLM's default VllmConfig made current (what its own op tests do); a no-op where the release has none. With
    a MoE `family`, its model_config answers what the MoE oracles read of it (the model type; no
    quantization_config override)."""
    import contextlib
    import types

    try:
        from vllm.config import VllmConfig, set_current_vllm_config
    except ImportError:
        return contextlib.nullcontext()
    config = VllmConfig()
    if family is not None:
        text = types.SimpleNamespace(model_type=family.get("model_type"))
        model = types.SimpleNamespace(quantization_config=None, hf_text_config=text, hf_config=text)
        object.__setattr__(config, "model_config", model)
    return set_current_vllm_config(config)


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


# The experts of each checkpoint kind, as vLLM's own MoE methods ask their release's oracle
# (fused_moe/oracle/<kind>.py): oracle, select function, weight key, activation key (names in quant_utils), and
# what the FusedMoEConfig carries for that model family (gpt-oss: SwiGLU-OAI with biases).
MOE_CASES = {
    "fp8_block": ("fp8", "select_fp8_moe_backend", "kFp8Static128BlockSym", "kFp8Dynamic128Sym",
                  {"model_type": "qwen3_moe"}),  # Fp8MoEMethod, weight_block_size [128, 128]
    "fp8_tensor": ("fp8", "select_fp8_moe_backend", "kFp8StaticTensorSym", "kFp8DynamicTensorSym",
                   {"model_type": "qwen3_moe"}),
    "mxfp4": ("mxfp4", "select_mxfp4_moe_backend", None, None,
              {"gpt_oss": True, "model_type": "gpt_oss"}),  # Mxfp4MoEMethod
    "nvfp4": ("nvfp4", "select_nvfp4_moe_backend", "kNvfp4Static", "kNvfp4Dynamic",
              {"model_type": "qwen3_moe"}),  # ModelOptNvFp4FusedMoE
    # compressed-tensors' CompressedTensorsW8A8Fp8MoEMethod (from 0.15.1 it calls the same oracle with its own keys
    # and allow_vllm_cutlass=True): FP8-dynamic (channel weights, per-token dynamic activations) and block FP8
    "ct_fp8_channel": ("fp8", "select_fp8_moe_backend", "kFp8StaticChannelSym", "kFp8DynamicTokenSym",
                       {"model_type": "qwen3_moe", "select_kwargs": {"allow_vllm_cutlass": True}}),
    "ct_fp8_block": ("fp8", "select_fp8_moe_backend", "kFp8Static128BlockSym", "kFp8Dynamic128Sym",
                     {"model_type": "qwen3_moe", "select_kwargs": {"allow_vllm_cutlass": True}}),
}


def run_moe_backends(child) -> dict:
    """vLLM's own fused-MoE backend choice (select_*_moe_backend in fused_moe/oracle/) for each MOE_CASES kind on
    each of `moe_backend_capabilities` ([major, minor]), the platform's capability stubbed and the optional kernel
    packages answered as the request's `moe_packages` says (what the wheel pins or vendors: quantization_moe.SHIPPED).
    kind -> "SM" -> --moe-backend value ("auto" first) -> {"backend": enum value, "experts": class name} or
    {"error": vLLM's message, "type": ...}; "dense": _dense_kernels."""
    import importlib

    import vllm.platforms as platforms

    platform = type(platforms._current_platform)
    _SHAPE.update(child.REQ.get("moe_shape") or {})
    _answer_compiled_queries_early()
    oracles = {}
    for kind, (oracle, *_) in MOE_CASES.items():
        try:
            oracles[kind] = importlib.import_module(f"vllm.model_executor.layers.fused_moe.oracle.{oracle}")
        except Exception as exc:  # the release has no oracle for it
            oracles[kind] = f"{type(exc).__name__}: {exc}"[:300]
    keys = importlib.import_module("vllm.model_executor.layers.quantization.utils.quant_utils")
    _answer_kernel_packages(child.REQ.get("moe_packages", {}))
    _answer_compiled_queries(platform)
    _answer_torch_version(child.REQ.get("moe_torch"))
    answers: dict = {}
    for kind, (oracle, select_name, weight, activation, family) in MOE_CASES.items():
        answers[kind] = {}
        module = oracles[kind]
        select = None if isinstance(module, str) else getattr(module, select_name, None)
        if not isinstance(module, str) and family.get("gpt_oss") and \
                hasattr(module, "select_gpt_oss_mxfp4_moe_backend"):
            select = module.select_gpt_oss_mxfp4_moe_backend  # 0.20.x: Mxfp4MoEMethod's call for gpt-oss
        legacy = _legacy_selection(kind) if select is None or _legacy_signature(select) else None
        if isinstance(module, str) and legacy is None:
            answers[kind] = {"error": module}
            continue
        for major, minor in child.REQ["moe_backend_capabilities"]:
            platform.capability_now = (major, minor)
            _clear_caches()
            sm = f"{major}{minor}"
            answers[kind][sm] = {}
            for requested in _moe_backend_values():  # "auto", then each --moe-backend value the release takes
                try:
                    with _default_vllm_config(family):
                        config = _moe_config(family, requested)
                        if legacy is not None:
                            answer = legacy(config, kind)
                            answers[kind][sm][requested] = answer
                            continue
                        if select is None:
                            raise LookupError(f"{oracle}.py has no {select_name}")
                        extra = family.get("select_kwargs", {})
                        if weight is None:
                            backend, experts = select(config)
                        else:
                            backend, experts = select(config, getattr(keys, weight), getattr(keys, activation),
                                                      **extra)
                    answer = {"backend": backend.value, "experts": getattr(experts, "__name__", None)}
                except Exception as exc:  # vLLM's refusal
                    answer = _refusal(exc)
                answers[kind][sm][requested] = answer
    dense = _dense_kernels(child, platform)
    for kind in DENSE_METHODS:
        ask = _legacy_dense(kind)
        dense[kind] = {"absent": ".".join(DENSE_METHODS[kind][:2])} if ask is None else {}
        for major, minor in child.REQ["moe_backend_capabilities"] if ask is not None else []:
            platform.capability_now = (major, minor)
            _clear_caches()
            with _default_vllm_config():
                dense[kind][f"{major}{minor}"] = ask()
    return {"moe": answers, "dense": dense}


# Releases before the oracles took a FusedMoEConfig (0.10.2-0.14.1 for fp8 and nvfp4, 0.10.2-0.18.1 for mxfp4)
# decide the experts' kernel elsewhere: the function each release's MoE method calls, or the method's own __init__
# (0.10.2's Fp8MoEMethod), tried in this order. (module, name, how): "call" = a selection function called with the
# arguments its MoE method passes; "fp8_init" / "mxfp4_init" = the MoE method built as vLLM builds it, its choice
# read from the attributes its apply() dispatches on; "nvfp4_support" = detect_nvfp4_moe_support, then
# get_flashinfer_moe_backend where it allows FlashInfer (what ModelOptNvFp4FusedMoE.__init__ does).
LEGACY_MOE = {
    "fp8": [("vllm.model_executor.layers.fused_moe.oracle.fp8", "select_fp8_moe_backend", "call"),  # 0.14.1
            ("vllm.model_executor.layers.quantization.fp8", "get_fp8_moe_backend", "call"),  # 0.11.2-0.13.0
            ("vllm.model_executor.layers.quantization.fp8", "Fp8MoEMethod", "fp8_init")],  # 0.10.2
    "mxfp4": [("vllm.model_executor.layers.quantization.mxfp4", "Mxfp4MoEMethod", "mxfp4_init")],  # to 0.18.1
    "ct": [("vllm.model_executor.layers.fused_moe.oracle.fp8", "select_fp8_moe_backend", "call")],  # 0.14.1's
    # CompressedTensorsW8A8Fp8MoEMethod (before it, its own __init__ decides: not asked)
    "nvfp4": [("vllm.model_executor.layers.fused_moe.oracle.nvfp4", "select_nvfp4_moe_backend", "call"),  # 0.14.1
              ("vllm.model_executor.layers.quantization.utils.nvfp4_moe_support", "detect_nvfp4_moe_support",
               "nvfp4_support")],  # 0.10.2-0.13.0
}  # fmt: skip


def _legacy_signature(select) -> bool:
    """True when the oracle's function does not take a FusedMoEConfig first (0.14.1's select_*_moe_backend)."""
    import inspect

    params = list(inspect.signature(select).parameters)
    return not params or params[0] != "config"


def _legacy_selection(kind: str):
    """A callable (config, kind) -> answer for this release's pre-oracle choice, or None where none is found.
    Answers carry "via": the module.name asked (quantization_moe.where_in reads the same list)."""
    import importlib

    for module_name, name, how in LEGACY_MOE.get(kind.split("_")[0], []):
        try:
            target = getattr(importlib.import_module(module_name), name)
        except Exception:
            continue
        if how == "call" and _legacy_signature(target) is False:
            continue  # a FusedMoEConfig-taking oracle: not the legacy one
        via = f"{module_name}.{name}"
        return lambda config, kind, _t=target, _how=how, _via=via: _ask_legacy(_t, _how, _via, config, kind)
    return None


def _ask_legacy(target, how: str, via: str, config, kind: str) -> dict:
    import types

    try:
        if how == "call":
            backend = _call_with(target, config, kind)
            backend = backend[0] if isinstance(backend, tuple) else backend
            answer = {"backend": _enum_name(backend)}
        elif how == "fp8_init":
            quant = types.SimpleNamespace(weight_block_size=[128, 128] if kind == "fp8_block" else None,
                                          activation_scheme="dynamic", is_checkpoint_fp8_serialized=True)
            layer = types.SimpleNamespace(moe_config=config, moe_parallel_config=config.moe_parallel_config)
            method = target(quant, layer)
            answer = {"backend": _fp8_init_choice(method)}
        elif how == "mxfp4_init":
            method = target(config)
            answer = {"backend": _enum_name(method.mxfp4_backend)}
        else:  # nvfp4_support
            support = target("ModelOptNvFp4FusedMoE")
            if support.use_marlin:
                answer = {"backend": "MARLIN"}
            elif support.allow_flashinfer:
                import importlib

                flashinfer = importlib.import_module("vllm.model_executor.layers.quantization.utils.flashinfer_utils")
                answer = {"backend": "FLASHINFER_" + _enum_name(flashinfer.get_flashinfer_moe_backend())}
            else:
                answer = {"backend": "CUTLASS" if support.cutlass_supported else None}
    except Exception as exc:  # vLLM's refusal (a raise or an assert in the method's __init__)
        answer = _refusal(exc)
    return answer | {"via": via}


def _call_with(target, config, kind: str):
    """The legacy selection function called with what its MoE method passes (by parameter name)."""
    import inspect

    values = {"block_quant": kind.endswith("fp8_block"), "tp_size": 1, "with_lora_support": False,
              "moe_parallel_config": config.moe_parallel_config, "is_act_and_mul": True,
              "allow_vllm_cutlass": kind.startswith("ct_"), "config": config}  # fmt: skip  (CT passes True)
    params = inspect.signature(target).parameters
    return target(**{k: values[k] for k in params if k in values})


def _enum_name(value) -> str | None:
    """A backend enum's value where it is a string (later releases), else its name (Mxfp4Backend.MARLIN)."""
    if value is None:
        return None
    inner = getattr(value, "value", value)
    return inner if isinstance(inner, str) else getattr(value, "name", str(value))


def _fp8_init_choice(method) -> str:
    """0.10.2's Fp8MoEMethod: the kernel its apply() runs, in apply()'s order (FlashInfer TRT-LLM, Marlin,
    FlashInfer CUTLASS, else fused_experts with DeepGEMM / CUTLASS block-scaled grouped GEMM where allowed, else
    Triton), named as 0.11.2's Fp8MoeBackend names them."""
    flashinfer = _enum_name(getattr(method, "flashinfer_moe_backend", None))
    if flashinfer in ("TENSORRT_LLM", "trtllm"):
        return "FLASHINFER_TRTLLM"
    if getattr(method, "use_marlin", False):
        return "MARLIN"
    if flashinfer is not None:
        return "FLASHINFER_CUTLASS"
    if getattr(method, "allow_deep_gemm", False):
        return "DEEPGEMM"
    if getattr(method, "allow_cutlass_block_scaled_grouped_gemm", False):
        return "CUTLASS_BLOCK_SCALED_GROUPED_GEMM"
    return "TRITON"


def _answer_torch_version(pinned: str | None) -> None:
    """vLLM's is_torch_equal_or_newer (0.10.2-0.17.1's MXFP4 choice asks it) answered for the torch the wheel pins,
    not this venv's, in every vLLM module that imported it by name."""
    import sys

    if not pinned:
        return
    from packaging.version import Version

    answer = lambda target: Version(pinned) >= Version(target)  # noqa: E731
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("vllm") and callable(getattr(module, "is_torch_equal_or_newer",
                                                                                    None)):
            module.is_torch_equal_or_newer = answer


# The dense (linear) FP4 layers: the kernel-selection function each release's linear method calls.
DENSE_CASES = {
    "nvfp4": ("vllm.model_executor.kernels.linear", "init_nvfp4_linear_kernel", {}),  # ModelOptNvFp4LinearMethod
    "mxfp4": ("vllm.model_executor.kernels.linear", "init_mxfp4_linear_kernel", {}),
}


def _dense_kernels(child, platform) -> dict:
    """kind -> "SM" -> {"kernel": the class vLLM's init_*_linear_kernel picks} or {"error": its message}; a release
    without the function answers {"absent": "<module>.<function>"}."""
    import importlib

    answers: dict = {}
    for kind, (module_name, name, kwargs) in DENSE_CASES.items():
        try:
            init = getattr(importlib.import_module(module_name), name)
        except Exception:
            legacy = _legacy_dense(kind)
            answers[kind] = {"absent": f"{module_name}.{name}"} if legacy is None else {}
            for major, minor in child.REQ["moe_backend_capabilities"] if legacy is not None else []:
                platform.capability_now = (major, minor)
                _clear_caches()
                with _default_vllm_config():
                    answers[kind][f"{major}{minor}"] = legacy()
            continue
        answers[kind] = {}
        for major, minor in child.REQ["moe_backend_capabilities"]:
            platform.capability_now = (major, minor)
            _clear_caches()
            try:
                with _default_vllm_config():
                    answers[kind][f"{major}{minor}"] = {"kernel": type(init(**kwargs)).__name__}
            except Exception as exc:
                answers[kind][f"{major}{minor}"] = _refusal(exc)
    return answers


# Where a release has no init_*_linear_kernel: the linear method its config class builds. (module, class, how):
# "nvfp4_linear" = ModelOptNvFp4LinearMethod built as vLLM builds it, its `backend` read (the GEMM it runs);
# "mxfp4_method" = Mxfp4Config.get_quant_method for a linear layer (a dense model's linear layers with
# quant_method mxfp4 / --quantization mxfp4): the method class it returns, or its refusal.
LEGACY_DENSE = {
    "nvfp4": ("vllm.model_executor.layers.quantization.modelopt", "ModelOptNvFp4LinearMethod", "nvfp4_linear"),
}
# Asked of every release, whatever kernels/linear has: what Mxfp4Config does with a dense model's linear layer.
DENSE_METHODS = {
    "mxfp4_method": ("vllm.model_executor.layers.quantization.mxfp4", "Mxfp4Config", "mxfp4_method"),
}


def _legacy_dense(kind: str):
    """A callable () -> answer for the release's linear method of `kind`, or None where it has none."""
    import importlib

    if kind not in LEGACY_DENSE and kind not in DENSE_METHODS:
        return None
    module_name, name, how = LEGACY_DENSE.get(kind) or DENSE_METHODS[kind]
    try:
        target = getattr(importlib.import_module(module_name), name)
    except Exception:
        return None
    return lambda: _ask_dense(target, how, f"{module_name}.{name}")


def _ask_dense(target, how: str, via: str) -> dict:
    import types

    try:
        if how == "nvfp4_linear":
            quant = types.SimpleNamespace(is_checkpoint_nvfp4_serialized=True, group_size=16, exclude_modules=[])
            answer = {"kernel": _enum_name(target(quant).backend)}
        else:  # mxfp4_method
            from vllm.model_executor.layers.linear import LinearBase

            config = target.from_config({"quant_method": "mxfp4"})
            layer = LinearBase.__new__(LinearBase)  # only its type is asked (isinstance)
            method = config.get_quant_method(layer, prefix="model.layers.0.mlp.down_proj")
            answer = {"kernel": type(method).__name__ if method is not None else None}
    except Exception as exc:
        answer = _refusal(exc)
    return answer | {"via": via}


def _refusal(exc: Exception) -> dict:
    """vLLM's refusal as stored: its message (object addresses dropped, so a rebuild is identical) and type; a
    message that shows one of this child's stand-ins is the child's failure, typed "StandIn" (not an answer)."""
    import re

    text = re.sub(r" at 0x[0-9a-f]+", "", str(exc))[:300]
    stand_in = re.search(r"\bAnything\b|_Anything|child_stubs|Stub", text)  # child_stubs.Anything, _StubModule
    return {"error": text, "type": "StandIn" if stand_in else type(exc).__name__}


def _moe_backend_values() -> list[str]:
    """'auto' and the release's other --moe-backend values (MoEBackend in vllm/config/kernel.py), in its order."""
    import typing

    try:
        from vllm.config.kernel import MoEBackend
    except ImportError:
        return ["auto"]
    values = [v for v in typing.get_args(MoEBackend) if isinstance(v, str)]
    return ["auto"] + [v for v in values if v != "auto"]


_SHAPE: dict = {}  # the request's "moe_shape": {"gpt_oss" | "other": [experts, per token, hidden, intermediate]}


def _moe_config(family: dict, moe_backend: str = "auto"):
    """A FusedMoEConfig of one GPU, no parallelism, bfloat16 activations: gpt-oss-20b's experts when `gpt_oss`
    (32 experts, 4 per token, hidden 2880, SwiGLU-OAI with biases), else Qwen3-30B-A3B's (128, 8, 2048, 768)."""
    import dataclasses

    import torch

    from vllm.model_executor.layers.fused_moe import config as moe_config

    fields = {f.name for f in dataclasses.fields(moe_config.FusedMoEConfig)}
    activation = _activation("swigluoai" if family.get("gpt_oss") else "silu")
    experts, per_token, hidden, inter = (32, 4, 2880, 2880) if family.get("gpt_oss") else (128, 8, 2048, 768)
    shape = _SHAPE.get("gpt_oss" if family.get("gpt_oss") else "other")
    if shape:  # a request's moe_shape: another model's experts (held-back checks of the shape-free reading)
        experts, per_token, hidden, inter = shape
    values = {"num_experts": experts, "experts_per_token": per_token, "hidden_dim": hidden,
              "intermediate_size": inter, "intermediate_size_per_partition": inter, "num_local_experts": experts,
              "num_logical_experts": experts, "activation": activation, "device": "cuda", "in_dtype": torch.bfloat16,
              "moe_parallel_config": _no_parallel(moe_config.FusedMoEParallelConfig),
              "has_bias": bool(family.get("gpt_oss")), "max_num_tokens": 8192, "moe_backend": moe_backend}  # fmt: skip
    if "routing_method" in fields:
        values["routing_method"] = moe_config.RoutingMethodType.Renormalize
    return moe_config.FusedMoEConfig(**{k: v for k, v in values.items() if k in fields})


def _no_parallel(parallel_class):
    """One GPU, no parallelism: make_no_parallel() where the release has it, else its own make() with sizes 1 and
    a default ParallelConfig (releases before 0.15)."""
    import inspect

    if hasattr(parallel_class, "make_no_parallel"):
        return parallel_class.make_no_parallel()
    from vllm.config import ParallelConfig

    params = inspect.signature(parallel_class.make).parameters
    sizes = {name: 1 for name in params if name.endswith("_size_")}
    return parallel_class.make(**sizes, vllm_parallel_config=ParallelConfig())


def _activation(name: str):
    try:
        from vllm.model_executor.layers.fused_moe.activation import MoEActivation
    except ImportError:
        return name
    return MoEActivation(name) if name in {a.value for a in MoEActivation} else MoEActivation[name.upper()]


def _answer_kernel_packages(packages: dict) -> None:
    """vLLM asks whether FlashInfer, DeepGEMM and triton_kernels are importable (has_flashinfer*, has_deep_gemm,
    has_triton_kernels in vllm.utils): answer as a GPU install of the wheel would, per `packages` (name -> bool),
    in every vLLM module that holds one of these helpers (they are imported by name)."""
    import importlib
    import sys

    for name in ("vllm.model_executor.kernels.linear", "vllm.utils.flashinfer", "vllm.utils.deep_gemm",
                 "vllm.utils.import_utils"):  # fmt: skip
        try:
            importlib.import_module(name)
        except Exception:
            continue
    for module in list(sys.modules.values()):
        if not getattr(module, "__name__", "").startswith("vllm"):
            continue
        for attr, value in list(vars(module).items()):
            package = next((p for p in ("flashinfer", "deep_gemm", "triton_kernels")
                            if attr == f"has_{p}" or attr.startswith(f"has_{p}_")), None)  # fmt: skip
            if package and callable(value) and package in packages:
                setattr(module, attr, lambda *a, _answer=bool(packages[package]), **k: _answer)


# Compiled ops the selection asks about the GPU (csrc/quantization/w8a8/cutlass/scaled_mm_entry.cu): their C++
# answer for a CUDA 12.8+ build, which the CPU child cannot run.
COMPILED_QUERIES = {
    "cutlass_scaled_mm_supports_fp4": lambda capability: capability >= 100,
    "cutlass_scaled_mm_supports_fp8": lambda capability: capability >= 89,
    "cutlass_scaled_mm_supports_block_fp8": lambda capability: capability >= 90,
}


def _answer_compiled_queries_early() -> None:
    """COMPILED_QUERIES in vllm._custom_ops before the quantization modules import: 0.10.2-0.13.0 call them at
    import time (w8a8_utils' CUTLASS_BLOCK_FP8_SUPPORTED, a custom op's default value that must be a real bool)."""
    import importlib

    try:
        ops = importlib.import_module("vllm._custom_ops")
    except Exception:
        return
    for name, answer in COMPILED_QUERIES.items():
        if callable(getattr(ops, name, None)):
            setattr(ops, name, answer)


def _answer_compiled_queries(platform) -> None:
    """COMPILED_QUERIES in vllm._custom_ops and every vLLM module that imported them by name."""
    import sys

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("vllm"):
            for name, answer in COMPILED_QUERIES.items():
                if callable(getattr(module, name, None)):
                    setattr(module, name, answer)


def _clear_caches() -> None:
    """Capability answers vLLM caches (functools.cache on has_device_capability and its helpers) are dropped."""
    import gc
    import functools

    for obj in gc.get_objects():
        if isinstance(obj, functools._lru_cache_wrapper) and getattr(obj, "__module__", "").startswith("vllm"):
            obj.cache_clear()
