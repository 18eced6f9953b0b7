"""Child task helpers: what each attention backend's implementation constructor (and, where it reads the layers,
its metadata builder's constructor) says about the layer features real models have: a sliding window, a logits
soft cap, attention sinks, ALiBi slopes and head sizes other than the probe's 128. The plain constructor guards
(child_backend_probes.constructor_guards) use a layer with none of these; a backend may refuse one of them only
when it is constructed (FlashInfer on SM90 with sliding-window layers, raised in its metadata builder), which the
selector's checks never ask.
"""
from __future__ import annotations

import inspect
import traceback

from kvdoctor.builders.vllm_pack.child_stubs import Anything

# feature -> the constructor arguments a layer with it gets (values as real models have them)
FEATURES = {
    "sliding_window": {"sliding_window": 4096},
    "logits_soft_cap": {"logits_soft_cap": 30.0},
    "sinks": {"sinks": "tensor"},
    "alibi": {"alibi_slopes": [2.0 ** -(i + 1) for i in range(8)]},
    "head_size_64": {"head_size": 64},
    "head_size_256": {"head_size": 256},
}
REFUSALS = (ValueError, NotImplementedError, RuntimeError, AssertionError, TypeError)


def _kwargs(params, mla_kw, mla, kv, feature, torch):
    kwargs = {"num_heads": 8, "head_size": 128, "scale": 0.088, "num_kv_heads": 8, "alibi_slopes": None,
              "sliding_window": None, "kv_cache_dtype": kv, "logits_soft_cap": None, "attn_type": "decoder",
              "kv_sharing_target_layer_name": None}
    if mla:
        kwargs.update(head_size=576, num_kv_heads=1, **mla)
    for name, value in FEATURES[feature].items() if feature else ():
        if feature.startswith("head_size") and mla:
            continue
        kwargs[name] = torch.zeros(8, dtype=torch.float32) if value == "tensor" else value
    wanted = set(FEATURES[feature]) if feature else set()
    # a feature argument goes in even when the constructor does not take it: vLLM's layer passes it (TypeError)
    return {k: v for k, v in kwargs.items() if k in params or (mla_kw and k in mla) or k in wanted - {"head_size"}}


class _ModelStandIn:
    """What a metadata builder reads of ModelConfig at start-up, for a plain bf16 decoder (8 heads of 128)."""

    max_model_len, use_mla, is_encoder_decoder, enforce_eager = 4096, False, False, False
    architectures, architecture = ["Qwen2ForCausalLM"], "Qwen2ForCausalLM"
    max_logprobs, runner_type, is_hybrid, is_attention_free, use_async_output_proc = 20, "generate", False, False, False

    def __init__(self, torch):
        self.dtype = torch.bfloat16
        self.hf_config = self.hf_text_config = _HfConfig()

    def get_head_size(self):
        return 128

    def get_num_kv_heads(self, parallel_config=None):
        return 8

    def get_num_attention_heads(self, parallel_config=None):
        return 8

    def get_sliding_window(self):
        return None

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return None


def _layer_config(torch):
    """A default VllmConfig whose model config is the stand-in above."""
    from vllm.config import VllmConfig

    config = VllmConfig()
    object.__setattr__(config, "model_config", _ModelStandIn(torch))
    compilation = config.compilation_config
    for name, value in (("cudagraph_capture_sizes", [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]),
                        ("max_cudagraph_capture_size", 512)):  # what VllmConfig's post-init derives at start-up
        if hasattr(compilation, name):
            object.__setattr__(compilation, name, value)
    return config


class _LayerConfig:
    """`with _LayerConfig(torch):` constructs under the stand-in model's VllmConfig, buffers as _unpinned gives them."""

    def __init__(self, torch, module=None):
        from vllm.config import set_current_vllm_config

        self._cm = set_current_vllm_config(_layer_config(torch))
        self._buffers = _unpinned(torch)
        self._module = module  # its module-level state (a shared buffer a constructor caches) is restored after

    def __enter__(self):
        self._saved = dict(vars(self._module)) if self._module is not None else None
        self._cm.__enter__()
        self._buffers.__enter__()
        return self

    def __exit__(self, *exc):
        self._buffers.__exit__(*exc)
        self._cm.__exit__(*exc)
        if self._saved is not None:
            state = vars(self._module)
            for name in [n for n in state if n not in self._saved]:
                del state[name]
            state.update(self._saved)
        return False


class _HfConfig:
    """What constructors read of the Hugging Face config: a Qwen2 decoder."""

    model_type, architectures = "qwen2", ["Qwen2ForCausalLM"]

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return None


class _Layer:
    """What get_layers_from_vllm_config hands a metadata builder: a layer holding its implementation."""

    def __init__(self, impl):
        self.impl = impl


def _spec(torch):
    from vllm.v1.kv_cache_interface import FullAttentionSpec

    return FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype=torch.bfloat16)


def _own_refusal(exc, files) -> tuple[str, str] | None:
    """(type, file:line) when `exc` is a refusal raised in an __init__ of one of `files` (the backend's module)."""
    frame = traceback.extract_tb(exc.__traceback__)[-1]
    if isinstance(exc, REFUSALS) and frame.filename in files and "__init__" in frame.name:
        return type(exc).__name__, f"{frame.filename}:{frame.lineno}"
    return None


