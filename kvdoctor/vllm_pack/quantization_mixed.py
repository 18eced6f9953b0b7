"""ModelOpt MIXED_PRECISION checkpoints judged per layer, as each release's ModelOptMixedPrecisionConfig builds them
(its get_quant_method's branches, read by kvdoctor.builders.vllm_pack.quantization_mixed; issue 25).

The checkpoint names a `quant_algo` per module in `quantized_layers` (config.json's quantization_config, or the
`quantization` section of hf_quant_config.json). vLLM upper-cases it and, for a linear layer (LinearBase, and
ParallelLMHead where the release lists it) or the experts (FusedMoE / RoutedExperts), builds the method of the branch
that names it; an algo no branch names gets UnquantizedLinearMethod (linear) or None (the experts, then built
unquantized): the layer's weights are made in the model dtype while the checkpoint stores them quantized.
What is judged here is that dispatch; the kernels the built methods then pick per GPU are judged where the pack asked
them (quantization_moe.py: NVFP4 experts and NVFP4 linear layers).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from kvdoctor.vllm_pack.quantization import ReleaseQuantization


@dataclass(frozen=True)
class MixedVerdict:
    """What one release builds for a MIXED_PRECISION checkpoint's quantized layers."""

    version: str
    built: tuple[str, ...]
    """'NVFP4 experts x40 -> ModelOptNvFp4FusedMoE (modelopt.py:2540)', one per (algo, part)."""
    unbuilt: tuple[str, ...]
    """The (algo, part) pairs no branch of this release names, with what it builds instead and where."""
    where: str
    """get_quant_method's file:line in this release."""


def quantized_layers(quant_config: dict) -> dict[str, str]:
    """module -> upper-cased quant_algo, from quantization_config['quantized_layers'] or hf_quant_config.json's
    quantization section (vLLM reads the latter when the former has none: ModelOptMixedPrecisionConfig._from_config)."""
    section = quant_config.get("quantization")
    layers = section.get("quantized_layers") if isinstance(section, dict) else None
    layers = layers if isinstance(layers, dict) and layers else quant_config.get("quantized_layers")
    if not isinstance(layers, dict):
        return {}
    return {str(name): str(info.get("quant_algo", "")).upper() for name, info in layers.items()
            if isinstance(info, dict)}  # fmt: skip


def layer_part(module: str) -> str:
    """'experts' for a routed-experts module (a path segment `experts`: '...mlp.experts' or '...experts.3.up_proj';
    shared_expert(s) is a linear layer), 'lm_head', else 'linear'."""
    segments = module.split(".")
    if "experts" in segments:
        return "experts"
    return "lm_head" if segments[-1] == "lm_head" else "linear"


def judge_mixed(release: ReleaseQuantization, quant_config: dict, is_moe: bool) -> MixedVerdict | None:
    """The release's per-layer dispatch for this checkpoint, or None where the release has no
    ModelOptMixedPrecisionConfig (read) or the checkpoint names no quantized layers."""
    facts = release.modelopt_mixed
    layers = quantized_layers(quant_config)
    if not facts or not layers:
        return None
    counts = Counter((algo, layer_part(name)) for name, algo in layers.items()
                     if is_moe or layer_part(name) != "experts")  # fmt: skip
    both = facts.get("both") or {}
    built, unbuilt = [], []
    short = lambda where: (where or "?").removeprefix("vllm/model_executor/layers/quantization/")  # noqa: E731
    for (algo, part), count in sorted(counts.items()):
        label = f"{algo} {'experts' if part == 'experts' else 'lm_head' if part == 'lm_head' else 'linear'} x{count}"
        if algo in (both.get("algos") or ()):
            built.append(f"{label} -> ModelOptBlockQuant* ({short(both.get('where'))})")
            continue
        block = facts.get("moe" if part == "experts" else "linear") or {}
        if part == "lm_head" and "ParallelLMHead" not in (block.get("types") or ()):
            # this release's linear branch takes LinearBase only: the head reaches get_quant_method's final return
            unbuilt.append(f"{label}: get_quant_method has no ParallelLMHead branch "
                           f"({short(facts.get('get_quant_method'))}), the head is built unquantized")
            continue
        entry = (block.get("built") or {}).get(algo)
        if entry:
            built.append(f"{label} -> {entry['method']} ({short(entry['where'])})")
            continue
        otherwise = block.get("otherwise") or {}
        instead = "UnquantizedLinearMethod" if otherwise.get("method") == "UnquantizedLinearMethod" else \
            f"{otherwise.get('method') or '?'} (the layer is built unquantized)"
        unbuilt.append(f"{label}: no branch names {algo}; get_quant_method returns {instead} "
                       f"({short(otherwise.get('where') or block.get('at') or facts.get('get_quant_method'))})")
    return MixedVerdict(release.version, tuple(built), tuple(unbuilt), short(facts.get("get_quant_method")))


def expert_algos(quant_config: dict) -> set[str]:
    """The quant_algo values of the checkpoint's routed-experts entries."""
    return {algo for name, algo in quantized_layers(quant_config).items() if layer_part(name) == "experts"}


def linear_algos(quant_config: dict) -> set[str]:
    """The quant_algo values of the checkpoint's linear entries (lm_head included)."""
    return {algo for name, algo in quantized_layers(quant_config).items() if layer_part(name) != "experts"}
