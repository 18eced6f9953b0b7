"""Dockerfiles: ARG and ENV replacement as the Dockerfile reference describes it ("Environment replacement": FROM and
ENV are replaced at build time, CMD / ENTRYPOINT are not; an ARG before the first FROM is seen by FROM lines only,
a stage redeclares it to use it; ENV overrides an ARG of the same name), and the file names Docker and Podman
builds are given with -f (Dockerfile-cuda, vllm_Containerfile)."""

from __future__ import annotations

from kvdoctor.scan.dockerfile import substituted
from kvdoctor.scan.run import find_workloads, read_manifests

ARGS = """\
ARG VLLM_VERSION=v0.25.1
ARG MODEL=Qwen/Qwen2.5-7B-Instruct
FROM docker.io/vllm/vllm-openai:${VLLM_VERSION} AS serve
ARG MODEL
ARG MAX_LEN=4096
ARG REVISION
ARG TOKENIZER=
ENV MODEL_NAME=${MODEL} \\
    MAX_MODEL_LEN=$MAX_LEN \\
    MODEL_REVISION=${REVISION} \\
    TOKENIZER=$TOKENIZER
CMD vllm serve $MODEL_NAME --max-model-len ${MAX_MODEL_LEN} --tensor-parallel-size ${TP:-2}
"""


def _file(tmp_path, text: str, name: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_arg_defaults_fill_from_and_env_and_the_shell_form_cmd_reads_the_env(tmp_path):
    (image,) = find_workloads([_file(tmp_path, ARGS, "Containerfile")])[1]
    assert image.image == "docker.io/vllm/vllm-openai:v0.25.1"  # the release is the tag the ARG names
    env = {e.name: e.value for e in image.env}
    # MODEL redeclared in the stage takes its global default; REVISION has none (a --build-arg): it stays as written
    # (an empty default, `ARG TOKENIZER=`, is a placeholder for --build-arg: the same)
    assert env == {"MODEL_NAME": "Qwen/Qwen2.5-7B-Instruct", "MAX_MODEL_LEN": "4096", "MODEL_REVISION": "${REVISION}",
                   "TOKENIZER": "$TOKENIZER"}
    assert [t.text for t in image.argv] == ["Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "4096",
                                            "--tensor-parallel-size", "2"]  # fmt: skip


def test_a_global_arg_is_not_seen_inside_a_stage_that_does_not_redeclare_it_and_env_overrides_an_arg():
    assert substituted("vllm/vllm-openai:${TAG}", {"TAG": "v0.25.1"}) == "vllm/vllm-openai:v0.25.1"
    assert substituted("${MISSING}/${TAG:-latest}/${TAG:+set}", {"TAG": None}) == "${MISSING}/latest/${TAG:+set}"
    assert substituted("$A-${B:+x}", {"A": "1", "B": ""}) == "1-"
    text = ("ARG MODEL=org/global\nFROM vllm/vllm-openai:v0.25.1\nARG LEN=2048\nENV LEN=8192\n"
            "ENV MODEL_NAME=${MODEL} MAX=${LEN}\nCMD vllm serve $MODEL_NAME --max-model-len $MAX\n")  # fmt: skip
    env = {e.name: e.value for e in _workload_of(text).env}
    assert env["MODEL_NAME"] == "${MODEL}" and env["MAX"] == "8192"


def _workload_of(text: str):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "Dockerfile"
        path.write_text(text)
        (image,) = find_workloads([str(path)])[1]
    return image


def test_dash_and_underscore_file_names_are_dockerfiles_and_yaml_stays_yaml(tmp_path):
    cmd = 'FROM vllm/vllm-openai:v0.20.2 \nCMD ["org/m-AWQ", "--quantization", "awq_marlin", "--max-model-len", "880"]\n'
    for name in ("container__Containerfile", "Dockerfile-cuda", "vllm-Dockerfile", "Containerfile_gpu"):
        (image,) = find_workloads([_file(tmp_path, cmd, name)])[1]
        assert (image.name, image.container, image.image) == (name, "CMD", "vllm/vllm-openai:v0.20.2")
    (tmp_path / "walk").mkdir()
    _file(tmp_path / "walk", cmd, "serve_Dockerfile")
    _file(tmp_path / "walk", "services:\n  web:\n    image: nginx\n", "Dockerfile-compose.yaml")
    files, found, _, unread = read_manifests([str(tmp_path / "walk")])
    assert len(files) == 2 and not unread and [w.name for w in found] == ["serve_Dockerfile"]


def test_the_same_shape_without_vllm_is_no_workload(tmp_path):
    text = "ARG PY=3.12\nFROM python:${PY}-slim\nARG APP=api\nENV APP_NAME=${APP}\nCMD python -m $APP_NAME --port 8000\n"
    assert find_workloads([_file(tmp_path, text, "Dockerfile-api")])[1] == []


def test_a_bad_flag_in_a_containerfile_cmd_is_one_line_at_its_line_exit_2(run_cli, tmp_path):
    path = _file(tmp_path, 'ARG TAG=v0.25.1\nFROM vllm/vllm-openai:${TAG}\nCMD ["org/m", "--dtype", "bf16"]\n',
                 "vllm_Containerfile")  # fmt: skip
    result = run_cli("scan", path, "--gpu", "A100", "--no-compile")
    assert result.code == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"kvdoctor: error: {path}:3:") and "--dtype" in line
