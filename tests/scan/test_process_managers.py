"""Batch s81 (stop 43): supervisord programs and singularity-compose instances that run vLLM, each named by itself as
a Compose service is (Loosh-ai/loosh-inference-miner docker/supervisord.conf, parallelworks/activate-rag-vllm
singularity/singularity-compose.yml)."""

from __future__ import annotations

from scan_support import write_tree

from kvdoctor.scan.run import read_manifests

SUPERVISORD = """[supervisord]
nodaemon=true

[program:vllm]
command=bash -c 'source /workspace/.env 2>/dev/null || true; \\
    : ${DEFAULT_MODEL:=mistralai/Mistral-7B-Instruct-v0.2}; \\
    : ${TENSOR_PARALLEL_SIZE:=1}; \\
    exec uv run vllm serve "$DEFAULT_MODEL" \\
    --port 8001 \\
    --tensor-parallel-size "$TENSOR_PARALLEL_SIZE"'
environment=PATH="/app/.venv/bin:/usr/bin",HF_HOME="/models"

[program:miner]
command=uv run uvicorn miner.miner_server:app --port 8000
"""

SINGULARITY = """version: "2.0"
instances:
  vllm:
    build:
      context: .
      recipe: Singularity.vllm
    image: vllm.sif
    start:
      options:
        - nv
    run:
      args:
        - >
          nohup python3 -m vllm.entrypoints.openai.api_server
          --model /models/qwen --port ${VLLM_SERVER_PORT} > /logs/vllm.out 2>&1 &
  rag:
    image: rag.sif
    run:
      args: {}
"""


def test_a_supervisord_program_runs_its_command_with_its_defaults(tmp_path):
    root = write_tree(tmp_path / "repo", {"docker/supervisord.conf": SUPERVISORD, "conf.d/other.conf": "[x]\na=1\n"})
    (workload,) = read_manifests([str(root)])[1]  # a walk reads the .conf that holds a [program:] naming vLLM
    assert (workload.name, workload.container, workload.kind) == ("vllm", "vllm", "supervisord program")
    assert [t.text for t in workload.argv] == ["mistralai/Mistral-7B-Instruct-v0.2", "--port", "8001",
                                               "--tensor-parallel-size", "1"]
    assert workload.argv[1].line == 5  # command='s line: a bash -c string continued with backslashes reads as one line


def test_a_singularity_compose_instance_is_named_by_itself(tmp_path):
    root = write_tree(tmp_path / "repo", {"singularity/singularity-compose.yml": SINGULARITY})
    (workload,) = read_manifests([str(root)])[1]
    assert (workload.name, workload.container, workload.kind) == ("vllm", "vllm", "Singularity Compose instance")
    assert [t.text for t in workload.argv][:2] == ["--model", "/models/qwen"]
    assert "start option nv" in workload.notes[0]
