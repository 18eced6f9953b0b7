"""compressed-tensors' per-layer scheme choice, replayed for one release from what the pack read of its code
(`ct_schemes` in kvdoctor/data/vllm_pack/quantization/<version>.json, built by
kvdoctor.builders.vllm_pack.quantization_schemes).

vLLM builds a scheme for every quantized layer (CompressedTensorsConfig._get_scheme_from_parts: its `_is_*` tests in
the release's order, some branches switching to a weight-only scheme by the GPU) and then refuses a scheme whose
get_min_capability() the GPU does not meet (`_check_scheme_supported`). The release gives the order, the classes,
their minimums and the message; the meaning of each `_is_*` test is written here from vLLM's own definitions
(CompressedTensorsConfig in compressed_tensors.py). A test this module does not know leaves the answer undecided.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

ACT_FORMATS = ("naive-quantized", "int-quantized", "float-quantized", "nvfp4-pack-quantized")
"""is_activation_quantization_format (compressed_tensors/utils.py): the formats whose activation branches apply."""
PACK = "pack-quantized"
FP4_CUTLASS = 100  # cutlass_fp4_supported(): SM 10.0 and newer
WEIGHT_ONLY = {  # a scheme a branch switches to on an older GPU -> what changes, in words
    "CompressedTensorsW8A16Fp8": "its FP8 weights run weight-only through Marlin (W8A16Fp8): activations stay 16-bit "
                                 "and no FP8 tensor-core matmul is used, so it is slower than on SM 8.9+; the "
                                 "weights still take 1 byte a parameter",
    "CompressedTensorsW4A16Fp4": "its NVFP4 weights run weight-only (W4A16Fp4): activations stay 16-bit and no FP4 "
                                 "tensor-core matmul is used (that needs SM 10.0), so it is slower; the weights "
                                 "still take 4 bits a parameter",
}  # fmt: skip


@dataclass(frozen=True)
class SchemeVerdict:
    """What one release does with a compressed-tensors checkpoint's layer schemes on one GPU."""

    schemes: tuple[str, ...]
    """The scheme classes vLLM builds (one per distinct config group), e.g. ('CompressedTensorsW8A16Fp8',)."""
    error: str | None
    """vLLM's `_check_scheme_supported` message when a scheme refuses the GPU; None when none does."""
    min_capability: int | None
    """The refusing (or, when none refuses, the highest) scheme minimum."""
    fallbacks: tuple[str, ...]
    """What changes where a branch switched to a weight-only scheme on this GPU."""
    undecided: str | None
    where: str


def _on(args: Any) -> bool:
    return isinstance(args, dict)


def _is(args: Any, *, type_: str | None = None, bits: int | None = None, strategies: tuple[str, ...] = (),
        group: int | None = None) -> bool:  # fmt: skip
    return _on(args) and (type_ is None or args.get("type") == type_) and (bits is None or args.get("num_bits") == bits) \
        and (not strategies or args.get("strategy") in strategies) and (group is None or args.get("group_size") == group)


def _nvfp4(a: Any) -> bool:
    return _is(a, type_="float", bits=4, strategies=("tensor_group",), group=16) and bool(a.get("symmetric"))


def _mxfp4(a: Any) -> bool:
    return _is(a, type_="float", bits=4, strategies=("group",), group=32) and bool(a.get("symmetric"))


def _static(a: Any) -> bool:
    return _on(a) and not a.get("dynamic")


def _fp8_w8a8(w: Any, a: Any) -> bool:
    if not (_is(w, type_="float") and _is(a, type_="float") and w.get("symmetric") and _static(w)
            and w.get("strategy") in ("tensor", "channel", "block")):  # fmt: skip
        return False
    return bool(a.get("dynamic")) or (bool(a.get("symmetric")) and a.get("strategy") == "tensor")


def _w8a8_int(w: Any, a: Any, strategy: str, dynamic: bool) -> bool:
    return _is(w, bits=8, strategies=("tensor", "channel")) and _is(a, bits=8, strategies=(strategy,)) and \
        bool(w.get("symmetric")) and _static(w) and bool(a.get("dynamic")) == dynamic


