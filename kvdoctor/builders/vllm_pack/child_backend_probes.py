"""What the backends child asks of each attention backend class: the input domains, each check method's
answers, the combination grid, the priority table, constructor guards, error templates and real selections
(child_backends.run drives them; child_guards reuses the constructor guards)."""
from __future__ import annotations

import dis
import inspect
import itertools
import random
import traceback

from kvdoctor.builders.vllm_pack.child_shared import FreshVllmConfig, clear_caches, decision_tree

VALUE_METHODS = {  # check method -> the validate_configuration input it takes
    "supports_head_size": "head_size",
    "supports_dtype": "dtype",
    "supports_kv_cache_dtype": "kv_cache_dtype",
    "supports_block_size": "block_size",
    "supports_attn_type": "attn_type",
    "supports_compute_capability": "device_capability",
}
EQUAL_METHODS = {"is_mla": "use_mla", "is_sparse": "use_sparse"}
HEAD_DOMAIN = range(1, 1025)
BLOCK_DOMAIN = [None, 1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 512, 1024, 2048]
DTYPES = ("float16", "bfloat16", "float32")
COMBO_HEADS = sorted(set(range(8, 520, 8)) | {4, 12, 20, 36, 60, 100, 576, 640, 768, 1024})
COMBO_BLOCKS = [None, 1, 16, 32, 64, 128, 256]


def compress_ints(values, domain):
    """A compact exact description of a set of ints within `domain` (a range)."""
    values = sorted(values)
    if not values:
        return {"none": True}
    if len(values) == len(domain):
        return {"all": [domain[0], domain[-1]]}
    from math import gcd
    from functools import reduce

    step = reduce(gcd, values)
    ranges, start, prev = [], values[0], values[0]
    for v in values[1:]:
        if v != prev + step:
            ranges.append([start, prev])
            start = v
        prev = v
    ranges.append([start, prev])
    if len(ranges) <= 16:
        return {"step": step, "ranges": ranges}
    return {"values": values}


def params_of(fn) -> list[str]:
    return list(inspect.signature(fn).parameters)


def loaded_args(fn) -> set[str]:
    """Parameters a function body actually reads (the others cannot change its answer)."""
    fn = inspect.unwrap(getattr(fn, "__func__", fn))
    code = fn.__code__
    args = set(code.co_varnames[: code.co_argcount + code.co_kwonlyargcount])
    used = set()
    stack = [code]
    while stack:
        c = stack.pop()
        for ins in dis.get_instructions(c):
            if ins.opname in ("LOAD_FAST", "LOAD_DEREF", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR",
                              "LOAD_FAST_LOAD_FAST", "LOAD_CLOSURE", "STORE_DEREF"):
                val = ins.argval
                for v in (val if isinstance(val, tuple) else (val,)):
                    if v in args:
                        used.add(v)
        stack.extend(k for k in c.co_consts if hasattr(k, "co_code"))
        used |= {v for v in c.co_cellvars if v in args}
    return used


def set_capability(ctx, platform_cls, cap):
    platform_cls.capability_now = tuple(cap)
    clear_caches()


def call_bool(fn, *args):
    try:
        return bool(fn(*args))
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"[:200]


def backend_answers(ctx, cls, cap, methods, kv_values, dtypes, attn_types, DeviceCapability, checks):
    answers = {}
    for m in methods:
        fn = getattr(cls, m, None)
        if fn is None:
            continue
        if m == "supports_head_size":
            answers[m] = compress_ints([h for h in HEAD_DOMAIN if call_bool(fn, h) is True], HEAD_DOMAIN)
        elif m == "supports_dtype":
            answers[m] = [n for n, d in dtypes.items() if call_bool(fn, d) is True]
        elif m == "supports_kv_cache_dtype":
            answers[m] = [k for k in kv_values if call_bool(fn, k) is True]
        elif m == "supports_block_size":
            answers[m] = [b for b in BLOCK_DOMAIN if call_bool(fn, b) is True]
        elif m == "supports_attn_type":
            answers[m] = [t for t in attn_types if call_bool(fn, t) is True]
        elif m == "supports_compute_capability":
            answers[m] = call_bool(fn, DeviceCapability(*cap))
        else:
            answers[m] = call_bool(fn)
    try:
        sizes = cls.get_supported_kernel_block_sizes()
        answers["kernel_block_sizes"] = [{"multiple_of": s.base} if hasattr(s, "base") else s for s in sizes]
    except Exception as exc:
        answers["kernel_block_sizes"] = f"error: {exc}"[:200]
    answers["combination"] = combination_grid(ctx, cls, cap, kv_values, dtypes, DeviceCapability)
    return answers


