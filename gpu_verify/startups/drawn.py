"""Start-up configurations drawn at random, not chosen: the judge of kvdoctor on cases nobody picked.

    python -m gpu_verify.startups.drawn SEED COUNT        # prints the cases as JSON (run_startups --grid drawn:SEED:COUNT)

Each case draws, independently: a model with one layer feature real models have (models.py), the model dtype, a
KV-cache dtype, a forced attention backend or vLLM's own choice, and a block size or the default. The seed is
fixed before any case is run or any kvdoctor verdict is seen; a draw is never edited afterwards (a case whose
outcome is an artefact of the test model is marked so in compare.py, with why).
"""

from __future__ import annotations

import json
import random
import sys

from gpu_verify.startups.grid import SHORT_KV

MODELS = ("dense", "moe", "d64", "d256", "swa", "gemma2", "mla", "alibi", "sinks")
DTYPES = (("bfloat16", 6), ("float16", 3), ("float32", 1))
KVS = (("auto", 6), ("fp8", 2), ("fp8_e4m3", 1), ("fp8_e5m2", 2), ("turboquant_k8v4", 2), ("turboquant_4bit_nc", 1),
       ("turboquant_3bit_nc", 1))
BACKENDS = ((None, 9), ("FLASH_ATTN", 2), ("TRITON_ATTN", 2), ("FLASHINFER", 2), ("FLEX_ATTENTION", 1),
            ("FLASHMLA", 1), ("TRITON_MLA", 1), ("FLASH_ATTN_MLA", 1), ("TURBOQUANT", 1))
BLOCK_SIZES = ((None, 6), (16, 1), (32, 1), (64, 1), (128, 1), (256, 1))


def _pick(rng: random.Random, weighted):
    values, weights = zip(*weighted)
    return rng.choices(values, weights=weights)[0]


def drawn(seed: int, count: int) -> list[dict]:
    """`count` distinct cases from the seed (a repeat of an earlier draw is drawn again)."""
    rng = random.Random(seed)
    cases: dict[str, dict] = {}
    while len(cases) < count:
        model, dtype = rng.choice(MODELS), _pick(rng, DTYPES)
        kv, backend, block = _pick(rng, KVS), _pick(rng, BACKENDS), _pick(rng, BLOCK_SIZES)
        parts = [model, SHORT_KV.get(kv, kv), {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}[dtype]]
        if backend:
            parts.append(backend.lower())
        if block:
            parts.append(f"b{block}")
        case = {"id": "-".join(parts), "model": model, "kv": kv, "dtype": dtype, "backend": backend, "runner": None,
                "force_e4b15": False, "block_size": block, "drawn": seed}
        if backend == "FLASHINFER":
            case["limit_s"] = 300  # FlashInfer's JIT on first use
        cases.setdefault(case["id"], case)
    return list(cases.values())


def main(argv: list[str]) -> int:
    print(json.dumps(drawn(int(argv[0]), int(argv[1])), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
