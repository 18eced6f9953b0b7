"""Child task `module:runtime`: the model runner vLLM picks and how it resolves the model dtype, per release.

- model runner: `VllmConfig.use_v2_model_runner` (0.23-0.33) evaluated on a stand-in config over the inputs it
  reads (VLLM_USE_V2_MODEL_RUNNER, runner type, hybrid, attention-free, MoE, default-V2 architecture), with
  default serve flags (no V2-unsupported feature) and Triton modelled as usable; older releases: the env
  default; newer: the platform's environment validation (V1 removed);
- dtype: vLLM's own `_get_and_verify_dtype` per capability, config dtype, `--dtype` and model type, then the
  platform's `check_if_supports_dtype` (the bf16 < SM80 error);
- KVQuantMode members (the V1 TurboQuant 'auto' bug's fix adds one).
"""
from __future__ import annotations

import inspect
import itertools
import types

from kvdoctor.builders.vllm_pack.child_shared import assignment_lines, set_env

DTYPES = ("float16", "bfloat16", "float32")
REQUESTED = ("auto", "half", "float16", "bfloat16", "float", "float32")


def run(ctx) -> dict:
    out = {"where": {}}
    if not ctx.REQ.get("eager_platform"):  # before 0.7: the V0 engine only, no model-runner choice to ask
        out["model_runner"] = model_runner(ctx, out["where"])
    dtype = dtype_resolution(ctx, out["where"])
    if dtype is not None:
        out["dtype"] = dtype
    try:
        from vllm.v1.kv_cache_interface import KVQuantMode

        out["kv_quant_modes"] = [m.name for m in KVQuantMode]
        out["where"]["kv_quant_modes"] = ctx.where(KVQuantMode)
    except Exception:
        out["kv_quant_modes"] = None
    return out


