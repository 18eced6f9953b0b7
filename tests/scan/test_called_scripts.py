"""A task whose script runs a script file of its working directory: SkyPilot's `run: bash scripts/serve.sh` (SkyPilot
syncs `workdir` to the cluster and runs `run` there: docs.skypilot.co, "YAML spec") and a dstack command `./serve.sh`
(run in the repository's folder). The vLLM command is read from that file with the task's envs, on the file's lines."""

from __future__ import annotations

from kvdoctor.scan.run import find_workloads
from scan_support import write_tree

TASK = """\
name: serve

envs:
  MODEL: Qwen/Qwen2.5-7B-Instruct
  MAX_HOURS: "8"

resources:
  accelerators: H100:2

workdir: .

setup: bash scripts/setup.sh

run: bash scripts/serve.sh
"""

SERVE = """\
#!/bin/bash
set -e
source ~/vllm-env/bin/activate
TP=2
timeout -k 30 $((MAX_HOURS * 3600)) vllm serve "$MODEL" \\
    --tensor-parallel-size $TP --max-model-len 8192
"""


def test_a_skypilot_run_that_runs_a_workdir_script_reads_its_vllm_serve_with_the_tasks_envs(tmp_path):
    tree = write_tree(tmp_path, {"serve.yaml": TASK, "scripts/serve.sh": SERVE,
                                 "scripts/setup.sh": "pip install vllm\n"})
    (task,) = find_workloads([str(tree / "serve.yaml")])[1]
    assert (task.kind, task.name, task.container, task.gpu_limit) == ("SkyPilot task", "serve", "run", 2)
    assert [t.text for t in task.argv] == ["Qwen/Qwen2.5-7B-Instruct", "--tensor-parallel-size", "2",
                                           "--max-model-len", "8192"]  # fmt: skip
    script = str(tree / "scripts" / "serve.sh")
    assert task.where(task.argv[0].line) == (script, 5) and task.where(task.argv[3].line) == (script, 6)
    assert any("scripts/serve.sh (line 14 runs it)" in n for n in task.notes)


def test_a_workdir_folder_and_a_dstack_command_running_a_script_file(tmp_path):
    task = TASK.replace("workdir: .", "workdir: app")
    tree = write_tree(tmp_path, {"sky/serve.yaml": task, "sky/app/scripts/serve.sh": SERVE,
                            "ds/.dstack.yml": "type: service\nname: qwen\nenv:\n  - MODEL=org/m\n  - MAX_HOURS=1\n"
                                              "commands:\n  - pip install vllm\n  - ./serve.sh\nport: 8000\n"
                                              "resources:\n  gpu: A100:2\n",
                            "ds/serve.sh": SERVE})  # fmt: skip
    (sky,) = find_workloads([str(tree / "sky" / "serve.yaml")])[1]
    assert sky.where(sky.argv[0].line)[0] == str(tree / "sky" / "app" / "scripts" / "serve.sh")
    (service,) = find_workloads([str(tree / "ds" / ".dstack.yml")])[1]
    assert (service.container, service.argv[0].text, service.gpu_limit) == ("commands", "org/m", 2)


def test_a_called_script_without_vllm_a_missing_one_or_a_host_path_is_no_workload(tmp_path):
    tree = write_tree(tmp_path, {"a/serve.yaml": TASK, "a/scripts/serve.sh": "python -m http.server 8000\n",
                            "b/serve.yaml": TASK,
                            "c/serve.yaml": TASK.replace("bash scripts/serve.sh", "bash /opt/serve.sh"),
                            "c/opt/serve.sh": SERVE})  # fmt: skip
    for folder in ("a", "b", "c"):
        assert find_workloads([str(tree / folder / "serve.yaml")])[1] == []


def test_timeout_before_vllm_serve_in_a_script_is_the_command_it_runs(tmp_path):
    tree = write_tree(tmp_path, {"run.sh": "timeout --signal=INT 2h vllm serve org/m --max-model-len 4096\n"})
    (script,) = find_workloads([str(tree / "run.sh")])[1]
    assert [t.text for t in script.argv] == ["org/m", "--max-model-len", "4096"]
    other = write_tree(tmp_path, {"other.sh": "timeout 60 python -m http.server\n"})
    assert find_workloads([str(other / "other.sh")])[1] == []


def test_a_bad_flag_in_the_called_script_is_one_line_at_that_files_line_exit_2(run_cli, tmp_path):
    tree = write_tree(tmp_path, {"serve.yaml": TASK, "scripts/serve.sh": SERVE.replace("8192", "8192 --dtype bf16")})
    result = run_cli("scan", str(tree / "serve.yaml"), "--no-compile")
    assert result.code == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"kvdoctor: error: {tree / 'scripts' / 'serve.sh'}:6:") and "--dtype" in line


def test_in_a_walk_the_called_script_is_read_through_the_task_not_alone(tmp_path):
    tree = write_tree(tmp_path, {"serve.yaml": TASK, "scripts/serve.sh": SERVE, "other.sh": "vllm serve org/other\n"})
    files, found, notes = find_workloads([str(tree)])
    assert sorted((w.kind, w.name) for w in found) == [("SkyPilot task", "serve"), ("script", "other.sh")]
    assert any(n.startswith(f"{tree / 'scripts' / 'serve.sh'}: read through SkyPilot task/serve") for n in notes)


def test_a_workflow_step_that_runs_a_repository_script_reads_it_with_the_steps_env_and_names_it_by_the_workflow(tmp_path):
    workflow = ("name: Deploy\non: push\njobs:\n  deploy:\n    runs-on: self-hosted\n    env:\n      MODEL: org/m\n"
                "    steps:\n      - uses: actions/checkout@v4\n      - run: ./deploy.sh\n        working-directory: ops\n")
    deploy = "#!/bin/bash\ndocker run -d --gpus 1 --name vllm vllm/vllm-openai:v0.25.1 --model $MODEL --max-model-len 4096\n"
    tree = write_tree(tmp_path, {".github/workflows/deploy.yml": workflow, "ops/deploy.sh": deploy})
    (run,) = find_workloads([str(tree / ".github/workflows/deploy.yml")])[1]
    assert (run.name, run.container, run.file) == ("Deploy / deploy", "vllm", str(tree / "ops" / "deploy.sh"))
    assert [t.text for t in run.argv][:2] == ["--model", "org/m"] and run.argv[0].line == 2
    assert any("run by the step at" in n and "./deploy.sh" in n for n in run.notes)
    files, found, notes = find_workloads([str(tree)])  # a walk: the script is read through the workflow only
    assert [(w.name, [t.text for t in w.argv][1]) for w in found] == [("Deploy / deploy", "org/m")]
