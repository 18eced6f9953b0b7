"""Docker Compose: command as a string or a list, environment as a map or a list, merge keys, interpolation."""

from __future__ import annotations

from scan_support import by_name, finding, line_of, rel, scan

VARIANTS = "compose-variants.yaml"


def test_merge_keys_interpolation_and_list_environment(tmp_path):
    result = by_name(scan([rel(VARIANTS)], tmp_path))
    assert sorted(result) == ["entrypoint-string", "list-command"]  # nginx skipped
    listed = result["list-command"]
    assert listed.workload.image == "vllm/vllm-openai:v0.27.0"  # ${VLLM_TAG:-v0.27.0}
    assert listed.report.facts["vllm.version"] == "0.27.0"
    assert listed.report.facts["env.VLLM_USE_V2_MODEL_RUNNER"] == "0"
    assert listed.sources["env.VLLM_USE_V2_MODEL_RUNNER"].line == line_of(VARIANTS, "VLLM_USE_V2_MODEL_RUNNER=0")
    assert listed.sources["serve.kv_cache_dtype"].line == line_of(VARIANTS, '"turboquant_k8v4"')
    assert {p.finding.rule_id for p in listed.placed} == {"KVD104"}  # 0.27.0 compiles k8v4; the e4b15 warning stays


def test_string_entrypoint_and_command_device_ids_and_env_file(tmp_path):
    served = by_name(scan([rel(VARIANTS)], tmp_path))["entrypoint-string"]
    assert served.report.facts["serve.max_model_len"] == 4096
    assert served.workload.gpu_limit == 2  # device_ids: ["0", "1"]
    assert not any(p.finding.rule_id in ("KVD201", "KVD202") for p in served.placed)  # -tp 2 on 2 GPUs
    assert any("env_file '.env'" in n for n in served.report.notes)
    assert any("tag of my-registry/llm-server is not a vLLM version" in n for n in served.report.notes)
    unpinned = finding(served, "KVD204")
    assert unpinned.location.line == line_of(VARIANTS, "image: my-registry/llm-server:1.4")
