"""Child task `module:guards`: only the constructor guards (query-quantization answers, layer-feature guards) of the backends named
in the request (REQ `guard_classes`), as `module:backends` computes them; the builder's `--refresh guards` splices them into the
shipped detail files without re-asking everything else."""
from __future__ import annotations

from kvdoctor.builders.vllm_pack.child_backend_probes import DTYPES, constructor_guards
from kvdoctor.builders.vllm_pack.child_backends import backend_enum
from kvdoctor.builders.vllm_pack.child_layer_probes import layer_guards


def run(ctx) -> dict:
    import torch
    import typing

    import vllm.platforms
    from vllm.config.cache import CacheDType

    Enum = backend_enum(ctx)
    classes = {}
    for name in ctx.REQ["guard_classes"]:
        try:
            classes[name] = Enum[name].get_class()
        except Exception:
            continue
    platform_cls = type(vllm.platforms._current_platform)
    caps = [tuple(c) for c in ctx.REQ["capabilities"]]
    kv_values = list(typing.get_args(CacheDType))
    query_quant: dict = {}
    guards = constructor_guards(ctx, classes, caps, platform_cls, kv_values, {n: getattr(torch, n) for n in DTYPES},
                                query_quant)  # fmt: skip
    layers = layer_guards(ctx, classes, caps, platform_cls, kv_values)
    return {"guards": guards, "query_quant": query_quant, "layer_guards": layers}