def layer_guards(ctx, classes, caps, platform_cls, kv_values) -> dict:
    """Per backend: the refusals its implementation constructor (stage 'impl') or its metadata builder's
    constructor (stage 'builder', for the features it reads from the layers) raises for a layer with each feature
    of FEATURES, per capability and KV dtype, where the same layer without the feature constructs; and which
    (capability, KV dtype) cells were probed at each stage (a cell not probed decides nothing)."""
    import torch

    from kvdoctor.builders.vllm_pack.child_backend_probes import set_capability

    refusals: dict = {}
    probed: dict = {}
    for name, cls in classes.items():
        try:
            impl_cls = cls.get_impl_cls()
        except Exception:
            continue
        files = {inspect.getsourcefile(impl_cls), inspect.getsourcefile(cls)}
        module = inspect.getmodule(impl_cls)
        try:
            files.add(inspect.getsourcefile(cls.get_builder_cls()))
        except Exception:
            pass
        signature = inspect.signature(impl_cls.__init__).parameters
        params = list(signature)
        var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.values())
        is_mla = bool(getattr(cls, "is_mla", lambda: False)())
        if bool(getattr(cls, "is_sparse", lambda: False)()) or (is_mla and "q_lora_rank" not in params and not var_kw):
            continue  # sparse MLA needs the model's indexer; nothing to construct without it
        mla = dict(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, qk_head_dim=192,
                   v_head_dim=128, kv_b_proj=None) if is_mla else {}
        mla_kw = var_kw and is_mla and "q_lora_rank" not in params
        features = [f for f in FEATURES if not (is_mla and f.startswith("head_size"))]
        stages = probed.setdefault(name, {"impl": [], "builder": []})
        for cap in caps:
            set_capability(ctx, platform_cls, cap)
            for kv in kv_values:
                cell = f"{cap[0]}.{cap[1]}|{kv}"
                try:
                    with _LayerConfig(torch, module):
                        base = impl_cls(**_kwargs(params, mla_kw, mla, kv, None, torch))
                except Exception:
                    continue  # the plain constructor guard (or a stand-in) stops it: nothing to compare with
                stages["impl"].append(cell)
                builder_ok = not is_mla and _builder(cls, base, torch) is None
                if builder_ok:
                    stages["builder"].append(cell)
                for feature in features:
                    try:
                        with _LayerConfig(torch, module):
                            impl = impl_cls(**_kwargs(params, mla_kw, mla, kv, feature, torch))
                    except Exception as exc:
                        _record(refusals, name, exc, _own_refusal(exc, files), "impl", f"{cell}|{feature}", ctx)
                        continue
                    if builder_ok:
                        exc = _builder(cls, impl, torch)
                        if exc is not None:
                            _record(refusals, name, exc, _own_refusal(exc, files), "builder", f"{cell}|{feature}", ctx)
    return {"features": {f: sorted(v) for f, v in FEATURES.items()}, "probed": probed, "refusals": refusals}


def _record(refusals, name, exc, own, stage, cell, ctx):
    if own is None:  # raised elsewhere (a stand-in, the probe itself): the cell stays unprobed
        refusals.setdefault(name, {}).setdefault("<not probed>", {"cells": []})["cells"].append(cell)
        return
    kind, where = own
    file, line = where.rsplit(":", 1)
    entry = refusals.setdefault(name, {}).setdefault(str(exc), {"type": kind, "where": f"{ctx.rel_path(file)}:{line}",
                                                                "stage": stage, "cells": []})
    entry["cells"].append(cell)


def _builder(cls, impl, torch):
    """The exception the backend's metadata builder raises when constructed for one layer with `impl` (None: it
    constructs)."""
    from vllm.config import set_current_vllm_config

    try:
        builder = cls.get_builder_cls()
        config = _layer_config(torch)
        config.compilation_config.static_forward_context[_LAYER] = _probe_layer()(impl)
        spec = _spec(torch)
    except Exception as exc:
        return exc
    module = inspect.getmodule(builder)
    saved = dict(vars(module))
    try:
        with set_current_vllm_config(config), _unpinned(torch):
            builder(spec, [_LAYER], config, torch.device("cpu"))
    except Exception as exc:
        return exc
    finally:  # module-level state the builder cached is forgotten (each probe starts afresh)
        state = vars(module)
        for name in [n for n in state if n not in saved]:
            del state[name]
        state.update(saved)
    return None


def _size(value):
    """A buffer size read from a modelled dependency (a stand-in object) becomes 1 element."""
    return 1 if isinstance(value, Anything) else value


class _unpinned:
    """Buffers a constructor allocates: asked pinned, allocated unpinned (no pinned-memory allocator without a GPU);
    sized by a modelled dependency's stand-in, one element."""

    NAMES = ("zeros", "empty", "ones", "full", "tensor", "arange", "empty_strided", "zeros_like", "empty_like",
             "ones_like", "full_like")

    def __init__(self, torch):
        self.torch, self.saved = torch, {}

    def __enter__(self):
        for name in self.NAMES:
            fn = self.saved[name] = getattr(self.torch, name)
            setattr(self.torch, name, lambda *a, _fn=fn, **k: _fn(*[_size(v) for v in a], **{
                **k, **({"pin_memory": False} if k.get("pin_memory") else {})}))
        return self

    def __exit__(self, *exc):
        for name, fn in self.saved.items():
            setattr(self.torch, name, fn)
        return False


_LAYER = "model.layers.0.self_attn.attn"


def _probe_layer():
    try:
        from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase
    except ImportError:
        return _Layer
    layer = type("ProbeLayer", (_Layer, AttentionLayerBase), {})
    layer.__abstractmethods__ = frozenset()
    return layer
