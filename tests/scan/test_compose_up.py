"""A script that starts a Compose project: the Compose file read with the script's variables (scan/compose_up.py)."""

from __future__ import annotations

from kvdoctor.scan.run import find_workloads

COMPOSE = """\
services:
  vllm:
    image: ${VLLM_IMAGE:-vllm/vllm-openai:v0.19.0}
    command: >
      --model ${VLLM_MODEL}
      --max-model-len ${VLLM_MAX_MODEL_LEN:-8192}
"""


def test_a_script_that_runs_docker_compose_up_reads_the_file_with_its_variables_once(tmp_path):
    (tmp_path / "docker-compose.yml").write_text(COMPOSE)
    (tmp_path / "start.sh").write_text("#!/bin/bash\nexport VLLM_IMAGE=vllm/vllm-openai:v0.25.1\n"
                                       "export VLLM_MODEL=Qwen/Qwen3-8B\n"
                                       "docker compose -p vllm-qwen -f docker-compose.yml up -d\n")
    (service,) = find_workloads([str(tmp_path)])[1]  # the Compose file alone is not a second workload
    assert (service.name, service.image) == ("vllm", "vllm/vllm-openai:v0.25.1")
    assert [t.text for t in service.argv] == ["--model", "Qwen/Qwen3-8B", "--max-model-len", "8192"]
    assert any("started by start.sh" in n for n in service.notes)
    (alone,) = find_workloads([str(tmp_path / "start.sh")])[1]  # the script alone finds the default file too
    assert alone.image == "vllm/vllm-openai:v0.25.1"
    (tmp_path / "start.sh").write_text("#!/bin/bash\ndocker compose logs -f\n")  # no project started
    assert find_workloads([str(tmp_path / "start.sh")])[1] == []