class _Unset(types.SimpleNamespace):
    """A stand-in config: every setting not given is unset (None), as with default serve flags."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return None


def model_runner(ctx, where) -> dict:
    from vllm.config import VllmConfig

    try:
        import vllm.config.vllm as vllm_config_mod
    except ImportError:  # before 0.11: one vllm/config/__init__.py
        import vllm.config as vllm_config_mod

    out = {"env": "VLLM_USE_V2_MODEL_RUNNER"}
    prop = getattr(VllmConfig, "use_v2_model_runner", None)
    if isinstance(prop, property):
        out["kind"] = "property"
        where["model_runner"] = ctx.where(prop.fget)
        arches = sorted(getattr(vllm_config_mod, "DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES", ()) or ())
        getter = getattr(vllm_config_mod, "get_default_v2_model_runner_architectures", None)
        if callable(getter):
            try:
                arches = sorted(getter())
            except Exception:
                pass
        out["default_v2_architectures"] = arches
        if hasattr(vllm_config_mod, "HAS_TRITON"):
            vllm_config_mod.HAS_TRITON = True
        table = {}
        for env, runner, hybrid, free, moe, default_arch in itertools.product(
                (None, "0", "1"), ("generate", "pooling"), (False, True), (False, True), (False, True),
                (False, True)):
            set_env("VLLM_USE_V2_MODEL_RUNNER", env)
            model = _Unset(
                runner_type=runner, is_hybrid=hybrid, is_attention_free=free, is_moe=moe, is_diffusion=False,
                is_quantized=False,
                architectures=[arches[0]] if (default_arch and arches) else ["SomeOtherForCausalLM"])
            parallel = _Unset(prefill_context_parallel_size=1, decode_context_parallel_size=1,
                              tensor_parallel_size=1, pipeline_parallel_size=1, data_parallel_size=1)
            fake = _Unset(model_config=model, speculative_config=None, attention_config=_Unset(),
                          parallel_config=parallel)
            for name, member in vars(VllmConfig).items():  # the private helpers the property calls
                if name.startswith("_") and not name.startswith("__") and inspect.isfunction(member):
                    setattr(fake, name, types.MethodType(member, fake))
            fake._get_v2_model_runner_unsupported_features = lambda: []  # default serve flags
            try:
                value = "V2" if prop.fget(fake) else "V1"
            except Exception as exc:
                value = f"error: {type(exc).__name__}: {exc}"[:200]
            key = f"{env}|{runner}|{int(hybrid)}|{int(free)}|{int(moe)}|{int(default_arch)}"
            table[key] = value
        set_env("VLLM_USE_V2_MODEL_RUNNER", None)
        out["table"] = table
        # also assumed: an unquantized model, no context parallelism (see docs/vllm-pack.md)
        out["assumes"] = "default serve flags (no V2-unsupported feature), Triton usable"
        fn = getattr(VllmConfig, "_get_v2_model_runner_unsupported_features", None)
        if fn is not None:
            where["model_runner.unsupported_features"] = ctx.where(fn)
        return out
    # no per-model choice: the environment variable alone, or V1 removed
    import vllm.envs as envs

    out["kind"] = "env"
    values = {}
    for env in (None, "0", "1"):
        set_env("VLLM_USE_V2_MODEL_RUNNER", env)
        try:
            value = getattr(envs, "VLLM_USE_V2_MODEL_RUNNER")
            values[str(env)] = None if value is None else ("V2" if value else "V1")
        except AttributeError:  # no such variable: only one runner exists (V1 before 0.12, V2 once V1 is removed)
            values[str(env)] = "V1" if ctx.REQ.get("legacy") else "V2"
        except Exception as exc:
            values[str(env)] = f"error: {exc}"[:200]
    errors = {}
    from vllm.platforms import current_platform

    validate = getattr(current_platform, "validate_environ", None)
    if validate is not None:
        where["model_runner.validate_environ"] = ctx.where(validate)
        for env in ("0", "1"):
            set_env("VLLM_USE_V2_MODEL_RUNNER", env)
            try:
                validate(hard_fail=True)
            except Exception as exc:
                if "VLLM_USE_V2_MODEL_RUNNER" in str(exc):
                    errors[env] = f"{type(exc).__name__}: {exc}"
    set_env("VLLM_USE_V2_MODEL_RUNNER", None)
    if errors:
        out["kind"] = "v2_only"
        values = {"None": "V2", "1": "V2"}
    out["env_values"] = values
    out["env_errors"] = errors
    return out


def dtype_resolution(ctx, where) -> dict:
    import torch

    try:
        from vllm.platforms import current_platform
    except ModuleNotFoundError:  # before 0.5: no platform layer; the worker asks torch.cuda (stubbed)
        from kvdoctor.builders.vllm_pack.child_stubs import CAPABILITY_HOLDER as current_platform

    try:
        import vllm.config.model as model_mod
    except ImportError:  # before 0.11: one vllm/config/__init__.py
        import vllm.config as model_mod

    platform_cls = type(current_platform)
    fn = getattr(model_mod, "_get_and_verify_dtype")
    where["resolve_dtype"] = ctx.where(fn)
    special = dict(getattr(model_mod, "_FLOAT16_NOT_SUPPORTED_MODELS", {}) or {})
    where["float16_not_supported_models"] = _where_name(ctx, model_mod, "_FLOAT16_NOT_SUPPORTED_MODELS")
    check = getattr(current_platform, "check_if_supports_dtype", None)
    if check is None:  # before 0.10: each engine's worker refuses bf16 below SM80 itself
        check = _worker_dtype_check(ctx, where)
        if check is None:  # no check read: no dtype facts rather than answers that never refuse
            return None
    else:
        where["check_if_supports_dtype"] = ctx.where(check)
    from transformers import PretrainedConfig

    params = list(inspect.signature(fn).parameters)
    model_types = ["llama"] + sorted(special)
    table = {}
    for cap in ctx.REQ["capabilities"]:
        platform_cls.capability_now = tuple(cap)
        for config_dtype, requested, model_type, pooling in itertools.product(
                DTYPES, REQUESTED, model_types, (False, True)):
            config = PretrainedConfig()
            config.model_type = model_type
            config.dtype = getattr(torch, config_dtype)
            try:
                config.torch_dtype = getattr(torch, config_dtype)
            except Exception:
                pass
            kwargs = {}
            if "is_pooling_model" in params:
                kwargs["is_pooling_model"] = pooling
            elif pooling:
                continue
            try:
                result = fn("stand-in/model", config, requested, **kwargs) if "model_id" in params[:1] \
                    else fn(config, requested, **kwargs)
                dtype = str(result).replace("torch.", "")
                error = None
                if check is not None:
                    try:
                        check(result)
                    except Exception as exc:
                        error = f"{type(exc).__name__}: {exc}"
            except Exception as exc:
                dtype, error = None, f"{type(exc).__name__}: {exc}"
            key = f"{cap[0]}.{cap[1]}|{config_dtype}|{requested}|{model_type}|{int(pooling)}"
            table[key] = [dtype, error]
    return {"table": table, "float16_not_supported": special, "pooling_param": "is_pooling_model" in params}


def _worker_dtype_check(ctx, where):
    """The workers' own `_check_if_gpu_supports_dtype` (V0's vllm/worker/worker.py, V1's gpu_worker.py; releases
    before the platform check), asked together: a refusal by either is the answer, the first worker's cited; None
    when the release has neither (its dtype answers then carry no refusal, and the builder says so)."""
    import importlib
    import sys

    try:
        importlib.import_module("vllm.device_allocator.cumem")
    except Exception:  # it loads libcudart at import time (0.9); the workers use it only for sleep mode
        from kvdoctor.builders.vllm_pack.child_stubs import stand_in_module

        sys.modules["vllm.device_allocator.cumem"] = stand_in_module("vllm.device_allocator.cumem")
    checks = []
    for key, module in (("v0_worker", "vllm.worker.worker"), ("v1_worker", "vllm.v1.worker.gpu_worker")):
        try:
            fn = importlib.import_module(module)._check_if_gpu_supports_dtype
        except Exception:  # the module's other imports fail under the stubs (0.10.0-0.10.1: a custom op's default)
            fn = function_alone(module, "_check_if_gpu_supports_dtype")
            if fn is None:
                continue
        where["check_if_supports_dtype" if not checks else f"check_if_supports_dtype.{key}"] = ctx.where(fn)
        checks.append(fn)
    if not checks:
        return None

    def check(dtype):
        for fn in checks:
            fn(dtype)

    return check


def function_alone(module: str, name: str):
    """A module-level function read alone from the module's source, with the module's `torch` and vLLM's
    `current_platform` as its globals (what the workers' dtype check uses), when the module itself cannot be imported;
    None when its source or the function is not there. Compiled at its own lines, so it is cited where it is."""
    import ast
    import importlib.util

    import torch

    try:
        spec = importlib.util.find_spec(module)
    except Exception:  # its package is not in this release (vllm.v1 before 0.6.6)
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    from vllm.platforms import current_platform
    with open(spec.origin) as f:
        tree = ast.parse(f.read(), spec.origin)
    found = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name]
    if not found:
        return None
    namespace = {"torch": torch, "current_platform": current_platform, "__name__": module}
    exec(compile(ast.Module(body=found, type_ignores=[]), spec.origin, "exec"), namespace)
    return namespace[name]


def _where_name(ctx, module, name):
    file = inspect.getsourcefile(module)
    lines = assignment_lines(file, name)
    return f"{ctx.rel_path(file)}:{lines[0]}" if lines else None
