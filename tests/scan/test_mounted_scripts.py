"""A Compose service whose entrypoint runs a script bind-mounted from the project (`./entrypoint.sh:/usr/local/bin/x`):
its vLLM command is read from that file, with the service's environment, on the file's own lines (issue 27, s42)."""

from __future__ import annotations

from kvdoctor.scan.run import find_workloads

COMPOSE = """\
services:
  vllm:
    image: vllm/vllm-openai:${VLLM_TAG:?VLLM_TAG must be set in .env}
    volumes:
      - hf:/root/.cache/huggingface
      - ./entrypoint.sh:/usr/local/bin/vllm-entrypoint:ro
    environment:
      VLLM_MODEL: Qwen/Qwen3-8B
      VLLM_SERVED_NAME: ${VLLM_SERVED_NAME:-}
      VLLM_MAX_LEN: ${VLLM_MAX_LEN:-8192}
    entrypoint: ["/usr/local/bin/vllm-entrypoint"]
    command: []
volumes:
  hf:
"""
ENTRYPOINT = """\
#!/usr/bin/env bash
set -euo pipefail
args=(
    --model "${VLLM_MODEL:?VLLM_MODEL must be set}"
    --served-model-name "${VLLM_SERVED_NAME:-${VLLM_MODEL}}"
    # a comment inside the array
    --max-model-len "${VLLM_MAX_LEN:-4096}"
)
exec vllm serve "${args[@]}"
"""


def _project(tmp_path, compose: str = COMPOSE, script: str | None = ENTRYPOINT):
    (tmp_path / "docker-compose.yml").write_text(compose)
    if script is not None:
        (tmp_path / "entrypoint.sh").write_text(script)
    return str(tmp_path / "docker-compose.yml")


def test_an_entrypoint_script_bind_mounted_from_the_project_is_the_services_command(tmp_path):
    (run,) = find_workloads([_project(tmp_path)])[1]
    assert (run.kind, run.container) == ("service", "vllm")
    assert [t.text for t in run.argv] == ["--model", "Qwen/Qwen3-8B", "--served-model-name", "Qwen/Qwen3-8B",
                                          "--max-model-len", "8192"]  # an empty VLLM_SERVED_NAME takes the :- default
    assert run.read_through == (str(tmp_path / "entrypoint.sh"),)
    assert [run.where(t.line) for t in run.argv[::2]] == [(str(tmp_path / "entrypoint.sh"), n) for n in (4, 5, 7)]
    assert run.image == "vllm/vllm-openai:${VLLM_TAG}"  # a required variable is the host's, never its message


def test_a_named_volume_or_a_missing_file_at_the_entrypoint_is_no_workload(tmp_path):
    named = COMPOSE.replace("./entrypoint.sh:/usr/local/bin/vllm-entrypoint", "scripts:/usr/local/bin")
    assert find_workloads([_project(tmp_path, named)])[1] == []
    missing = tmp_path / "without-the-script"
    missing.mkdir()
    assert find_workloads([_project(missing, COMPOSE, None)])[1] == []


def test_a_script_inside_a_mounted_folder_run_by_a_shell_is_read(tmp_path):
    compose = ("services:\n  llm:\n    image: vllm/vllm-openai:v0.25.1\n"
               "    volumes:\n      - type: bind\n        source: ./scripts\n        target: /opt/scripts\n"
               "    entrypoint: [\"bash\", \"/opt/scripts/serve.sh\"]\n")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "serve.sh").write_text("vllm serve org/m --tensor-parallel-size 2\n")
    (run,) = find_workloads([_project(tmp_path, compose, None)])[1]
    assert [t.text for t in run.argv] == ["org/m", "--tensor-parallel-size", "2"]


def test_the_mounted_script_is_read_through_the_service_only_when_the_folder_is_scanned(tmp_path):
    _project(tmp_path)
    (run,) = find_workloads([str(tmp_path)])[1]
    assert run.platform == "compose"  # entrypoint.sh alone is not a second workload
