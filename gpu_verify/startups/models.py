"""Tiny random-weight models with real attention geometry, made on the GPU machine with its transformers.

    python -m gpu_verify.startups.models OUT_DIR        # makes OUT_DIR/{dense,moe,hybrid}; prints what it made

dense: Qwen2 with Qwen2.5-3B's attention (head_dim 128, 4 query / 2 KV heads; bf16), the founding case's shape.
moe: Qwen3-MoE (8 experts, top 2; same attention), an MoE architecture that vLLM 0.25.x-0.26.0 runs on the V1
runner by default. hybrid: Granite-4.0-H style (Mamba2 + attention layers). A model that this transformers
cannot build is skipped and said so; its cases are then recorded as not run.
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


def main(argv: list[str]) -> int:
    root = Path(argv[0])
    made = {}
    for name, fn in (("dense", dense), ("moe", moe), ("hybrid", hybrid)):
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
