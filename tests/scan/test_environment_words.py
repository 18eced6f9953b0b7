"""Words a launch file leaves to the environment it runs in (issue 27, batches s107-s109): an unquoted `$OPTS` in a
SkyPilot / dstack / Ray job command is split into words as the shell splits it; `${VAR:-}` of a variable the file does
not set is unknown, not an empty word; an option whose name a variable gives (`"--${arg_name}"`, built in a loop over
the environment) is not judged; a python found at run time (`$(command -v python3)`) still runs vLLM's module; and
production-stack values nested under an umbrella chart's key for the subchart are read."""

from __future__ import annotations

from scan_support import scan


def _fired(result) -> set[str]:
    return {p.finding.rule_id for p in result.placed if p.finding.status == "fired"}


def test_a_skypilot_commands_unquoted_options_variable_is_split_into_words(tmp_path):
    (tmp_path / "task.yaml").write_text(
        "name: benched\nresources:\n  accelerators: L4:4\nenvs:\n  MODEL: Qwen/Qwen2.5-Coder-32B-Instruct\n"
        "  SERVE_OPTS: \"-tp 4\"\nrun: |\n  vllm serve $SERVE_OPTS --max-model-len 31120 $MODEL\n")
    (result,) = scan([str(tmp_path / "task.yaml")], tmp_path).workloads
    assert [t.text for t in result.workload.argv][:2] == ["-tp", "4"]
    assert not {"KVD004", "KVD202"} & _fired(result)  # -tp is vLLM's; 4 GPUs for tensor-parallel 4


def test_an_empty_default_of_a_variable_the_script_does_not_set_is_unknown_not_empty(tmp_path):
    (tmp_path / "start.sh").write_text(
        '#!/bin/bash\nMODEL="${MODEL_ID:-${MODEL_NAME:-}}"\n'
        'exec python -m vllm.entrypoints.openai.api_server --model "$MODEL" --port 8000\n')
    (result,) = scan([str(tmp_path / "start.sh")], tmp_path).workloads
    assert "KVD004" not in _fired(result)  # was: `--model ''`, "argument --model: expected one argument"
    assert result.workload.argv[1].text == "$MODEL"  # read as the environment's, unknown here


def test_an_option_named_by_a_variable_is_not_judged_and_is_named(tmp_path):
    (tmp_path / "serve").write_text(
        '#!/bin/bash\nARGS=(--port 8080)\nwhile IFS="=" read -r key value; do\n'
        '    arg_name=$(echo "${key#SM_VLLM_}" | tr "[:upper:]" "[:lower:]" | tr "_" "-")\n'
        '    ARGS+=("--${arg_name}")\n    ARGS+=("$value")\ndone < <(env | grep "^SM_VLLM_")\n'
        'exec python3 -m vllm.entrypoints.openai.api_server "${ARGS[@]}"\n')
    (result,) = scan([str(tmp_path / "serve")], tmp_path).workloads
    assert "KVD004" not in _fired(result)
    assert any("named by a variable" in note for note in result.report.notes)


def test_a_python_the_script_finds_at_run_time_runs_vllms_module(tmp_path):
    (tmp_path / "run_vllm.sh").write_text(
        '#!/usr/bin/env bash\nPYTHON_BIN="/opt/vllm/venv/bin/python"\nif [[ ! -x "${PYTHON_BIN}" ]]; then\n'
        '  PYTHON_BIN="$(command -v python3)"\nfi\n'
        'exec "${PYTHON_BIN}" -m vllm.entrypoints.openai.api_server --model m --tensor-parallel-size 2\n')
    (result,) = scan([str(tmp_path / "run_vllm.sh")], tmp_path).workloads
    assert [t.text for t in result.workload.argv][:3] == ["--model", "m", "--tensor-parallel-size"]


def test_production_stack_values_under_a_subcharts_key_are_read(tmp_path):
    (tmp_path / "values.yaml").write_text(
        "vllm-stack:\n  servingEngineSpec:\n    modelSpec:\n      - name: mistral\n"
        "        repository: vllm/vllm-openai\n        tag: v0.10.2\n"
        "        modelURL: RedHatAI/Mistral-7B-Instruct-v0.3-FP8\n        requestGPU: 1\n"
        "        vllmConfig:\n          maxModelLen: 8192\n          tensorParallelSize: 2\n")
    (result,) = scan([str(tmp_path / "values.yaml")], tmp_path).workloads
    assert (result.workload.kind, result.workload.name) == ("modelSpec", "mistral")
    assert "KVD201" in _fired(result)  # tensor-parallel 2 on the 1 GPU requested
