"""Start-ups that test kvdoctor's fit and quantization verdicts against real `vllm serve` on the GPU machine.

A case: id, model (a config file in the repo, served with `--load-format dummy`: random weights of the real size,
no checkpoint; or `tiny:NAME`, a random-weight model models.py makes there with real weights), and the serve flags.
Memory profiling stays on (no --kv-cache-memory-bytes unless the case is about that flag). Part `a` calibrates
the memory budget, part `b` covers quantized checkpoints, tiny architectures and one `kvdoctor verify` run; parts
`c` and `d` (a later session) the layer kinds at real sizes (sliding window, MLA, MoE, hybrid Mamba, sinks), a
method whose minimum capability is above SM 9.0, and utilizations around the limit for MoE and MLA; part `f` the
profile run's peak for MoE and MLA (the sampler's rows, the forward's tokens, torch.compile), predictions committed
before any run (docs/real-startup-results/fit-predictions-h200-2026-12-05-f.json).
The same list drives the predictions made on the CPU before the run (gpu_verify/startups/fit_compare.py).
"""

from __future__ import annotations

CONFIGS = {
    "llama8b": "tests/fixtures/configs/llama-3.1-8b-instruct.json",
    "qwen3b": "examples/qwen2.5-3b-instruct/config.json",
    "mistral7b": "tests/fixtures/configs/mistral-7b-v0.1-fp16.json",
    "gemma2-9b": "tests/fixtures/configs/gemma-2-9b-it.json",
    "dsv2lite": "examples/deepseek-v2-lite-chat/config.json",
    "gpt2": "tests/fixtures/configs/gpt2.json",
    "llama8b-fp8-ct": "tests/fixtures/configs/quantized/llama-3.1-8b-ct-w8a8-fp8.json",
    "llama8b-awq": "tests/fixtures/configs/quantized/llama-3.1-8b-awq-int4.json",
    "llama8b-gptq": "tests/fixtures/configs/quantized/llama-3.1-8b-gptq-int4.json",
    "llama8b-fp8-block": "tests/fixtures/configs/quantized/llama-3.1-8b-fp8-block.json",
    "llama8b-w4a16-ct": "tests/fixtures/configs/quantized/llama-3.1-8b-ct-w4a16.json",
    "gptoss20b": "tests/fixtures/configs/quantized/gpt-oss-20b-mxfp4.json",
    "qwen3-30b-a3b": "tests/fixtures/startup_logs/configs/Qwen__Qwen3-Coder-30B-A3B-Instruct.json",
    "jamba": "tests/fixtures/configs/jamba-v0.1.json",
    "qwen3b-fp-quant": "tests/fixtures/configs/quantized/qwen2.5-3b-fp-quant-mxfp4.json",
}

EAGER = ("--enforce-eager",)


def case(cid: str, model: str, *flags: str, verify: bool = False, limit_s: float = 200.0) -> dict:
    return {"id": cid, "model": model, "flags": list(flags), "verify": verify, "limit_s": limit_s}