def combination_grid(ctx, cls, cap, kv_values, dtypes, DeviceCapability):
    from vllm.v1.attention.backend import AttentionBackend

    fn = cls.supports_combination
    if getattr(fn, "__func__", fn) is getattr(AttentionBackend.supports_combination, "__func__", None):
        return None  # the base answer: always None
    params = [p for p in params_of(fn)]
    used = loaded_args(fn)
    axes = {
        "head_size": COMBO_HEADS, "dtype": list(DTYPES), "kv_cache_dtype": kv_values,
        "block_size": COMBO_BLOCKS, "has_sink": [False, True], "use_mm_prefix": [False, True],
        "use_mla": [False, True], "use_sparse": [False, True],
    }
    fixed = {"device_capability": DeviceCapability(*cap)}
    varied = [a for a in axes if a in params and a in used]
    defaults = {"head_size": 128, "dtype": "bfloat16", "kv_cache_dtype": "auto", "block_size": None,
                "has_sink": False, "use_mm_prefix": False, "use_mla": bool(cls.is_mla()),
                "use_sparse": bool(getattr(cls, "is_sparse", lambda: False)())}
    results = {}
    for combo in itertools.product(*(axes[a] for a in varied)):
        kwargs = dict(fixed)
        kwargs.update({a: defaults[a] for a in axes if a in params})
        kwargs.update(dict(zip(varied, combo)))
        kwargs["dtype"] = dtypes[kwargs["dtype"]] if "dtype" in kwargs else None
        try:
            reason = fn(**{k: v for k, v in kwargs.items() if k in params})
        except Exception as exc:
            reason = f"<error {type(exc).__name__}: {exc}>"[:200]
        if reason is not None:
            results.setdefault(reason, []).append(combo)
    return {"axes": varied, "grid": {a: axes[a] for a in varied},
            "reasons": {r: decision_tree(cells) for r, cells in sorted(results.items())},
            "where": ctx.where(fn)}


def compress_priorities(table):
    """Collapse keys whose answer does not depend on kv dtype / head count: 'cap|mla|*|*'."""
    out = {}
    by_capmla = {}
    for key, idx in table.items():
        cap, mla, kv, heads = key.split("|")
        by_capmla.setdefault((cap, mla), {})[(kv, heads)] = idx
    for (cap, mla), sub in sorted(by_capmla.items()):
        values = set(sub.values())
        if len(values) == 1:
            out[f"{cap}|{mla}|*|*"] = values.pop()
            continue
        by_kv = {}
        for (kv, heads), idx in sub.items():
            by_kv.setdefault(kv, {})[heads] = idx
        for kv, hs in sorted(by_kv.items()):
            if len(set(hs.values())) == 1:
                out[f"{cap}|{mla}|{kv}|*"] = next(iter(hs.values()))
            else:
                for heads, idx in sorted(hs.items()):
                    out[f"{cap}|{mla}|{kv}|{heads}"] = idx
    return out


def constructor_guards(ctx, classes, caps, platform_cls, kv_values, dtypes, query_quant=None):
    """Errors each backend's implementation constructor raises from its own module, per capability and kv.
    query_quant (a dict, when given) gets, per backend, the cells whose constructed implementation says
    `supports_quant_query_input` (the attention layer then quantizes queries for an fp8 cache and asserts an
    e4m3 one)."""
    import torch

    out = {}
    for name, cls in classes.items():
        try:
            impl = cls.get_impl_cls()
        except Exception:
            continue
        impl_file = inspect.getsourcefile(impl)
        params = params_of(impl.__init__)
        # MLA implementations that take their MLA arguments as **mla_args (TritonMLAImpl) get them too
        var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in inspect.signature(impl.__init__).parameters.values())
        # (not sparse MLA: its constructor also needs the model's indexer, which the probe cannot give)
        mla_kw = var_kw and "q_lora_rank" not in params and bool(getattr(cls, "is_mla", lambda: False)()) \
            and not bool(getattr(cls, "is_sparse", lambda: False)())
        for cap in caps:
            set_capability(ctx, platform_cls, cap)
            for kv in kv_values:
                kwargs = {"num_heads": 8, "head_size": 128, "scale": 0.088, "num_kv_heads": 8,
                          "alibi_slopes": None, "sliding_window": None, "kv_cache_dtype": kv,
                          "logits_soft_cap": None, "attn_type": "decoder", "kv_sharing_target_layer_name": None}
                mla = {}
                if "q_lora_rank" in params or mla_kw:  # MLA implementations
                    kwargs.update(head_size=576, num_kv_heads=1)
                    mla = dict(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
                               qk_head_dim=192, v_head_dim=128, kv_b_proj=None)
                    kwargs.update(mla)
                try:
                    with FreshVllmConfig():
                        built = impl(**{k: v for k, v in kwargs.items() if k in params or (mla_kw and k in mla)})
                    if query_quant is not None and getattr(built, "supports_quant_query_input", False) is True:
                        query_quant.setdefault(name, []).append(f"{cap[0]}.{cap[1]}|{kv}")
                except Exception as exc:
                    tb = traceback.extract_tb(exc.__traceback__)
                    frame = tb[-1]
                    if inspect.getsourcefile(impl) and frame.filename == impl_file and \
                            isinstance(exc, (ValueError, NotImplementedError, RuntimeError, AssertionError)) \
                            and "__init__" in frame.name:
                        message = str(exc)
                        entry = out.setdefault(name, {}).setdefault(message, {
                            "type": type(exc).__name__, "where": f"{ctx.rel_path(frame.filename)}:{frame.lineno}",
                            "cells": []})
                        entry["cells"].append(f"{cap[0]}.{cap[1]}|{kv}")
    return out