Test = Callable[[Any, Any, Any, str | None, int], bool]
TESTS: dict[str, Test] = {  # vLLM's `_is_*` tests: (weights, input activations, output activations, format, SM)
    "_is_nvfp4_format": lambda w, a, o, f, c: _nvfp4(w),
    "_is_fp4a16_nvfp4": lambda w, a, o, f, c: _nvfp4(w) and a is None,
    "_is_fp4a4_nvfp4": lambda w, a, o, f, c: _nvfp4(w) and _nvfp4(a),
    "_is_mxfp4_w4a8_fp8": lambda w, a, o, f, c: _mxfp4(w) and _is(a, type_="float", bits=8, strategies=("token", "group"))
    and _static(w) and bool(a.get("dynamic")) and bool(a.get("symmetric")),
    "_is_mxfp4": lambda w, a, o, f, c: _mxfp4(w),
    "_is_mxfp8": lambda w, a, o, f, c: _is(w, type_="float", bits=8, strategies=("group",), group=32)
    and bool(w.get("symmetric")) and w.get("scale_dtype") in ("torch.uint8", "uint8"),
    "_is_fp8_w4a8_sm90": lambda w, a, o, f, c: c == 90 and _is(w, type_="int", bits=4, strategies=("group",))
    and _is(a, type_="float", bits=8, strategies=("token",)) and _static(w) and bool(a.get("dynamic")),
    "_is_wNa8o8_int": lambda w, a, o, f, c: f in (PACK, "int-quantized") and o is not None
    and _is(w, type_="int", strategies=("channel", "group")) and _static(w),
    "_is_wNaM_int": lambda w, a, o, f, c: a is not None and f == PACK and _is(w, type_="int", strategies=("channel", "group"))
    and _static(w) and _is(a, type_="int", strategies=("token", "group")) and bool(a.get("symmetric"))
    and bool(a.get("dynamic")),
    "_is_wNa16_group_channel": lambda w, a, o, f, c: _is(w, strategies=("channel", "group")) and a is None and _static(w),
    "_is_fp8_w8a8": lambda w, a, o, f, c: _fp8_w8a8(w, a),
    "_is_fp8_w8a8_sm90": lambda w, a, o, f, c: c == 90 and _fp8_w8a8(w, a),
    "_is_fp8_w8a8_sm100": lambda w, a, o, f, c: c == 100 and _fp8_w8a8(w, a),
    "_is_fp8_w4a8": lambda w, a, o, f, c: _is(w, type_="int", bits=4, strategies=("group",))
    and _is(a, type_="float", bits=8, strategies=("token",)) and _static(w) and bool(a.get("dynamic")),
    "_is_fp8_w8a16": lambda w, a, o, f, c: _is(w, type_="float") and bool(w.get("symmetric")) and _static(w)
    and w.get("strategy") in ("tensor", "channel", "block"),
    "_is_static_tensor_w8a8": lambda w, a, o, f, c: _w8a8_int(w, a, "tensor", False),
    "_is_dynamic_token_w8a8": lambda w, a, o, f, c: _w8a8_int(w, a, "token", True),
    "_is_dynamic_token_w4a8_int": lambda w, a, o, f, c: _is(w, type_="int", bits=4, strategies=("group", "channel"))
    and _is(a, type_="int", bits=8, strategies=("token",)) and _static(w) and bool(a.get("dynamic")),
}  # fmt: skip
CONDITIONS: dict[str, Callable[[Any, Any, str | None], bool]] = {  # other comparisons a branch's test makes
    "input_quant is None": lambda w, a, f: a is None,
    "input_quant.num_bits == 8": lambda w, a, f: _on(a) and a.get("num_bits") == 8,
    "input_quant.num_bits == 4": lambda w, a, f: _on(a) and a.get("num_bits") == 4,
    "format == CompressionFormat.pack_quantized.value": lambda w, a, f: f == PACK,
    "weight_quant.num_bits in WNA16_SUPPORTED_BITS": lambda w, a, f: _on(w) and w.get("num_bits") in (4, 8),
}
BODY_FORMATS = {"format == CompressionFormat.marlin_24.value": "marlin-24",
                "format == CompressionFormat.pack_quantized.value": PACK,  # a branch choosing its class by format
                # 0.7.3-0.9.2 compare the config's own format (no `format` parameter yet)
                "self.quant_format == CompressionFormat.marlin_24.value": "marlin-24",
                "self.quant_format == CompressionFormat.pack_quantized.value": PACK}


