"""SkyPilot tasks: the `run:` script's vllm serve, with envs, the script's own assignments and the accelerators."""

from __future__ import annotations

from scan_support import scan

from kvdoctor.scan.run import find_workloads

TASK = """\
name: qwen-serve

resources:
  image_id: docker:vllm/vllm-openai:v0.25.1
  accelerators: H100:4

envs:
  MODEL_ID: Qwen/Qwen2.5-7B-Instruct
  VLLM_DTYPE: bfloat16

secrets:
  HF_TOKEN: ""

run: |
  set -e
  # the model's 'shards' follow the GPUs: one per GPU
  NUM_SHARDS=${SKYPILOT_NUM_GPUS_PER_NODE:-1}
  DTYPE=${VLLM_DTYPE:-float16}
  if [ "${DEBUG:-0}" = "1" ]; then
    DTYPE=float32
  fi
  LATER=$(hostname)
  vllm serve "${MODEL_ID}" \\
    --tensor-parallel-size "${NUM_SHARDS}" \\
    --dtype "${DTYPE}" \\
    --served-model-name "${LATER}" &
  wait
"""


def _task(tmp_path, text: str = TASK):
    path = tmp_path / "task.yaml"
    path.write_text(text)
    return path


def test_the_run_scripts_vllm_serve_is_read_with_envs_and_the_scripts_own_assignments(tmp_path):
    (task,) = find_workloads([str(_task(tmp_path))])[1]
    assert (task.kind, task.name, task.container, task.image) == ("SkyPilot task", "qwen-serve", "run",
                                                                  "vllm/vllm-openai:v0.25.1")  # fmt: skip
    # ${SKYPILOT_NUM_GPUS_PER_NODE} is the accelerators' count; the if-block's DTYPE and $(hostname) are not evaluated
    assert [t.text for t in task.argv][:5] == ["Qwen/Qwen2.5-7B-Instruct", "--tensor-parallel-size", "4", "--dtype",
                                               "bfloat16"]  # fmt: skip
    assert task.argv[-1].text == "${LATER}"
    assert task.argv[0].line == TASK.splitlines().index('  vllm serve "${MODEL_ID}" \\') + 1
    assert [(e.name, e.value) for e in task.env][-1] == ("HF_TOKEN", None)  # a secret: unknown here


def test_a_comment_before_the_command_does_not_hide_it(tmp_path):
    # the comment holds quotes; flattened, an unblanked comment swallowed the rest of the script
    assert find_workloads([str(_task(tmp_path))])[1]


def test_the_accelerators_name_the_gpu_and_its_count_is_compared(tmp_path):
    report = scan([str(_task(tmp_path, TASK.replace("H100:4", "H100:2")))], tmp_path, gpu=None)
    (task,) = report.workloads
    assert task.report.facts["gpu.name"] == "H100 80GB"
    assert task.report.facts["serve.tensor_parallel_size"] == 2  # NUM_SHARDS follows the count
    assert task.report.facts["deploy.gpu_limit"] == 2


def test_a_multi_node_task_does_not_compare_one_nodes_gpus(tmp_path):
    (task,) = find_workloads([str(_task(tmp_path, TASK.replace("name: qwen-serve", "name: x\nnum_nodes: 2")))])[1]
    assert task.gpu_limit is None and any("num_nodes 2" in n for n in task.notes)


def test_a_task_without_vllm_is_no_workload(tmp_path):
    text = "resources:\n  accelerators: L4:1\nrun: |\n  python train.py --epochs 3\n"
    assert find_workloads([str(_task(tmp_path, text))])[1] == []


def test_a_task_whose_run_starts_no_vllm_server_is_named_as_a_skypilot_task(tmp_path):
    # nebius-ps-services' qwen72b-bench-vllm.yaml runs `vllm bench latency`: was 'a chart's raw values?'
    from kvdoctor.scan.run import read_manifests

    text = ("name: bench\nresources:\n  image_id: docker:vllm/vllm-openai:v0.11.0\n  accelerators: H200:8\n"
            "run: |\n  vllm bench latency --model Qwen/Qwen2.5-72B-Instruct --input-len 32\n")  # fmt: skip
    _, found, notes, _ = read_manifests([str(_task(tmp_path, text))])
    assert found == [] and len(notes) == 1
    assert "SkyPilot task bench mentions vLLM, but its run script starts no vLLM server" in notes[0]
