"""Every log fixture, written from a public issue thread's error lines: the primary cause kvdoctor names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvdoctor.explain.explain import explain_log

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"

# fixture -> (primary rule, other rules that must be reported)
EXPECTED = {
    "founding_triton_full.log": ("KVD101", {"KVD398"}),
    "founding_auto_only_0251.log": ("KVD102", {"KVD101"}),
    "founding_interleaved.log": ("KVD101", {"KVD102"}),
    "turboquant_auto_hybrid_50709.log": ("KVD102", set()),
    "flashattn_ampere_8189.log": ("KVD103", set()),
    "fp8e4nv_qwen3_17581.log": ("KVD415", {"KVD398"}),  # an FP8 checkpoint (no fp8 KV): the weight GEMM failed
    "fp8e4nv_rtx3090_26431.log": ("KVD110", set()),
    "bf16_t4_1157.log": ("KVD121", set()),
    "bf16_v100_946_docker.log": ("KVD121", set()),
    "glm4_libcudart_510.log": ("KVD121", {"KVD311"}),
    "gemma3_fp16_llm_scaler_270.log": ("KVD123", set()),
    "invalid_kv_dtype_ascend_7685.log": ("KVD001", set()),
    "ptxas_sm121a_29469.log": ("KVD150", set()),
    "ptxas_sm110a_34470_journald.log": ("KVD150", set()),
    "ptxas_sm100_b200_16336.log": ("KVD150", set()),
    "quant_fp8_4327.log": ("KVD301", set()),
    "quant_awq_v100_4202.log": ("KVD301", set()),
    "quant_awq_t4_1282.log": ("KVD301", set()),
    "compressed_tensors_14040.log": ("KVD302", set()),
    "driver_old_1772.log": ("KVD303", set()),
    "driver_old_11623.log": ("KVD303", {"KVD311"}),
    "no_kernel_image_16307_k8s.log": ("KVD304", set()),
    "no_kernel_image_rtx5080_19906.log": ("KVD304", set()),
    "sm120_torch_21633_docker.log": ("KVD304", set()),
    "no_backend_deepseek_31480.log": ("KVD305", set()),
    "max_seq_len_2418.log": ("KVD306", set()),
    "no_cache_blocks_17431.log": ("KVD307", set()),
    "oom_16343.log": ("KVD308", set()),
    "marlin_8149.log": ("KVD309", set()),
    "p100_below_70_1284.log": ("KVD310", set()),
    "unknown_kvcached_205.log": ("KVD399", {"KVD398"}),
}
SOURCE = re.compile(r"^# source: https://github\.com/[\w.-]+/[\w.-]+/issues/\d+")


def test_every_fixture_is_listed_and_cites_a_public_issue():
    names = {p.name for p in LOGS.glob("*.log")}
    assert set(EXPECTED) | {"healthy_startup_14452.log"} == names
    for path in LOGS.glob("*.log"):
        assert SOURCE.match(path.read_text().splitlines()[0]), path.name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_primary_cause(name):
    primary, others = EXPECTED[name]
    report = explain_log(str(LOGS / name))
    assert report.extra["primary"]["rule_id"] == primary
    assert others <= {f.rule_id for f in report.findings}
    assert report.exit_code("error") == 1
    first = next(f for f in report.findings if f.rule_id == primary)
    assert first.evidence[0].startswith("PRIMARY")


def test_at_least_25_distinct_signatures_are_exercised():
    from kvdoctor.explain.log_lines import normalise
    from kvdoctor.explain.signatures import match_signatures
    from kvdoctor.explain.tracebacks import parse_chains
    from kvdoctor.rules import load_all_rules

    rules = [r for r in load_all_rules() if r.signatures]
    seen = set()
    for name in EXPECTED:
        lines = normalise((LOGS / name).read_text())
        for match in match_signatures(rules, parse_chains(lines), lines):
            seen.add((match.rule.id, match.signature.pattern.pattern))
    assert len(seen) >= 25, sorted(seen)


def test_a_healthy_start_up_is_no_failure():
    report = explain_log(str(LOGS / "healthy_startup_14452.log"))
    assert report.findings == ()
    assert report.exit_code("error") == 0
    assert report.facts["vllm.version"] == "0.10.0"
    assert any("No failure found" in n for n in report.notes)