def selector_config_fields():
    from vllm.v1.attention.selector import AttentionSelectorConfig

    fields = list(AttentionSelectorConfig._fields)
    defaults = {k: (v if isinstance(v, (bool, int, str, type(None))) else str(v))
                for k, v in AttentionSelectorConfig._field_defaults.items()}
    sentinel = AttentionSelectorConfig(*[f"{{{f}}}" for f in fields])
    return {"fields": fields, "defaults": defaults, "repr_template": repr(sentinel)}


def templates(ctx, cuda_mod, Enum):
    out = {}
    try:
        Enum["NO_SUCH_BACKEND"]
    except Exception as exc:
        out["unknown_backend"] = str(exc).replace("NO_SUCH_BACKEND", "{name}")
    out["enum_str"] = str(Enum.FLASH_ATTN).replace("FLASH_ATTN", "{name}")
    out["get_attn_backend_cls"] = ctx.where(cuda_mod.CudaPlatformBase.get_attn_backend_cls)
    return out


def real_selections(ctx, caps, platform_cls, kv_values, Enum, DeviceCapability):
    """vLLM's real get_attn_backend_cls over a deterministic sample: the test oracle for kvdoctor's replay."""
    import torch
    from vllm.platforms import current_platform
    from vllm.v1.attention.selector import AttentionSelectorConfig

    rng = random.Random(1234)
    fields = AttentionSelectorConfig._fields
    samples = []
    heads = [64, 80, 96, 128, 192, 256, 512, 576, 72, 100]
    forced_pool = [None] * 6 + ["FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION", "TURBOQUANT",
                                "TRITON_MLA", "FLASHMLA", "CUTLASS_MLA", "FLASHINFER_MLA", "FLASH_ATTN_MLA"]
    forced_pool = [f for f in forced_pool if f is None or f in Enum.__members__]
    for cap in caps:
        set_capability(ctx, platform_cls, cap)
        for i in range(40):
            use_mla = rng.random() < 0.3
            cfg = {"head_size": 576 if use_mla else rng.choice(heads),
                   "dtype": rng.choice(["bfloat16", "float16", "float32"]),
                   "kv_cache_dtype": rng.choice(kv_values),
                   "block_size": rng.choice([None, None, 16, 32, 64, 128, 256, 1]),
                   "use_mla": use_mla, "has_sink": rng.random() < 0.2,
                   "use_sparse": use_mla and rng.random() < 0.3,
                   "attn_type": rng.choice(["decoder"] * 5 + ["encoder_only", "encoder_decoder"])}
            if "has_sliding_window" in fields:
                cfg["has_sliding_window"] = rng.random() < 0.2
            if "use_non_causal" in fields:
                cfg["use_non_causal"] = rng.random() < 0.1
            forced = rng.choice(forced_pool)
            num_heads = rng.choice([None, 8, 16, 32, 128])
            kwargs = {k: v for k, v in cfg.items() if k in fields}
            kwargs["dtype"] = getattr(torch, kwargs["dtype"])
            entry = {"capability": list(cap), "config": cfg, "forced": forced, "num_heads": num_heads}
            try:
                with FreshVllmConfig():
                    path = current_platform.get_attn_backend_cls(
                        Enum[forced] if forced else None, attn_selector_config=AttentionSelectorConfig(**kwargs),
                        num_heads=num_heads)
                entry["result"] = path
                entry["backend"] = next((m.name for m in Enum if m.value == path), path)
            except Exception as exc:
                entry["error"] = f"{type(exc).__name__}: {exc}"
            samples.append(entry)
    return samples
