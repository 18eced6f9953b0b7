"""Child task `module:backend_grid`: vLLM's own `get_attn_backend_cls` answers over a grid of inputs (0.10-0.19).

Releases before 0.20.0 select backends differently (0.10: if/else over use_v1, MLA, KV dtype, block size; 0.11-0.13:
other module paths and call signatures), so the pack does not replay their checks: it stores what the release's
own CUDA platform answers for every cell of a grid (capability x forced backend x MLA x sparse x head size x
model dtype x KV dtype x block size x sinks x head count), as an exact decision tree. kvdoctor looks a cell up;
an input outside the grid is undecided, never guessed.
"""
from __future__ import annotations

import inspect
import itertools
import os

from kvdoctor.builders.vllm_pack import child_engine
from kvdoctor.builders.vllm_pack.child_backend_probes import constructor_guards
from kvdoctor.builders.vllm_pack.child_layer_probes import layer_guards
from kvdoctor.builders.vllm_pack.child_shared import (
    FreshVllmConfig,
    clear_caches,
    decision_tree,
    kv_cache_values,
    set_env,
)

HEADS = (64, 80, 96, 128, 192, 256, 72, 100)
MLA_HEAD = 576
BLOCKS = (None, 16, 32, 64, 128)
DTYPES = ("bfloat16", "float16", "float32")
NUM_HEADS = (None, 8, 16, 32, 64, 128)
# forced backends a user may name on CUDA (those the release's enum has)
FORCED = ("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "TRITON_ATTN_VLLM_V1", "FLEX_ATTENTION", "XFORMERS",
          "XFORMERS_VLLM_V1", "TREE_ATTN", "TRITON_MLA", "TRITON_MLA_VLLM_V1", "FLASHMLA", "FLASHMLA_VLLM_V1",
          "CUTLASS_MLA", "FLASHINFER_MLA", "FLASH_ATTN_MLA", "FLASHMLA_SPARSE", "FLASHINFER_MLA_SPARSE",
          "FLASH_ATTN_VLLM_V1", "FLASHINFER_VLLM_V1", "TORCH_SDPA")


def _enum():
    for module, name in (("vllm.v1.attention.backends.registry", "AttentionBackendEnum"),
                         ("vllm.attention.backends.registry", "AttentionBackendEnum"),
                         ("vllm.platforms.interface", "_Backend")):
        try:
            mod = __import__(module, fromlist=[name])
            return getattr(mod, name), module
        except (ImportError, AttributeError):
            continue
    raise ImportError("no attention backend enum found")


def _selector_config():
    for module in ("vllm.v1.attention.selector", "vllm.attention.selector"):
        try:
            mod = __import__(module, fromlist=["AttentionSelectorConfig"])
            return mod.AttentionSelectorConfig
        except (ImportError, AttributeError):
            continue
    return None


