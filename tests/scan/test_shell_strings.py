"""Batch s81 (stop 43): a script's `bash -c '...'` string is a script too; `VAR=value ./serve.sh` runs the script beside
it with VAR set; `: ${X:=default}; exec vllm serve "$X"` on one (continued) line assigns before it launches; a Compose
service that builds from a Dockerfile the project does not have is named, not skipped."""

from __future__ import annotations

from scan_support import write_tree

from kvdoctor.scan.run import read_manifests


def _argv(root):
    return [[t.text for t in w.argv] for w in read_manifests([str(root)])[1]]


def test_a_bash_c_string_is_read_as_a_script(tmp_path):
    script = "nohup bash -c 'M=Qwen/Qwen3-8B; exec vllm serve \"$M\" --port 8001' > out.log 2>&1 &\n"
    assert _argv(write_tree(tmp_path / "a", {"run.sh": script})) == [["Qwen/Qwen3-8B", "--port", "8001"]]
    assert _argv(write_tree(tmp_path / "b", {"run.sh": "bash -c 'echo hello'\n"})) == []


def test_a_script_called_with_variables_in_front_is_read_beside_its_caller(tmp_path):
    """alan-turing-institute/t0-1: `CUDA_VISIBLE_DEVICES=2,3 ./scripts/x/serve_t0.sh MODEL > log 2>&1 &`."""
    tree = {"jobs/batch.sh": "cd ../..\nCUDA_VISIBLE_DEVICES=2,3 ./jobs/serve_t0.sh TomasLaz/t0 > t0.log 2>&1 &\n",
            "jobs/serve_t0.sh": 'vllm serve "$1" --tensor-parallel-size 2\n'}
    found = read_manifests([str(write_tree(tmp_path / "repo", tree) / "jobs" / "batch.sh")])[1]
    assert [[t.text for t in w.argv] for w in found] == [["TomasLaz/t0", "--tensor-parallel-size", "2"]]


def test_a_compose_service_building_from_a_missing_dockerfile_is_named(tmp_path):
    compose = ("services:\n  ocr:\n    build:\n      context: .\n      dockerfile: Dockerfile\n      args:\n"
               "        VLLM_VERSION: v0.9.1\n    environment:\n      - VLLM_LOGGING_LEVEL=INFO\n"
               "  web:\n    build: ./web\n")
    root = write_tree(tmp_path / "repo", {"docs/compose.yml": compose, "docs/other.dockerfile": "FROM x\n"})
    files, found, notes, unread = read_manifests([str(root)])
    assert found == [] and any("service ocr builds its image from Dockerfile, which is not in the scanned files" in n
                               for n in notes)  # fmt: skip
    assert not any("service web" in n for n in notes)  # nothing names vLLM in it


def test_a_compose_command_running_a_script_the_projects_dockerfile_copies_reads_that_script(tmp_path):
    """bolzzzz/vllm-image-adapt-to-cuda-version (batch s83): `command: ["/scripts/start_embed.sh"]` on the project's
    image, whose Dockerfile has `COPY scripts/ /scripts/`."""
    compose = "services:\n  embed:\n    image: someone/uv:vllm0.16.0\n    command: [\"/scripts/start_embed.sh\"]\n"
    tree = {"docker-compose.yml": compose, "Dockerfile": "FROM ubuntu:22.04\nCOPY scripts/ /scripts/\n",
            "scripts/start_embed.sh": "exec vllm serve Qwen/Qwen3-VL-Embedding-2B --runner pooling --port 8000\n"}
    (workload,) = read_manifests([str(write_tree(tmp_path / "repo", tree) / "docker-compose.yml")])[1]
    assert [t.text for t in workload.argv][:3] == ["Qwen/Qwen3-VL-Embedding-2B", "--runner", "pooling"]
