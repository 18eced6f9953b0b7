"""A command whose output a shell script assigns (`ID=$(docker run -d ...)`) still runs: it is read as one of the
script's commands (bash(1), "Command Substitution"; docker run -d prints the new container's ID)."""

from __future__ import annotations

from kvdoctor.scan.assigned_commands import unwrapped_assignments
from kvdoctor.scan.run import find_workloads

ASSIGNED_RUN = """\
#!/usr/bin/env bash
set -euo pipefail
source ./serving.env
CONTAINER_NAME="${QWEN_CONTAINER_NAME}"
VLLM_ARGS=(
    --model "${MODEL_PATH}"
    --served-model-name "${SERVED_NAME}"
    --host 0.0.0.0
    --tensor-parallel-size 2
    --max-model-len 8192
)
CONTAINER_ID=$(docker run -d \\
    --name "${CONTAINER_NAME}" \\
    --gpus '"device=0,1"' \\
    --env "VLLM_USE_FLASHINFER_SAMPLER=1" \\
    "${VLLM_IMAGE}" \\
    "${VLLM_ARGS[@]}")
state=$(docker inspect -f '{{.State.Status}}' "${CONTAINER_NAME}" 2>/dev/null || echo "missing")
echo "${CONTAINER_ID}"
"""


def _script(tmp_path, text: str, name: str = "start.sh") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_docker_run_whose_id_is_assigned_is_a_workload_named_by_its_unresolved_name_variable(tmp_path):
    (run,) = find_workloads([_script(tmp_path, ASSIGNED_RUN)])[1]
    # --name "${CONTAINER_NAME}": its assignment names a variable sourced from a file not read, so the literal stays
    assert (run.kind, run.container, run.image, run.line) == ("docker run", "${CONTAINER_NAME}", "${VLLM_IMAGE}", 12)
    texts = [t.text for t in run.argv]
    assert texts[:2] == ["--model", "${MODEL_PATH}"] and texts[-4:] == ["--tensor-parallel-size", "2",
                                                                         "--max-model-len", "8192"]  # fmt: skip
    assert run.gpu_limit == 2 and [(e.name, e.value) for e in run.env] == [("VLLM_USE_FLASHINFER_SAMPLER", "1")]


def test_the_container_name_is_resolved_from_the_scripts_assignment_and_local_or_quoted_forms_are_read(tmp_path):
    text = ('NAME=vllm-qwen\n'
            'start() {\n'
            '  local cid="$(sudo docker run -d --name "$NAME" --gpus 1 vllm/vllm-openai:v0.25.1 --model org/m)"\n'
            '}\n')  # fmt: skip
    (run,) = find_workloads([_script(tmp_path, text)])[1]
    assert (run.container, run.image, [t.text for t in run.argv]) == ("vllm-qwen", "vllm/vllm-openai:v0.25.1",
                                                                      ["--model", "org/m"])  # fmt: skip
    assert run.argv[0].line == 3


def test_assigned_commands_that_run_no_vllm_and_arithmetic_are_no_workload(tmp_path):
    text = ('ID=$(docker run -d --name cache -p 6379:6379 redis:7)\n'
            'N=$((GPUS * 2))\n'
            'URL="$(gcloud run services describe svc --format=value(status.url))"\n')  # fmt: skip
    assert find_workloads([_script(tmp_path, text)])[1] == []
    # the blanking keeps every offset and line; arithmetic $((...)) is left as written
    assert unwrapped_assignments(text).splitlines()[1] == "N=$((GPUS * 2))"
    assert len(unwrapped_assignments(text)) == len(text)


def test_a_substitution_that_is_part_of_a_value_is_left_as_written_and_the_script_still_read(tmp_path):
    # `ENV_FILE="$(dirname "$0")/../.env"`: blanking it would leave an unmatched quote and lose the script's commands
    text = ('ENV_FILE="$(dirname "$0")/../.env"\n'
            'BASE=$(pwd)/models\n'
            'exec python -m vllm.entrypoints.openai.api_server --model "${MODEL:-org/m}" --max-model-len 2048\n')
    assert unwrapped_assignments(text) == text
    (script,) = find_workloads([_script(tmp_path, text)])[1]
    assert [t.text for t in script.argv] == ["--model", "org/m", "--max-model-len", "2048"]


def test_an_image_variable_before_vllm_options_is_the_image_not_docker_options(tmp_path):
    # `"$IMAGE" --model "$MODEL" --port 8000`: a variable followed by vLLM's options is the image; one followed by
    # docker's own options (-e, --rm, -it) is options from the environment
    text = ('docker run -d $EXTRA -e A=1 --rm "$IMAGE" --model "$MODEL" --served-model-name "$SERVED"'
            ' --max-model-len 4096\n')  # fmt: skip
    (run,) = find_workloads([_script(tmp_path, text)])[1]
    assert run.image == "$IMAGE" and [t.text for t in run.argv][:2] == ["--model", "$MODEL"]


def test_a_bad_flag_in_an_assigned_docker_run_is_one_line_at_its_line_exit_2(run_cli, tmp_path):
    text = 'CID=$(docker run -d --gpus 1 \\\n  vllm/vllm-openai:v0.25.1 \\\n  --model org/m --dtype bf16)\n'
    path = _script(tmp_path, text)
    result = run_cli("scan", path, "--gpu", "A100", "--no-compile")
    assert result.code == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"kvdoctor: error: {path}:3:") and "--dtype" in line