def run(ctx) -> dict:
    import torch
    import vllm.platforms as platforms

    os.environ.pop("VLLM_ATTENTION_BACKEND", None)
    set_env("VLLM_USE_V1", "1")  # 0.10: the V1 engine is the default on CUDA (V0 is gone from 0.11.0)
    Enum, enum_module = _enum()
    Config = _selector_config()
    platform = platforms._current_platform
    platform_cls = type(platform)
    fn = platform_cls.get_attn_backend_cls
    params = [p for p in inspect.signature(fn).parameters if p != "cls"]
    config_fields = list(Config._fields) if Config is not None and "attn_selector_config" in params else []
    inputs = set(params) | set(config_fields)
    forced = [None] + [f for f in FORCED if f in Enum.__members__]
    kv_values = kv_cache_values()
    axes = {"forced": forced, "use_mla": [False, True], "use_sparse": [False, True] if "use_sparse" in inputs
            else [False], "head_size": list(HEADS) + [MLA_HEAD], "dtype": list(DTYPES), "kv_cache_dtype": kv_values,
            "block_size": list(BLOCKS), "has_sink": [False, True] if "has_sink" in inputs else [False],
            "num_heads": list(NUM_HEADS) if "num_heads" in inputs else [None]}
    paths = {}
    for member in Enum:
        try:
            value = member.get_path() if hasattr(member, "get_path") else member.value
        except Exception:
            value = member.value
        paths[str(value)] = member.name
    caps = [tuple(c) for c in ctx.REQ["capabilities"]]
    ask = _Asker(fn, params, Config, config_fields, Enum, torch, paths, use_v1=True)
    out = _grid(ctx, ask, axes, caps, platform_cls, kv_values)
    # the V1 backends' constructors with the layer features real models have (V0's are not probed: undecided there)
    layers = _layer_guards(ctx, out["answers"], Enum, paths, caps, platform_cls, kv_values)
    if layers is not None:
        out["layer_guards"] = layers
    engine = None
    if "use_v1" in params and os.path.exists(os.path.join(ctx.SRC, "vllm", "attention", "backends", "xformers.py")):
        set_env("VLLM_USE_V1", "0")  # the release still has V0 (0.7-0.10): its selector, asked the same way
        v0 = _grid(ctx, _Asker(fn, params, Config, config_fields, Enum, torch, paths, use_v1=False), axes, caps,
                   platform_cls, kv_values)
        engine = child_engine.run(ctx)  # which engine starts, per configuration (pops VLLM_USE_V1: asked last)
        out["v0"] = {**v0, "assumes": "the V0 engine (VLLM_USE_V1=0, as its oracle or default picks it), no other "
                     "attention environment variable set; the block size as vLLM passes it to the selector"}
    unknown = None
    try:
        Enum["NO_SUCH_BACKEND"]
    except Exception as exc:
        unknown = str(exc).replace("NO_SUCH_BACKEND", "{name}")
    return {
        **out,
        "params": params,
        "config_fields": config_fields,
        "enum": [m.name for m in Enum],
        "enum_module": enum_module,
        "unknown_backend": unknown,
        "where": ctx.where(fn),
        "repr_template": repr(Config(**{f: f"{{{f}}}" for f in config_fields if f != "attn_type"}))
        if config_fields else None,
        "assumes": "VLLM_USE_V1=1 (0.10's default on CUDA), no other attention environment variable set; "
                   "the block size as vLLM passes it to the selector",
        **({"engine": engine} if engine is not None else {}),
    }


def _grid(ctx, ask, axes: dict, caps: list, platform_cls, kv_values: list) -> dict:
    """One engine's selector over the grid: axes, answers, their decision trees, the chosen backends'
    constructor guards and 40 samples per capability asked afresh."""
    import torch

    names = list(axes)
    answers: list[str] = []
    cells: dict[int, list] = {}
    for cap in caps:
        platform_cls.capability_now = tuple(cap)
        clear_caches()
        with FreshVllmConfig():  # one default VllmConfig per capability, not one per cell (the cost)
            cap_answers = [(combo, ask(dict(zip(names, combo)), fresh_config=False))
                           for combo in itertools.product(*(axes[a] for a in names))
                           if _meaningful(dict(zip(names, combo)))]
        for combo, answer in cap_answers:
            if answer not in answers:
                answers.append(answer)
            cells.setdefault(answers.index(answer), []).append([f"{cap[0]}.{cap[1]}"] + list(combo))
    guards = _guards(ctx, answers, ask.Enum, ask.paths, caps, platform_cls, kv_values, torch)
    samples = _samples(ask, axes, names, caps, platform_cls)
    return {
        "axes": ["capability"] + names,
        "grid": {"capability": [f"{c[0]}.{c[1]}" for c in caps], **axes},
        "answers": answers,
        "trees": {str(i): decision_tree(sorted(c, key=repr)) for i, c in sorted(cells.items())},
        "samples": samples,
        "guards": guards,
    }


def _meaningful(cell: dict) -> bool:
    """MLA layers have head size 576 (kv_lora_rank 512 + rope 64); sparse is MLA only."""
    return cell["use_mla"] == (cell["head_size"] == MLA_HEAD) and not (cell["use_sparse"] and not cell["use_mla"])


class _Asker:
    """vLLM's answer for one grid cell, from one engine's side of the selector (`use_v1`)."""

    def __init__(self, fn, params, Config, config_fields, Enum, torch, paths, use_v1: bool):
        self.fn, self.params, self.Config, self.config_fields = fn, params, Config, config_fields
        self.Enum, self.torch, self.paths, self.use_v1 = Enum, torch, paths, use_v1

    def __call__(self, cell: dict, fresh_config: bool = True) -> str:
        """fresh_config: under a VllmConfig of its own (the samples: asked afresh)."""
        return _ask(self.fn, self.params, self.Config, self.config_fields, self.Enum, cell, self.torch, self.paths,
                    fresh_config, self.use_v1)


