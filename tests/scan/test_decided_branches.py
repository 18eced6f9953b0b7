"""Batch s72 (stop 42): an `if`/`elif`/`else` chain the script's own values decide runs one branch, as the shell would
(`[[ $MODEL == *"VL"* ]]` is a pattern match, `[[ A ]] || [[ B ]]` a list); a flag appended (`CMD+=" --x"`) under
a test nothing decides is left out, the command staying known; a systemd unit's ExecStart that runs the repository's
script where it is installed (/opt/app/scripts/start.sh) is read from the checkout's scripts/start.sh."""

from __future__ import annotations

from scan_support import write_tree

from kvdoctor.scan.command import _test_holds
from kvdoctor.scan.run import read_manifests

CHAIN = """\
#!/usr/bin/env bash
MODEL="Qwen3-30B-A3B-Thinking-2507"
EXTRA_ARGS=""
if [[ $MODEL == *"VL"* ]]; then
    EXTRA_ARGS="--max-model-len 32768 --tensor-parallel-size 2"
elif [[ $MODEL == *"235B"* ]] || [[ $MODEL == *"72B"* ]]; then
    EXTRA_ARGS="--quantization awq --tensor-parallel-size 8"
elif [[ $MODEL == *"30B"* ]]; then
    EXTRA_ARGS="--tensor-parallel-size 4"
else
    EXTRA_ARGS="--tensor-parallel-size 1"
fi
vllm serve "/models/$MODEL" $EXTRA_ARGS
"""


def test_pattern_tests_and_test_lists_are_decided_as_bash_decides_them():
    values = {"MODEL": "Qwen3-VL-8B", "MODE": "serve"}
    assert _test_holds('[[ $MODEL == *"VL"* ]]; then', values) is True
    assert _test_holds("[[ $MODEL == Qwen3-* ]]", values) is True
    assert _test_holds('[[ $MODEL == "Qwen3-*" ]]', values) is False  # quoted: literal
    assert _test_holds('[[ $MODEL != *"VL"* ]]', values) is False
    assert _test_holds('[[ $MODE == x ]] || [[ $MODEL == *8B ]]', values) is True
    assert _test_holds('[[ $MODE == serve ]] && [[ $OTHER == y ]]', values) is None  # OTHER unknown
    assert _test_holds('[[ $MODE == x ]] && [[ $OTHER == y ]]', values) is False


def test_a_chain_the_values_decide_is_one_workload_with_its_branch(tmp_path):
    root = write_tree(tmp_path / "repo", {"serve_vllm.sh": CHAIN})
    (workload,) = read_manifests([str(root / "serve_vllm.sh")])[1]
    assert [t.text for t in workload.argv][-2:] == ["--tensor-parallel-size", "4"]


def test_a_chain_nothing_decides_is_one_workload_per_branch(tmp_path):
    root = write_tree(tmp_path / "repo", {"serve_vllm.sh": CHAIN.replace('MODEL="Qwen3-30B-A3B-Thinking-2507"',
                                                                         'MODEL="$1"')})  # fmt: skip
    assert len(read_manifests([str(root / "serve_vllm.sh")])[1]) == 4


def test_a_flag_appended_under_an_undecided_test_is_left_out(tmp_path):
    script = """\
#!/bin/bash
VLLM_CMD="vllm serve Qwen/Qwen3-8B"
VLLM_CMD+=" --port 8000"
if [ "$ASYNC_SCHEDULING" = "true" ]; then
    VLLM_CMD+=" --async-scheduling"
fi
exec $VLLM_CMD
"""
    root = write_tree(tmp_path / "repo", {"start.sh": script})
    (workload,) = read_manifests([str(root / "start.sh")])[1]
    assert [t.text for t in workload.argv] == ["Qwen/Qwen3-8B", "--port", "8000"]


def test_a_unit_running_the_repositorys_script_where_it_is_installed_reads_the_checkouts_copy(tmp_path):
    unit = "[Service]\nExecStart=/opt/agent/scripts/start_vllm.sh\n"
    script = "#!/bin/bash\nexec vllm serve Qwen/Qwen3-8B --max-model-len 8192\n"
    root = write_tree(tmp_path / "repo", {"config/vllm.service": unit, "scripts/start_vllm.sh": script})
    (workload,) = read_manifests([str(root / "config" / "vllm.service")])[1]
    assert workload.file.endswith("scripts/start_vllm.sh") and workload.argv[0].text == "Qwen/Qwen3-8B"


def test_optional_additions_under_tests_of_presence_give_one_workload(tmp_path):
    script = """\
#!/usr/bin/env bash
additional_args=${EXTRA_ARGS:-""}
if [[ -n "$QUANTIZATION" ]]; then
    additional_args="$additional_args -q $QUANTIZATION"
fi
if [[ -n "$MAX_MODEL_LEN" ]]; then
    additional_args="$additional_args --max-model-len $MAX_MODEL_LEN"
fi
python3 -m vllm.entrypoints.openai.api_server --model "$MODEL" $additional_args
"""
    root = write_tree(tmp_path / "repo", {"entrypoint.sh": script})
    assert len(read_manifests([str(root / "entrypoint.sh")])[1]) == 1


def test_a_command_line_held_in_a_variable_with_its_env_in_front_and_trimmed_values(tmp_path):
    script = """\
model_path=${1:-"hf:Qwen/Qwen3-8B"}
gpu_ids=${3:-"0,1"}
n_gpus=$((1 + $(echo ${gpu_ids} | grep -o "," | wc -l)))
if [[ ${model_path} == hf:* ]]; then
  model_path=${model_path#hf:}
fi
cmd="CUDA_VISIBLE_DEVICES=${gpu_ids} vllm serve ${model_path} --tensor-parallel-size ${n_gpus}"
eval $cmd
"""
    root = write_tree(tmp_path / "repo", {"serve.sh": script})
    (workload,) = read_manifests([str(root / "serve.sh")])[1]
    assert "Qwen/Qwen3-8B" in [t.text for t in workload.argv]


def test_setsid_after_the_commands_env_runs_the_rest(tmp_path):
    root = write_tree(tmp_path / "repo", {"s.sh": 'CUDA_VISIBLE_DEVICES=0 setsid nohup vllm serve "Qwen/Qwen3-8B" &\n'})
    (workload,) = read_manifests([str(root / "s.sh")])[1]
    assert "Qwen/Qwen3-8B" in [t.text for t in workload.argv]


def test_a_branch_value_beside_one_from_a_commands_output_is_no_variant(tmp_path):
    script = """\
#!/usr/bin/env bash
if command -v nvidia-smi &>/dev/null; then
    export NUM_GPU=$(nvidia-smi -L | wc -l)
else
    export NUM_GPU=0
fi
python3 -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-8B --tensor-parallel-size $NUM_GPU
"""
    root = write_tree(tmp_path / "repo", {"entrypoint.sh": script})
    (workload,) = read_manifests([str(root / "entrypoint.sh")])[1]
    assert workload.argv[-1].text == "$NUM_GPU"  # not the else branch's 0: which branch runs is the machine's
