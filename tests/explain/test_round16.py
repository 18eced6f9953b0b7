"""Round 16 (batch 20's seen misses, by mechanism): the vLLM version a reporter's shell printed, an MLA backend
refusing the KV dtype in the attention selector, a kernel's out-of-bounds assert under VLLM_ALLOW_LONG_MAX_MODEL_LEN.
Lines written from the tools' and vLLM's own output formats."""

from __future__ import annotations

import pytest

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.log_facts import read_facts
from kvdoctor.explain.log_lines import normalise


@pytest.mark.parametrize("text", [
    '$ python3 -c "import vllm; print(vllm.__version__)"\n0.3.3\n',
    "$ vllm --version\n\n0.3.3\n",
    "$ pip show vllm\nName: vllm\nVersion: 0.3.3\nSummary: A high-throughput and memory-efficient inference engine\n",
    "vllm==0.3.3\n",
    "vllm                              0.3.3\n",
])
def test_the_version_a_shell_printed_is_the_vllm_version(text):
    facts, evidence = read_facts(normalise(text))
    assert facts["vllm.version"] == "0.3.3", evidence


@pytest.mark.parametrize("text", [
    "0.3.3\n",  # a bare version with no question before it
    "$ python -c 'import torch; print(torch.__version__)'\n2.3.0\n",
    "$ pip show torch\nName: torch\nVersion: 2.3.0\n",
    "vllm-flash-attn==2.5.8\n",
])
def test_other_versions_are_not_vllms(text):
    facts, _ = read_facts(normalise(text))
    assert "vllm.version" not in facts


def test_an_mla_backend_refusing_the_kv_dtype_is_the_mla_layout_family():
    one_line = ("Selected backend AttentionBackendEnum.ROCM_AITER_MLA is not valid for this configuration. "
                "Reason: ['kv_cache_dtype not supported']\n")
    assert explain_text(one_line).extra["family"] == "mla_sparse"
    plain = ("Selected backend AttentionBackendEnum.FLASH_ATTN is not valid for this configuration. "
             "Reason: ['kv_cache_dtype not supported']\n")
    assert explain_text(plain).extra["family"] == "kv_dtype_backend"


ASSERT = ("/tmp/torchinductor_root/q5/cq5.py:97: unknown: block: [4,0,0], thread: [0,0,0] Assertion "
          "`index out of bounds: 0 <= tmp48 < 40960` failed.\n")


def test_an_out_of_bounds_assert_under_the_long_length_override_is_the_derived_length():
    report = explain_text("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve Qwen/Qwen3-32B-FP8 --max-model-len 87040\n" + ASSERT)
    assert report.exit_code("error") == 1 and report.extra["family"] == "max_model_len_derived"
    first = report.findings[0]
    assert first.rule_id == "KVD428" and "40960" in first.title and "87040" in first.cause
    assert any(fix.flag == "--max-model-len 40960" for fix in first.fixes)


def test_the_same_assert_without_the_override_is_not_claimed():
    report = explain_text("vllm serve Qwen/Qwen3-32B-FP8 --max-model-len 32768\n" + ASSERT)
    assert report.exit_code("error") == 1 and report.findings[0].rule_id != "KVD428"
