"""Docker Compose: command as a string or a list, environment as a map or a list, merge keys, interpolation."""

from __future__ import annotations

from scan_support import by_name, finding, line_of, rel, scan, write_tree

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
    # another project's build: its tag is its own version, so the fix names the release, it does not swap the image
    assert [f.title.split(":")[0] for f in unpinned.finding.fixes] == [
        "Name the vLLM release this image ships to judge it",
        "Or tag the build with the vLLM release it installs (IMAGE"]


BASE = """services:
  base-vllm:
    image: vllm/vllm-openai:v0.25.1
    environment:
      - VLLM_USE_V2_MODEL_RUNNER=0
    command:
      - --model
      - Qwen/Qwen2.5-3B-Instruct
      - --kv-cache-dtype
      - fp8
      - --tensor-parallel-size
      - "4"
"""


def test_extends_a_service_of_another_file_with_gpus_device_ids(tmp_path):
    """Compose's `extends` (a service of another file): the image, command and environment come from the base file,
    the GPUs from the extending service's own `gpus:` device request; a finding on a base line points into the base
    file (vllm-project's own compose layouts and real projects split a service this way)."""
    root = write_tree(tmp_path / "repo", {"base.yaml": BASE, "docker-compose.yaml": """services:
  vllm:
    extends:
      file: ./base.yaml
      service: base-vllm
    environment:
      - HF_HOME=/hf
    gpus:
      - driver: nvidia
        device_ids: ["0", "3"]
        capabilities: [gpu]
  same-file:
    extends: vllm
"""})
    result = by_name(scan([str(root / "docker-compose.yaml")], tmp_path))
    served = result["vllm"]
    assert served.workload.image == "vllm/vllm-openai:v0.25.1" and served.workload.gpu_limit == 2
    assert served.report.facts["serve.kv_cache_dtype"] == "fp8"
    assert {e.name for e in served.workload.env} >= {"VLLM_USE_V2_MODEL_RUNNER", "HF_HOME"}
    too_few = finding(served, "KVD201")  # TP 4 on the 2 GPUs the service asks for, placed at its device_ids
    assert too_few.location.file.endswith("docker-compose.yaml") and too_few.location.line == 10
    dtype = served.sources["serve.kv_cache_dtype"]  # read from the base file's command
    assert dtype.file.endswith("base.yaml") and dtype.line == 9
    assert any("extends service 'base-vllm' of ./base.yaml" in n for n in served.report.notes)
    assert result["same-file"].workload.gpu_limit == 2  # extends the service above, which extends base.yaml


def test_extends_a_missing_file_is_said_and_the_service_read_alone(tmp_path):
    root = write_tree(tmp_path / "repo", {"docker-compose.yaml": """services:
  vllm:
    extends: {file: ./gone.yaml, service: x}
    image: vllm/vllm-openai:v0.25.1
    command: --model Qwen/Qwen2.5-3B-Instruct
"""})
    served = by_name(scan([str(root / "docker-compose.yaml")], tmp_path))["vllm"]
    assert any("extends './gone.yaml' (line 3) could not be read" in n for n in served.report.notes)


def test_an_empty_default_after_an_option_is_the_hosts_value_not_a_missing_one(tmp_path):
    """`--api-key ${VLLM_API_KEY:-}`: empty only when the host leaves the variable unset; the value is not judged
    (no KVD004 'expected one argument'), while an empty `${EXTRA:-}` after a flag that takes none leaves no word."""
    root = write_tree(tmp_path / "repo", {"docker-compose.yml": """services:
  vllm:
    image: vllm/vllm-openai:v0.25.1
    command: >
      --model Qwen/Qwen2.5-3B-Instruct
      --enforce-eager ${EXTRA:-}
      --api-key ${VLLM_API_KEY:-}
      --port 8100
"""})
    served = by_name(scan([str(root / "docker-compose.yml")], tmp_path))["vllm"]
    assert not any(p.finding.rule_id == "KVD004" and p.finding.status == "fired" for p in served.placed)
    assert any("--api-key takes its value from ${VLLM_API_KEY}" in n for n in served.report.notes)
