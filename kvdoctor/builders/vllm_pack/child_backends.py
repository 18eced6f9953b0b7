"""Child task `module:backends`: what each CUDA attention backend of this release accepts, per capability.

Everything is asked of vLLM's own classes with the platform's device capability stubbed:
- `checks`: the order, wording and gates of the base `validate_configuration`, discovered by running it on a
  probe class whose answers are controlled (which message belongs to which method and which input gates it);
- per backend and capability: each check method's answers over its input domain, and `supports_combination`
  over a grid of the inputs it reads;
- `_get_backend_priorities` per capability, MLA flag, KV dtype and head count;
- the errors each backend's implementation constructor raises (the TRITON_ATTN fp8 < SM89 guard of #43914);
- vLLM's error templates, and a sample of real `get_attn_backend_cls` answers to test the replay against.
"""
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


def _params(fn) -> list[str]:
    return list(inspect.signature(fn).parameters)


def _loaded_args(fn) -> set[str]:
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


def discover_checks(ctx, AttentionBackend, DeviceCapability):
    """The checks of the base validate_configuration, in order: message, method, gates."""
    base = AttentionBackend.validate_configuration
    params = [p for p in _params(base) if p != "cls"]
    methods = sorted(n for n in dir(AttentionBackend)
                     if (n.startswith("supports_") or n.startswith("is_")) and n != "supports_combination"
                     and callable(getattr(AttentionBackend, n)))
    bool_inputs = [p for p in params if p.startswith(("use_", "has_"))]

    def probe(answers: dict, inputs: dict):
        attrs = {}
        for m in methods:
            value = answers.get(m, False)
            attrs[m] = classmethod(lambda cls, *a, _v=value, **k: _v)
        attrs["supports_combination"] = classmethod(lambda cls, *a, **k: answers.get("supports_combination"))
        for name in ("get_name", "get_impl_cls", "get_builder_cls", "get_kv_cache_shape"):
            attrs[name] = staticmethod(lambda *a, **k: None)
        cls = type("Probe", (AttentionBackend,), attrs)
        cls.__abstractmethods__ = frozenset()
        call = {"head_size": 128, "dtype": ctx.torch.float16, "kv_cache_dtype": "auto", "block_size": 16,
                "device_capability": DeviceCapability(9, 0), "attn_type": "decoder"}
        call.update({b: True for b in bool_inputs})
        call.update(inputs)
        return cls.validate_configuration(**{k: v for k, v in call.items() if k in params})

    everything = probe({}, {})
    checks = []
    for message in everything:
        entry = {"message": message, "method": None, "gates": [], "kind": "bool"}
        for m in methods:
            if message not in probe({m: True}, {}):
                entry["method"] = m
                break
        for b in bool_inputs:
            if message not in probe({}, {b: False}):
                entry["gates"].append(b)
        if entry["method"] in VALUE_METHODS:
            entry["kind"] = "value"
            entry["input"] = VALUE_METHODS[entry["method"]]
        if entry["method"] in EQUAL_METHODS:
            entry["kind"] = "equal"
            entry["input"] = EQUAL_METHODS[entry["method"]]
            entry["when_input"] = True
            entry["gates"] = [g for g in entry["gates"] if g != entry["input"]]
        checks.append(entry)
    # the reverse direction of the equality checks ("non-MLA not supported"): backend is_x True, input False
    rev_answers = {m: True for m in EQUAL_METHODS}
    rev_inputs = {i: False for i in EQUAL_METHODS.values()}
    reverse = probe(rev_answers, rev_inputs)
    for message in reverse:
        if message in everything:
            continue
        owner = next((m for m in EQUAL_METHODS if message not in probe({**rev_answers, m: False}, rev_inputs)),
                     None)
        if owner is None:
            continue
        position = next(n for n, c in enumerate(checks) if c["method"] == owner) + 1
        checks.insert(position, {"message": message, "method": owner, "gates": [], "kind": "equal",
                                 "input": EQUAL_METHODS[owner], "when_input": False})
    combo_seen = "COMBINATION" in probe({"supports_combination": "COMBINATION"}, {})
    attn_check = next((c for c in checks if c["method"] == "supports_attn_type"), None)
    if attn_check:  # an f-string with the attention type in it
        attn_check["message"] = attn_check["message"].replace("decoder", "{attn_type}")
    return {"order": checks, "combination_last": combo_seen, "inputs": params,
            "where": ctx.where(AttentionBackend.validate_configuration)}


def backend_enum(ctx):
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    return AttentionBackendEnum