def config_groups(quant_config: dict) -> list[tuple[Any, Any, Any, str | None]]:
    """(weights, input_activations, output_activations, format) of each config group, the group's format or the
    checkpoint's."""
    groups = quant_config.get("config_groups")
    fmt = quant_config.get("format")
    if not isinstance(groups, dict):
        return []
    return [(g.get("weights"), g.get("input_activations"), g.get("output_activations"), g.get("format") or fmt)
            for g in groups.values() if isinstance(g, dict) and g.get("weights") is not None]  # fmt: skip


def _choose(schemes: dict, w: Any, a: Any, o: Any, fmt: str | None, capability: int) -> tuple[str | None, str | None,
                                                                                                  str | None]:
    """(scheme class, fallback class it switched to or None, why undecided or None) for one group."""
    for branch in schemes["branches"]:
        unknown = [t for t in branch["tests"] if t not in TESTS]
        if unknown:
            return None, None, f"its test {unknown[0]} (line {branch['line']}) is not replayed by kvdoctor"
        if branch.get("within") and "act" in branch["within"] and fmt not in ACT_FORMATS:
            continue
        combine = any if branch.get("any") else all
        if not combine(TESTS[t](w, a, o, fmt, capability) for t in dict.fromkeys(branch["tests"])):
            continue
        conditions = branch["conditions"]
        if any(c not in CONDITIONS for c in conditions):
            return None, None, f"a condition of the branch at line {branch['line']} is not replayed by kvdoctor"
        if not all(CONDITIONS[c](w, a, fmt) for c in conditions):
            continue
        classes = branch["classes"]
        if branch["body_formats"]:  # the branch picks a class by the checkpoint's format (marlin-24 / pack)
            wanted = [BODY_FORMATS.get(b) for b in branch["body_formats"]]
            if fmt not in wanted:
                continue
            return classes[wanted.index(fmt)] if len(classes) == len(wanted) else classes[-1], None, None
        if branch["switch"] == "scheme_min_capability" and len(classes) == 2:
            minimum = schemes["classes"][classes[0]]["min_capability"]
            if minimum is None:
                return None, None, f"{classes[0]}'s minimum capability is not a constant"
            return (classes[0], None, None) if capability >= minimum else (classes[1], classes[1], None)
        if branch["switch"] == "fp4_cutlass" and len(classes) == 2:
            return (classes[0], None, None) if capability >= FP4_CUTLASS else (classes[1], classes[1], None)
        return classes[0], None, None
    return None, None, "no branch of _get_scheme_from_parts matches this config group in kvdoctor's replay"


