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

import itertools
import traceback

from kvdoctor.builders.vllm_pack.child_backend_probes import (
    BLOCK_DOMAIN,
    DTYPES,
    EQUAL_METHODS,
    VALUE_METHODS,
    backend_answers,
    compress_priorities,
    constructor_guards,
    params_of,
    real_selections,
    selector_config_fields,
    set_capability,
    templates,
)
from kvdoctor.builders.vllm_pack.child_layer_probes import layer_guards
from kvdoctor.builders.vllm_pack.child_shared import FreshVllmConfig


def discover_checks(ctx, AttentionBackend, DeviceCapability):
    """The checks of the base validate_configuration, in order: message, method, gates."""
    base = AttentionBackend.validate_configuration
    params = [p for p in params_of(base) if p != "cls"]
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
    prio_params = [p for p in params_of(prio_fn)]
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
    out["priorities"] = {"lists": prio_lists, "table": compress_priorities(prio_table), "params": prio_params,
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
    out["layer_guards"] = layer_guards(ctx, classes, caps, platform_cls, kv_values)
    return out