def run(ctx) -> dict:
    import torch

    ctx.torch = torch
    from vllm.platforms.interface import DeviceCapability
    from vllm.v1.attention.backend import AttentionBackend
    import vllm.platforms.cuda as cuda_mod
    from vllm.config.cache import CacheDType
    import typing

    kv_values = list(typing.get_args(CacheDType))
    Enum = backend_enum(ctx)
    platform_cls = type(__import__("vllm.platforms", fromlist=["x"])._current_platform)
    dtypes = {n: getattr(torch, n) for n in DTYPES}
    from vllm.v1.attention.backend import AttentionType

    attn_types = [t.value for t in AttentionType]

    out = {"checks": discover_checks(ctx, AttentionBackend, DeviceCapability), "classes": {}, "per_capability": {},
           "priorities": {}, "enum": [m.name for m in Enum], "attn_types": attn_types,
           "kv_domain": kv_values, "block_domain": BLOCK_DOMAIN, "errors": {}}
    checks = out["checks"]["order"]
    methods = sorted({c["method"] for c in checks if c["method"]})

    # the CUDA backends: every one the priority lists name, plus the generic ones a user may force
    names = set()
    caps = [tuple(c) for c in ctx.REQ["capabilities"]]
    prio_fn = cuda_mod._get_backend_priorities
    prio_params = [p for p in _params(prio_fn)]
    prio_table, prio_lists = {}, []
    for cap in caps:
        set_capability(ctx, platform_cls, cap)
        non_causal = (False, True) if "use_non_causal" in prio_params else (False,)
        for use_mla, nc in itertools.product((False, True), non_causal):
            for kv in [None] + kv_values:
                for heads in (None, 1, 8, 16, 32, 64, 128):
                    kwargs = {"use_mla": use_mla, "device_capability": DeviceCapability(*cap)}
                    if "num_heads" in prio_params:
                        kwargs["num_heads"] = heads
                    if "kv_cache_dtype" in prio_params:
                        kwargs["kv_cache_dtype"] = kv
                    if nc:
                        kwargs["use_non_causal"] = True
                    try:
                        names_now = [b.name for b in prio_fn(**kwargs)]
                    except Exception as exc:
                        names_now = ["<error: %s>" % exc]
                    if names_now not in prio_lists:
                        prio_lists.append(names_now)
                    # the MLA field carries 'n' for non-causal layers: '0', '1', '0n', '1n'
                    mla_key = f"{int(use_mla)}{'n' if nc else ''}"
                    prio_table[f"{cap[0]}.{cap[1]}|{mla_key}|{kv}|{heads}"] = prio_lists.index(names_now)
                    names.update(n for n in names_now if not n.startswith("<"))
    out["priorities"] = {"lists": prio_lists, "table": _compress_prio(prio_table), "params": prio_params,
                         "where": ctx.where(prio_fn)}
    names |= {"FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION", "TURBOQUANT", "TRITON_MLA",
              "FLASHMLA", "CUTLASS_MLA", "FLASHINFER_MLA", "FLASH_ATTN_MLA", "FLASHMLA_SPARSE",
              "FLASHINFER_MLA_SPARSE", "FLASH_ATTN_DIFFKV", "TRITON_ATTN_DIFFKV"}
    names = sorted(n for n in names if n in out["enum"])

    classes = {}
    for name in names:
        try:
            cls = Enum[name].get_class()
            classes[name] = cls
            out["classes"][name] = {"path": f"{cls.__module__}.{cls.__qualname__}", "where": ctx.where(cls),
                                    "is_mla": bool(cls.is_mla()), "is_sparse": bool(getattr(cls, "is_sparse", lambda: False)())}
        except Exception as exc:
            out["classes"][name] = {"import_error": f"{type(exc).__name__}: {exc}"[:300]}

    for cap in caps:
        set_capability(ctx, platform_cls, cap)
        per = {}
        for name, cls in classes.items():
            try:
                with FreshVllmConfig():
                        per[name] = backend_answers(ctx, cls, cap, methods, kv_values, dtypes, attn_types,
                                                DeviceCapability, checks)
            except Exception:
                per[name] = {"error": traceback.format_exc()[-800:]}
        out["per_capability"][f"{cap[0]}.{cap[1]}"] = per

    out["query_quant"] = {}
    out["guards"] = constructor_guards(ctx, classes, caps, platform_cls, kv_values, dtypes, out["query_quant"])
    out["templates"] = templates(ctx, cuda_mod, Enum)
    out["samples"] = real_selections(ctx, caps, platform_cls, kv_values, Enum, DeviceCapability)
    out["selector_config"] = selector_config_fields()
    return out


def set_capability(ctx, platform_cls, cap):
    platform_cls.capability_now = tuple(cap)
    clear_caches()


def _call_bool(fn, *args):
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
            answers[m] = compress_ints([h for h in HEAD_DOMAIN if _call_bool(fn, h) is True], HEAD_DOMAIN)
        elif m == "supports_dtype":
            answers[m] = [n for n, d in dtypes.items() if _call_bool(fn, d) is True]
        elif m == "supports_kv_cache_dtype":
            answers[m] = [k for k in kv_values if _call_bool(fn, k) is True]
        elif m == "supports_block_size":
            answers[m] = [b for b in BLOCK_DOMAIN if _call_bool(fn, b) is True]
        elif m == "supports_attn_type":
            answers[m] = [t for t in attn_types if _call_bool(fn, t) is True]
        elif m == "supports_compute_capability":
            answers[m] = _call_bool(fn, DeviceCapability(*cap))
        else:
            answers[m] = _call_bool(fn)
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
    params = [p for p in _params(fn)]
    used = _loaded_args(fn)
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


def _compress_prio(table):
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
        params = _params(impl.__init__)
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