def judge_schemes(schemes: dict | None, quant_config: dict, capability: int | None) -> SchemeVerdict | None:
    """The release's scheme choice and capability check for every config group; None when the release's
    compressed-tensors code was not read or the checkpoint declares no config groups."""
    groups = config_groups(quant_config)
    if not schemes or not groups:
        return None
    where = schemes["select_where"]
    if capability is None:
        return SchemeVerdict((), None, None, (), "the GPU's compute capability is unknown", where)
    chosen, fallbacks, highest = [], [], None
    for w, a, o, fmt in groups:
        scheme, fallback, undecided = _choose(schemes, w, a, o, fmt, capability)
        if undecided:
            return SchemeVerdict(tuple(chosen), None, None, (), f"compressed-tensors {undecided}", where)
        chosen.append(scheme)
        if fallback:
            fallbacks.append(f"{fallback}: {WEIGHT_ONLY.get(fallback, 'a weight-only scheme')}")
        entry = schemes["classes"].get(scheme) or {}
        minimum = entry.get("min_capability")
        if minimum is None:
            return SchemeVerdict(tuple(chosen), None, None, (), f"{scheme}'s minimum capability is not a constant",
                                 entry.get("where") or where)  # fmt: skip
        if capability < minimum:
            message = schemes["message"]["template"].format(minimum, capability) if schemes.get("message") else None
            if message is None:
                return SchemeVerdict(tuple(chosen), None, minimum, (), "vLLM refuses the scheme but its message was "
                                     "not read", entry["where"])  # fmt: skip
            return SchemeVerdict(tuple(chosen), message, minimum, tuple(fallbacks), None, entry["where"])
        highest = max(highest or 0, minimum)
    return SchemeVerdict(tuple(dict.fromkeys(chosen)), None, highest, tuple(dict.fromkeys(fallbacks)), None, where)


def kv_cache_scheme(quant_config: dict) -> str | None:
    """The KV-cache quantization a checkpoint carries scales for: compressed-tensors' kv_cache_scheme as
    'float8 tensor' style words, ModelOpt's kv_cache_quant_algo; None when none."""
    scheme = quant_config.get("kv_cache_scheme")
    if isinstance(scheme, dict):
        return f"{scheme.get('type')}{scheme.get('num_bits')} per {scheme.get('strategy')} (compressed-tensors)"
    section = quant_config.get("quantization") if isinstance(quant_config.get("quantization"), dict) else quant_config
    algo = section.get("kv_cache_quant_algo")
    return f"{algo} (ModelOpt)" if isinstance(algo, str) and algo else None


@dataclass(frozen=True)
class MoeVerdict:
    """What one release's CompressedTensorsMoEMethod.get_moe_method picks for a MoE model's experts."""

    method: str | None
    """The experts' method class, e.g. 'CompressedTensorsW8A8Fp8MoEMethod'; None when refused or undecided."""
    candidates: tuple[str, ...]
    """Every class the matching branch may build (it picks among them by kernel support: WNA16 or its Marlin)."""
    error: str | None
    """vLLM's "Unsupported FusedMoe scheme: ..." when no branch takes the experts' scheme (its QuantizationArgs
    written here as kvdoctor's summary of them); None otherwise."""
    undecided: str | None = None
    where: str = ""


def judge_moe(schemes: dict | None, quant_config: dict, capability: int | None) -> MoeVerdict | None:
    """The experts' method for the first config group (vLLM targets the experts with the group that targets Linear);
    None when the release's MoE selection was not read or the checkpoint declares no groups."""
    moe = (schemes or {}).get("moe")
    groups = config_groups(quant_config)
    if not moe or not groups:
        return None
    if capability is None:
        return MoeVerdict(None, (), None, "the GPU's compute capability is unknown", moe["select_where"])
    w, a, o, fmt = groups[0]
    for branch in moe["branches"]:
        unknown = [t for t in branch["tests"] if t not in TESTS]
        if unknown:
            return MoeVerdict(None, (), None, f"compressed-tensors MoE test {unknown[0]} is not replayed by kvdoctor",
                              moe["select_where"])  # fmt: skip
        combine = any if branch.get("any") else all
        if combine(TESTS[t](w, a, o, fmt, capability) for t in dict.fromkeys(branch["tests"])):
            return MoeVerdict(branch["classes"][0], tuple(branch["classes"]), None, None, moe["select_where"])
    if not moe.get("message"):
        return MoeVerdict(None, (), None, "vLLM refuses the experts' scheme but its message was not read",
                          moe["select_where"])  # fmt: skip
    message = moe["message"]["template"].format(_args(w), _args(a))
    return MoeVerdict(None, (), message, None, moe["message"]["where"])


def _args(args: Any) -> str:
    if not _on(args):
        return "None"
    keys = ("num_bits", "type", "strategy", "group_size", "symmetric", "dynamic")
    return " ".join(f"{k}={args.get(k)}" for k in keys)