"""Dockerfiles: the command the image runs, as Docker combines ENTRYPOINT and CMD."""

from __future__ import annotations

from kvdoctor.scan.run import find_workloads, read_manifests

SHELL_FORM = """\
FROM python:3.12 AS build
RUN pip wheel vllm
# the served image
FROM vllm/vllm-openai:v0.25.1
ENV MAX_LEN=4096 \\
    VLLM_USE_V1=1
ENTRYPOINT python3 -m vllm.entrypoints.openai.api_server \\
    --model ${MODEL_NAME:-Qwen/Qwen2.5-7B-Instruct} \\
    --max-model-len $MAX_LEN \\
    ${REVISION:+--revision "$REVISION"}
"""


def _dockerfile(tmp_path, text: str, name: str = "Dockerfile"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_shell_form_entrypoint_on_the_last_stage_with_its_env(tmp_path):
    (image,) = find_workloads([str(_dockerfile(tmp_path, SHELL_FORM))])[1]
    assert (image.kind, image.name, image.container, image.image) == ("Dockerfile", "Dockerfile", "ENTRYPOINT",
                                                                      "vllm/vllm-openai:v0.25.1")  # fmt: skip
    assert [t.text for t in image.argv] == ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "4096"]
    assert image.argv[0].line == 7 and [(e.name, e.value) for e in image.env] == [("MAX_LEN", "4096"),
                                                                                  ("VLLM_USE_V1", "1")]  # fmt: skip
    assert any('--revision "$REVISION" only when $REVISION is set at run time' in n for n in image.notes)


def test_cmd_alone_is_the_arguments_of_a_vllm_base_images_entrypoint(tmp_path):
    text = 'FROM vllm/vllm-openai:v0.25.1\nCMD ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "4096"]\n'
    (image,) = find_workloads([str(_dockerfile(tmp_path, text))])[1]
    assert image.container == "CMD" and [t.text for t in image.argv][:2] == ["--model", "Qwen/Qwen2.5-7B-Instruct"]


def test_an_exec_form_entrypoint_takes_cmd_as_its_arguments(tmp_path):
    text = 'FROM nvidia/cuda:12.8.0\nENTRYPOINT ["vllm", "serve"]\nCMD ["Qwen/Qwen2.5-7B-Instruct", "-tp", "2"]\n'
    (image,) = find_workloads([str(_dockerfile(tmp_path, text, "serve.Dockerfile"))])[1]
    assert [t.text for t in image.argv] == ["Qwen/Qwen2.5-7B-Instruct", "-tp", "2"]


def test_an_image_that_does_not_run_vllm_is_no_workload_and_a_walk_reads_dockerfiles(tmp_path):
    (tmp_path / "a").mkdir()
    _dockerfile(tmp_path / "a", "FROM vllm/vllm-openai:v0.25.1\nENTRYPOINT [\"/app/start.sh\"]\n")
    _dockerfile(tmp_path, SHELL_FORM, "Containerfile")
    files, found, _, unread = read_manifests([str(tmp_path)])
    assert len(files) == 2 and not unread and [w.name for w in found] == ["Containerfile"]


def test_an_image_built_on_vllms_that_sets_no_command_is_no_workload(tmp_path):
    """Its command comes from where the image is run (a real Dockerfile was an input error, 'no model given', exit 2)."""
    from kvdoctor.scan.run import find_workloads

    path = tmp_path / "Dockerfile"
    path.write_text("FROM vllm/vllm-openai:v0.5.0\nENV HF_HUB_ENABLE_HF_TRANSFER 1\nRUN pip install hf_transfer\n")
    assert find_workloads([str(path)])[1] == []


ECHOED_SCRIPT = """\
FROM nvidia/cuda:12.4.0-runtime-ubuntu22.04
RUN /opt/venv/bin/uv pip install --pre \\
        vllm==0.10.1+gptoss \\
        --extra-index-url https://wheels.vllm.ai/gpt-oss/
WORKDIR /app
ENV MODEL_NAME=facebook/opt-125m
RUN echo '#!/bin/bash\\n\\
MODEL=${MODEL_NAME:-openai/gpt-oss-20b}\\n\\
/opt/venv/bin/vllm serve \\
    "$MODEL" \\
    --gpu-memory-utilization 0.90 \\
    --max-model-len 2048\\n' > /app/start.sh && \\
    chmod +x /app/start.sh
CMD ["/app/start.sh"]
"""


def test_a_script_the_build_echoes_into_the_image_is_the_command_cmd_runs(tmp_path):
    """laureano-arcanio/balanced-vllm-docker's shape: RUN echo '...\\n...' > /app/start.sh, CMD runs it; the
    release is the one its RUN pip-installs (a local +gptoss build of 0.10.1)."""
    (image,) = find_workloads([str(_dockerfile(tmp_path, ECHOED_SCRIPT))])[1]
    assert [t.text for t in image.argv] == ["facebook/opt-125m", "--gpu-memory-utilization", "0.90",
                                            "--max-model-len", "2048"]  # fmt: skip
    assert image.vllm_pin == "0.10.1" and image.vllm_pin_line == 2
    assert any("/app/start.sh, which the build writes" in n for n in image.notes)


def test_a_heredoc_script_written_by_run_or_copy_is_read_on_its_own_lines(tmp_path):
    text = ("FROM vllm/vllm-openai:v0.25.1\nRUN cat <<'EOF' > /start.sh\n#!/bin/sh\nvllm serve Qwen/Qwen3-8B \\\n"
            "  --max-model-len 8192\nEOF\nENTRYPOINT [\"/bin/sh\", \"/start.sh\"]\n")
    (image,) = find_workloads([str(_dockerfile(tmp_path, text))])[1]
    assert [t.text for t in image.argv] == ["Qwen/Qwen3-8B", "--max-model-len", "8192"]
    assert image.argv[1].line == 5
    copied = "FROM vllm/vllm-openai:v0.25.1\nWORKDIR /srv\nCOPY <<EOF run.sh\nvllm serve Qwen/Qwen3-8B -tp 2\nEOF\nCMD ./run.sh\n"
    (image,) = find_workloads([str(_dockerfile(tmp_path, copied))])[1]
    assert [t.text for t in image.argv] == ["Qwen/Qwen3-8B", "-tp", "2"] and image.argv[0].line == 4


def test_a_written_file_that_runs_no_vllm_is_still_no_workload(tmp_path):
    text = "FROM python:3.12\nRUN echo 'print(1)' > /app/main.py\nCMD [\"python\", \"/app/main.py\"]\n"
    assert find_workloads([str(_dockerfile(tmp_path, text))])[1] == []
