"""Shell functions a script calls, its own or a sourced file's (scan/shell_functions.py): the body read with the call's
arguments as $1.. and its `local` assignments (a real job's shape: manifest batch s57, Qisai-1/sureact
slurm/label_tau2.sbatch sourcing slurm/vllm.sh and calling `start_vllm "$MODEL" "$PORT" LOG`)."""

from __future__ import annotations

from scan_support import write_tree

from kvdoctor.scan.run import find_workloads

HELPER = """#!/usr/bin/env bash

start_vllm() {
  local model=$1 port=$2 log=$3
  vllm serve "$model" --port "$port" --served-model-name "$model" \\
    --max-model-len "${MAX_MODEL_LEN:-32768}" > "$log" 2>&1 &
}
"""


def test_a_sourced_helpers_function_runs_with_the_calls_arguments(tmp_path):
    root = write_tree(tmp_path / "repo", {
        "slurm/vllm.sh": HELPER,
        "slurm/job.sbatch": '#!/bin/bash\n#SBATCH --gres=gpu:1\nsource slurm/vllm.sh\nMODEL=Qwen/Qwen3-8B\nPORT=8123\n'
                            'start_vllm "$MODEL" "$PORT" "logs/vllm.log"\n',
    })
    (job,) = find_workloads([str(root / "slurm" / "job.sbatch")])[1]
    assert [t.text for t in job.argv] == ["Qwen/Qwen3-8B", "--port", "8123", "--served-model-name", "Qwen/Qwen3-8B",
                                          "--max-model-len", "32768"]  # fmt: skip
    assert {t.line for t in job.argv} == {6}  # a sourced file's words: at the call
    assert any("shell function start_vllm of" in n and "vllm.sh" in n for n in job.notes)


def test_a_scripts_own_function_keeps_its_lines_and_each_call_is_a_workload(tmp_path):
    script = tmp_path / "serve.sh"
    script.write_text('serve() {\n  vllm serve "$1" --tensor-parallel-size "${2}"\n}\n'
                      "serve Qwen/Qwen3-8B 2\nserve meta-llama/Llama-3.1-8B 1\n")
    first, second = find_workloads([str(script)])[1]
    assert [t.text for t in first.argv] == ["Qwen/Qwen3-8B", "--tensor-parallel-size", "2"]
    assert [t.text for t in second.argv][0] == "meta-llama/Llama-3.1-8B"
    assert first.argv[0].line == 2  # the body's own line


def test_assignments_after_a_function_are_still_the_scripts(tmp_path):
    """A function's closing `}` alone on its line closes its block: the assignments after it are top-level."""
    script = tmp_path / "run.sh"
    script.write_text('log() {\n  echo "$1"\n}\nMODEL=Qwen/Qwen3-8B\nvllm serve "$MODEL" --port 8000\n')
    (run,) = find_workloads([str(script)])[1]
    assert [t.text for t in run.argv][0] == "Qwen/Qwen3-8B"


def test_a_function_called_from_main_runs_the_scripts_other_functions(tmp_path):
    """Batch s80 (Wyyyb/huayu_service_engine): `main` names vLLM (`check_command "vllm"`) and calls `start_server`,
    whose body builds the command in a variable: the functions main calls are the script's own."""
    script = tmp_path / "start.sh"
    script.write_text('MODEL_NAME="Qwen/Qwen3-8B"\ncheck_command() {\n  command -v $1 || exit 1\n}\n'
                      'start_server() {\n  CMD="vllm serve $MODEL_NAME --port 9001"\n  exec $CMD\n}\n'
                      'main() {\n  check_command "vllm"\n  start_server\n}\nmain "$@" ')
    (run,) = find_workloads([str(script)])[1]
    assert [t.text for t in run.argv] == ["Qwen/Qwen3-8B", "--port", "9001"]


def test_a_function_calling_itself_ends(tmp_path):
    script = tmp_path / "loop.sh"
    script.write_text("serve() {\n  vllm serve Qwen/Qwen3-8B\n  serve\n}\nserve\n")
    assert len(find_workloads([str(script)])[1]) == 1