def grid(part: str) -> list[dict]:
    if part == "a":
        return [
            case("llama8b-u90-default", "llama8b", "--gpu-memory-utilization", "0.9", limit_s=300),
            case("llama8b-u90-eager", "llama8b", "--gpu-memory-utilization", "0.9", *EAGER),
            case("llama8b-u15-131k", "llama8b", "--gpu-memory-utilization", "0.15", *EAGER),
            case("llama8b-u15-16k", "llama8b", "--gpu-memory-utilization", "0.15", "--max-model-len", "16384", *EAGER),
            case("llama8b-u50-fp8", "llama8b", "--gpu-memory-utilization", "0.5", "--kv-cache-dtype", "fp8", *EAGER),
            case("llama8b-200k", "llama8b", "--max-model-len", "200000", *EAGER),
            case("llama8b-kvbytes-8g", "llama8b", "--kv-cache-memory-bytes", "8G", *EAGER),
            case("qwen3b-u90-default", "qwen3b", "--gpu-memory-utilization", "0.9", limit_s=300),
            case("qwen3b-u30-k8v4", "qwen3b", "--gpu-memory-utilization", "0.3", "--kv-cache-dtype", "turboquant_k8v4",
                 *EAGER),
            case("mistral7b-u50", "mistral7b", "--gpu-memory-utilization", "0.5", *EAGER),
            case("gemma2-9b-u60", "gemma2-9b", "--gpu-memory-utilization", "0.6", *EAGER),
            case("dsv2lite-u90", "dsv2lite", "--gpu-memory-utilization", "0.9", "--trust-remote-code", *EAGER),
            case("gpt2-u20", "gpt2", "--gpu-memory-utilization", "0.2", *EAGER),
        ]
    if part == "b":
        return [
            case("tiny-dense-verify", "tiny:dense", "--gpu-memory-utilization", "0.1", "--max-model-len", "4096",
                 *EAGER, verify=True),
            case("llama8b-online-fp8", "llama8b", "--quantization", "fp8", "--gpu-memory-utilization", "0.9", *EAGER),
            case("llama8b-ct-fp8", "llama8b-fp8-ct", "--gpu-memory-utilization", "0.9", *EAGER),
            case("llama8b-awq", "llama8b-awq", "--gpu-memory-utilization", "0.9", *EAGER),
            case("llama8b-gptq", "llama8b-gptq", "--gpu-memory-utilization", "0.9", *EAGER),
            case("llama8b-fp8-block", "llama8b-fp8-block", "--gpu-memory-utilization", "0.9", *EAGER),
            case("llama8b-ct-w4a16", "llama8b-w4a16-ct", "--gpu-memory-utilization", "0.9", *EAGER),
            case("tiny-hybrid", "tiny:hybrid", "--gpu-memory-utilization", "0.1", "--max-model-len", "4096", *EAGER),
            case("tiny-moe", "tiny:moe", "--gpu-memory-utilization", "0.1", "--max-model-len", "4096", *EAGER),
            case("gptoss20b-mxfp4", "gptoss20b", "--gpu-memory-utilization", "0.9", "--max-model-len", "32768",
                 *EAGER, limit_s=260),
        ]
    if part == "c":
        return [
            case("qwen3b-fp-quant-sm100", "qwen3b-fp-quant", "--allow-deprecated-quantization", *EAGER, limit_s=120),
            case("gemma2-9b-u60", "gemma2-9b", "--gpu-memory-utilization", "0.6", *EAGER),
            case("mistral7b-u50", "mistral7b", "--gpu-memory-utilization", "0.5", *EAGER),
            case("dsv2lite-u90", "dsv2lite", "--gpu-memory-utilization", "0.9", *EAGER, limit_s=240),
            case("qwen3-30b-a3b-u90", "qwen3-30b-a3b", "--gpu-memory-utilization", "0.9", *EAGER, limit_s=240),
            case("jamba-u90", "jamba", "--gpu-memory-utilization", "0.9", *EAGER, limit_s=300),
            case("gptoss20b-mxfp4", "gptoss20b", "--gpu-memory-utilization", "0.9", "--max-model-len", "32768",
                 *EAGER, limit_s=260),
        ]
    if part == "d":
        return [
            case("dsv2lite-u18", "dsv2lite", "--gpu-memory-utilization", "0.18", "--max-model-len", "16384", *EAGER),
            case("dsv2lite-u25", "dsv2lite", "--gpu-memory-utilization", "0.25", "--max-model-len", "16384", *EAGER),
            case("qwen3-30b-a3b-u30", "qwen3-30b-a3b", "--gpu-memory-utilization", "0.3", "--max-model-len", "16384",
                 *EAGER),
            case("qwen3-30b-a3b-u45", "qwen3-30b-a3b", "--gpu-memory-utilization", "0.45", "--max-model-len", "16384",
                 *EAGER, limit_s=240),
            case("gemma2-9b-u60-fp8", "gemma2-9b", "--gpu-memory-utilization", "0.6", "--kv-cache-dtype", "fp8", *EAGER),
            case("mistral7b-u30-k8v4", "mistral7b", "--gpu-memory-utilization", "0.3", "--kv-cache-dtype",
                 "turboquant_k8v4", *EAGER),
            case("dsv2lite-u90-fp8", "dsv2lite", "--gpu-memory-utilization", "0.9", "--kv-cache-dtype", "fp8", *EAGER,
                 limit_s=240),
            case("gpt2-u20", "gpt2", "--gpu-memory-utilization", "0.2", *EAGER),
        ]
    if part == "e":  # checks of this session's new rule (KVD109) and its fix, and the deprecation gate
        return [
            case("gemma2-9b-u60-k8v4", "gemma2-9b", "--gpu-memory-utilization", "0.6", "--kv-cache-dtype",
                 "turboquant_k8v4", *EAGER),
            case("mistral7b-u50-fp8", "mistral7b", "--gpu-memory-utilization", "0.5", "--kv-cache-dtype", "fp8",
                 *EAGER),
            case("qwen3b-fp-quant-deprecated", "qwen3b-fp-quant", *EAGER, limit_s=120),
            case("dsv2lite-u90-k8v4", "dsv2lite", "--gpu-memory-utilization", "0.9", "--kv-cache-dtype",
                 "turboquant_k8v4", *EAGER, limit_s=240),
        ]
    if part == "f":  # the profile run's peak for MoE / MLA (facts/profile_peak.py): low headroom, and the sampler's
        # rows (max_num_seqs), the forward's tokens (max_num_batched_tokens) and torch.compile moved one at a time;
        # most telling first (fit_run's --deadline cuts the tail: one device call)
        mml = ("--max-model-len", "16384")
        return [
            case("qwen3-30b-a3b-u45-seqs256", "qwen3-30b-a3b", "--gpu-memory-utilization", "0.45", *mml,
                 "--max-num-seqs", "256", *EAGER, limit_s=240),
            case("qwen3-30b-a3b-u44", "qwen3-30b-a3b", "--gpu-memory-utilization", "0.44", *mml, *EAGER, limit_s=240),
            case("dsv2lite-u22", "dsv2lite", "--gpu-memory-utilization", "0.22", *mml, *EAGER, limit_s=240),
            case("dsv2lite-u25-seqs256", "dsv2lite", "--gpu-memory-utilization", "0.25", *mml, "--max-num-seqs",
                 "256", *EAGER, limit_s=240),
            case("gptoss20b-u13", "gptoss20b", "--gpu-memory-utilization", "0.13", "--max-model-len", "32768",
                 *EAGER, limit_s=260),
            case("qwen3-30b-a3b-u45-bt2048", "qwen3-30b-a3b", "--gpu-memory-utilization", "0.45", *mml,
                 "--max-num-batched-tokens", "2048", *EAGER, limit_s=240),
            case("qwen3-30b-a3b-u43", "qwen3-30b-a3b", "--gpu-memory-utilization", "0.43", *mml, *EAGER),
            case("jamba-u72", "jamba", "--gpu-memory-utilization", "0.72", *mml, *EAGER, limit_s=300),
            case("qwen3-30b-a3b-u45-compiled", "qwen3-30b-a3b", "--gpu-memory-utilization", "0.45", *mml,
                 limit_s=420),
        ]
    raise ValueError(f"unknown part {part!r}")
