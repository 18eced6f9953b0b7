"""The attention-layer features a model's config.json gives vLLM's `Attention`: a logits soft cap and ALiBi slopes.

Read as vLLM's own model code reads them (the model files of the 0.10.2-0.34.0 wheels), so the layer-guard
lookups (the pack's `layer_guards`) see the layer vLLM would construct. Only JSON is read.
"""

from __future__ import annotations

from typing import Any

SOFT_CAP_KEY = "attn_logit_softcapping"
"""Read by gemma2.py (`config.attn_logit_softcapping`), gemma4*.py, grok1.py (0.10.2-0.23.0) and the Transformers
backend (transformers/base.py: `getattr(text_config, "attn_logit_softcapping", None)`), then passed to Attention as
`logits_soft_cap`."""

SOFT_CAP_IGNORED = frozenset({"gemma3", "gemma3_text", "rnj1", "muse_glimmer"})
"""Model types whose vLLM model passes `attn_logits_soft_cap=None` whatever config.json says (gemma3.py, rnj1.py,
muse_glimmer.py)."""

SOFT_CAP_DEFAULTS = {"Grok1ModelForCausalLM": 30.0, "Grok1ForCausalLM": 30.0}
"""grok1.py: `max(getattr(config, "attn_logit_softcapping", 30.0), 0.0)`: a soft cap even when config.json has none."""

ALIBI_ALWAYS_ARCHITECTURES = frozenset({"BloomForCausalLM", "Step1ForCausalLM"})
"""bloom.py and step1.py build ALiBi slopes for every layer, whatever the config says."""


def logits_soft_cap(raw: dict[str, Any], text: dict[str, Any], model_type: str | None,
                    architectures: tuple[str, ...]) -> float | None:
    """The soft cap vLLM's model code passes to its attention layers; None when it passes none."""
    scope = text or raw
    scope_type = scope.get("model_type") if isinstance(scope.get("model_type"), str) else model_type
    if scope_type in SOFT_CAP_IGNORED or model_type in SOFT_CAP_IGNORED:
        return None
    value = scope.get(SOFT_CAP_KEY, raw.get(SOFT_CAP_KEY))
    if value is None:
        value = next((SOFT_CAP_DEFAULTS[a] for a in architectures if a in SOFT_CAP_DEFAULTS), None)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None  # grok1.py clamps with max(..., 0.0); 0 or a negative cap means none to the backends
    return float(value)


def uses_alibi(raw: dict[str, Any], model_type: str | None, architectures: tuple[str, ...]) -> bool:
    """Whether vLLM's model code gives the attention layers ALiBi slopes (and no rotary positions)."""
    if any(a in ALIBI_ALWAYS_ARCHITECTURES for a in architectures) or model_type == "bloom":
        return True
    if model_type in ("falcon", "RefinedWeb", "RefinedWebModel") or "FalconForCausalLM" in architectures \
            or "RWForCausalLM" in architectures:
        return raw.get("alibi") is True  # falcon.py: self.use_alibi = config.alibi (FalconConfig defaults False)
    if model_type == "mpt":  # mpt.py (to 0.28.0) asserts config.attn_config.alibi and builds slopes
        attn = raw.get("attn_config")
        return isinstance(attn, dict) and attn.get("alibi") is True
    if "BaichuanForCausalLM" in architectures:
        # baichuan.py (to 0.24.0): BaichuanForCausalLM is ROPE for hidden_size 4096 (Baichuan2-7B), else ALIBI (13B)
        return raw.get("hidden_size") != 4096
    if model_type == "jais":
        # jais.py 0.19.1-0.22.1: use_alibi = config.position_embedding_type == "alibi"; 0.10.2-0.18.1 pass slopes
        # whatever it says (a JAIS config without ALiBi is not known to exist, so the newer reading is taken)
        return raw.get("position_embedding_type") == "alibi"
    return False
