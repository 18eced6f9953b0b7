"""Tiny random-weight models with real attention geometry, made on the GPU machine with its transformers.

    python -m gpu_verify.startups.models OUT_DIR        # makes OUT_DIR/{dense,moe,hybrid}; prints what it made

dense: Qwen2 with Qwen2.5-3B's attention (head_dim 128, 4 query / 2 KV heads; bf16), the founding case's shape.
moe: Qwen3-MoE (8 experts, top 2; same attention), an MoE architecture that vLLM 0.25.x-0.26.0 runs on the V1
runner by default. hybrid: Granite-4.0-H style (Mamba2 + attention layers). For the drawn grid (drawn.py), the
layer features real models have: head sizes 64 and 256 (d64, d256), a sliding window (swa), sliding window with
soft-capping (gemma2), multi-head latent attention (mla), ALiBi (alibi), attention sinks (sinks: gpt-oss). A model
that this transformers cannot build is skipped and said so; its cases are then recorded as not run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ATTN = dict(num_attention_heads=4, num_key_value_heads=2, head_dim=128, max_position_embeddings=4096,
            rms_norm_eps=1e-6, vocab_size=2048, hidden_size=512, tie_word_embeddings=True)


def _save(model_cls, cfg, out: Path) -> int:
    import torch

    torch.manual_seed(0)
    model = model_cls(cfg).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    return sum(p.numel() for p in model.parameters())


def dense(out: Path) -> int:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(intermediate_size=1024, num_hidden_layers=6, rope_theta=1e6, torch_dtype="bfloat16", **ATTN)
    return _save(Qwen2ForCausalLM, cfg, out)


def moe(out: Path) -> int:
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    cfg = Qwen3MoeConfig(intermediate_size=1024, moe_intermediate_size=256, num_experts=8, num_experts_per_tok=2,
                         decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True, num_hidden_layers=4,
                         rope_theta=1e6, torch_dtype="bfloat16", **ATTN)
    return _save(Qwen3MoeForCausalLM, cfg, out)


def hybrid(out: Path) -> int:
    from transformers import GraniteMoeHybridConfig, GraniteMoeHybridForCausalLM

    attn = {k: v for k, v in ATTN.items() if k != "head_dim"}  # Granite derives head_dim = hidden / heads = 128
    cfg = GraniteMoeHybridConfig(
        intermediate_size=1024, shared_intermediate_size=1024, num_local_experts=0, num_experts_per_tok=0,
        num_hidden_layers=4, layer_types=["mamba", "attention", "mamba", "attention"], mamba_n_heads=16,
        mamba_d_head=64, mamba_d_state=64, mamba_n_groups=1, mamba_expand=2, mamba_d_conv=4, mamba_chunk_size=256,
        position_embedding_type="rope", torch_dtype="bfloat16", **attn)
    return _save(GraniteMoeHybridForCausalLM, cfg, out)


def qwen3_head(head_dim: int, heads: int, kv_heads: int):
    """Qwen3 with another head size (64: Llama-3.2-1B's; 256: Gemma's), same hidden size."""
    def build(out: Path) -> int:
        from transformers import Qwen3Config, Qwen3ForCausalLM

        attn = dict(ATTN, head_dim=head_dim, num_attention_heads=heads, num_key_value_heads=kv_heads)
        cfg = Qwen3Config(intermediate_size=1024, num_hidden_layers=4, rope_theta=1e6, torch_dtype="bfloat16", **attn)
        return _save(Qwen3ForCausalLM, cfg, out)
    return build


def sliding(out: Path) -> int:
    """Mistral with a 128-token sliding window on every layer (shorter than the 512-token context)."""
    from transformers import MistralConfig, MistralForCausalLM

    cfg = MistralConfig(intermediate_size=1024, num_hidden_layers=4, sliding_window=128, torch_dtype="bfloat16", **ATTN)
    return _save(MistralForCausalLM, cfg, out)


def gemma2(out: Path) -> int:
    """Gemma-2: sliding window on alternate layers, logit soft-capping, head size 256."""
    from transformers import Gemma2Config, Gemma2ForCausalLM

    attn = dict(ATTN, head_dim=256, num_attention_heads=4, num_key_value_heads=2)
    cfg = Gemma2Config(intermediate_size=1024, num_hidden_layers=4, sliding_window=128, attn_logit_softcapping=50.0,
                       final_logit_softcapping=30.0, query_pre_attn_scalar=256, torch_dtype="bfloat16", **attn)
    return _save(Gemma2ForCausalLM, cfg, out)


def mla(out: Path) -> int:
    """DeepSeek-V2-Lite's multi-head latent attention (KV rank 512, rope 64, nope 128, v 128), dense MLPs."""
    from transformers import DeepseekV2Config, DeepseekV2ForCausalLM

    cfg = DeepseekV2Config(hidden_size=512, intermediate_size=1024, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=4, kv_lora_rank=512, q_lora_rank=None, qk_rope_head_dim=64,
                           qk_nope_head_dim=128, v_head_dim=128, first_k_dense_replace=2, n_routed_experts=4,
                           num_experts_per_tok=2, moe_intermediate_size=256, vocab_size=2048,
                           max_position_embeddings=4096, tie_word_embeddings=True, torch_dtype="bfloat16")
    return _save(DeepseekV2ForCausalLM, cfg, out)


def alibi(out: Path) -> int:
    """BLOOM: ALiBi position biases instead of rotary embeddings."""
    from transformers import BloomConfig, BloomForCausalLM

    cfg = BloomConfig(vocab_size=2048, hidden_size=512, n_layer=4, n_head=4, torch_dtype="bfloat16")
    return _save(BloomForCausalLM, cfg, out)


def sinks(out: Path) -> int:
    """gpt-oss: attention sinks, alternating sliding-window layers, head size 64, MoE (bf16 weights)."""
    from transformers import GptOssConfig, GptOssForCausalLM

    cfg = GptOssConfig(hidden_size=512, intermediate_size=256, num_hidden_layers=2, num_attention_heads=8,
                       num_key_value_heads=2, head_dim=64, num_local_experts=4, num_experts_per_tok=2,
                       sliding_window=128, layer_types=["sliding_attention", "full_attention"], vocab_size=2048,
                       max_position_embeddings=4096, tie_word_embeddings=False, torch_dtype="bfloat16")
    return _save(GptOssForCausalLM, cfg, out)


BUILDERS = (("dense", dense), ("moe", moe), ("hybrid", hybrid), ("d64", qwen3_head(64, 8, 2)),
            ("d256", qwen3_head(256, 4, 1)), ("swa", sliding), ("gemma2", gemma2), ("mla", mla), ("alibi", alibi),
            ("sinks", sinks))


def main(argv: list[str]) -> int:
    root = Path(argv[0])
    made = {}
    for name, fn in BUILDERS:
        out = root / name
        if (out / "config.json").exists():
            made[name] = "exists"
            continue
        try:
            made[name] = fn(out)
        except Exception as e:  # noqa: BLE001 - a model this transformers cannot build is skipped, with why
            made[name] = f"skipped: {type(e).__name__}: {e}"[:300]
    print(json.dumps(made))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