def _ask(fn, params, Config, config_fields, Enum, cell, torch, paths, fresh_config: bool = True,
         use_v1: bool = True) -> str:
    """vLLM's answer for one cell; fresh_config: under a VllmConfig of its own (the samples: asked afresh)."""
    kwargs = {"head_size": cell["head_size"], "dtype": getattr(torch, cell["dtype"]),
              "kv_cache_dtype": cell["kv_cache_dtype"], "block_size": cell["block_size"], "use_mla": cell["use_mla"],
              "has_sink": cell["has_sink"], "use_sparse": cell["use_sparse"], "use_v1": use_v1}
    selected = Enum[cell["forced"]] if cell["forced"] else None
    call = {}
    shown = {}
    if config_fields:
        config = Config(**{k: v for k, v in kwargs.items() if k in config_fields})
        call["attn_selector_config"] = config
        # vLLM prints the config, some releases after dropping the block size: kvdoctor fills it in again
        shown = {repr(config): "{config}", repr(config._replace(block_size=None)): "{config_no_block}"}
    for p in params:
        if p == "selected_backend":
            call[p] = selected
        elif p == "num_heads":
            call[p] = cell["num_heads"]
        elif p in kwargs and p not in call:
            call[p] = kwargs[p]
    try:
        if fresh_config:
            with FreshVllmConfig():
                path = fn(**call)
        else:
            path = fn(**call)
    except Exception as exc:
        text = f"{type(exc).__name__}: {exc}"
        for printed, placeholder in shown.items():
            text = text.replace(printed, placeholder)
        return "error:" + text[:600]
    if not path:
        return "none"
    if str(path) not in paths:  # 0.10: a class path, not an enum value; the class names itself
        try:
            module, _, name = str(path).rpartition(".")
            paths[str(path)] = getattr(__import__(module, fromlist=[name]), name).get_name()
        except Exception:
            paths[str(path)] = str(path)
    return "backend:" + paths[str(path)]


def _samples(ask, axes, names, caps, platform_cls):
    """vLLM's answers for 40 random grid cells per capability, asked afresh: the lookup's test oracle."""
    import random

    rng = random.Random(1234)
    out = []
    for cap in caps:
        platform_cls.capability_now = tuple(cap)
        clear_caches()
        for _ in range(40):
            cell = {a: rng.choice(axes[a]) for a in names}
            cell["use_mla"] = rng.random() < 0.3
            cell["head_size"] = MLA_HEAD if cell["use_mla"] else rng.choice(HEADS)
            cell["use_sparse"] = cell["use_sparse"] and cell["use_mla"]
            out.append({"capability": list(cap), "cell": cell,
                        "answer": ask(cell)})
    return out


def _guards(ctx, answers, Enum, paths, caps, platform_cls, kv_values, torch):
    """Errors the chosen backends' implementation constructors raise (as for 0.20+: child_backends)."""
    classes = _chosen_classes(answers, Enum, paths)
    dtypes = {n: getattr(torch, n) for n in DTYPES}
    try:
        return constructor_guards(ctx, classes, caps, platform_cls, kv_values, dtypes)
    except Exception as exc:
        return {"<error>": f"{type(exc).__name__}: {exc}"[:300]}


def _layer_guards(ctx, answers, Enum, paths, caps, platform_cls, kv_values):
    """What the chosen backends' constructors say about the layer features real models have (as for 0.20+:
    child_layer_probes), or None when the release's V1 layers cannot be probed (then nothing passes on them)."""
    try:
        return layer_guards(ctx, _chosen_classes(answers, Enum, paths), caps, platform_cls, kv_values)
    except Exception:
        return None


def _chosen_classes(answers, Enum, paths) -> dict:
    """The backend classes the grid's answers name, by name."""
    by_name = {name: path for path, name in paths.items()}
    classes = {}
    for answer in answers:
        if not answer.startswith("backend:"):
            continue
        name = answer.split(":", 1)[1]
        try:
            if name in Enum.__members__ and hasattr(Enum[name], "get_class"):
                classes[name] = Enum[name].get_class()
            else:
                module, _, attr = by_name.get(name, "").rpartition(".")
                classes[name] = getattr(__import__(module, fromlist=[attr]), attr)
        except Exception:
            continue
    return classes
