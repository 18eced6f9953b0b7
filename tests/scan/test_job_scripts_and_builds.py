"""Shapes of manifest batches s65 and s66 (stop 41), each a mechanism: a folder walk reads batch-scheduler job files
(.slurm, .sbatch, ...) and shell scripts without a suffix that name vLLM; NERSC's Shifter runs the command after its
options with --image as the image; a container init (`dumb-init --`) runs the rest; a Compose service that builds its
image runs the Dockerfile's command; a Job's generateName names it; `sys.executable -m vllm.entrypoints...` in a Python
app is the app's interpreter running vLLM; a project's pin (pyproject.toml) names the release a script's vLLM is."""

from __future__ import annotations

import os

from scan_support import write_tree

from kvdoctor.scan.run import read_manifests

SLURM = """\
#!/bin/bash
#SBATCH --image=vllm/vllm-openai:v0.25.1
SHIFTER_IMAGE=vllm/vllm-openai:v0.25.1
srun shifter --env=X=1 --image=$SHIFTER_IMAGE \\
     python3 -m vllm.entrypoints.openai.api_server \\
     --model Qwen/Qwen3-8B --swap-space 4
"""


def test_a_walk_reads_slurm_job_files_and_shifter_runs_the_command_with_its_image(tmp_path):
    root = write_tree(tmp_path / "repo", {"jobs/vllm_server.slurm": SLURM, "jobs/notes.slurm": "#!/bin/bash\necho hi\n"})
    files, found, notes, unread = read_manifests([str(root)])
    (job,) = found
    assert (job.container, job.image) == ("shifter", "vllm/vllm-openai:v0.25.1")
    assert [t.text for t in job.argv] == ["--model", "Qwen/Qwen3-8B", "--swap-space", "4"]
    assert not any(f.endswith("notes.slurm") for f in files)  # a job file that names no vLLM is not read


def test_a_walk_reads_a_shell_script_without_a_suffix(tmp_path):
    root = write_tree(tmp_path / "repo", {"bin/serve": "#!/usr/bin/env bash\nvllm serve Qwen/Qwen3-8B --port 8000\n",
                                          "bin/README": "vllm serve is run by bin/serve\n"})  # fmt: skip
    (script,) = read_manifests([str(root)])[1]
    assert script.file.endswith("bin/serve")


DOCKERFILE = """\
FROM python:3.12-slim
RUN pip install vllm==0.25.1
ENTRYPOINT ["dumb-init", "--"]
CMD ["uv", "run", "vllm", "serve", "Qwen/Qwen2.5-1.5B-Instruct"]
"""
COMPOSE = """\
services:
  vllm-tester:
    build:
      context: ./vllm/
      dockerfile: ./Dockerfile
    deploy:
      resources:
        reservations:
          devices: [{driver: nvidia, count: 1, capabilities: [gpu]}]
"""


def test_a_compose_service_that_builds_its_image_runs_the_dockerfiles_command_after_its_init(tmp_path):
    # batch s66 (liangwp/test-vllm)
    root = write_tree(tmp_path / "repo", {"docker-compose.yml": COMPOSE, "vllm/Dockerfile": DOCKERFILE})
    (service,) = read_manifests([str(root)])[1]  # the Dockerfile is read through the service, not alone
    assert (service.name, service.platform, service.gpu_limit) == ("vllm-tester", "compose", 1)
    assert [t.text for t in service.argv] == ["Qwen/Qwen2.5-1.5B-Instruct"]


def test_a_job_named_by_generate_name(tmp_path):
    job = ("apiVersion: batch/v1\nkind: Job\nmetadata:\n  generateName: vllm-gptoss-\nspec:\n  template:\n    spec:\n"
           "      containers:\n      - name: vllm\n        image: vllm/vllm-openai:v0.25.1\n"
           "        args: [--model, openai/gpt-oss-20b]\n")
    (workload,) = read_manifests([str(write_tree(tmp_path / "repo", {"job.yaml": job}))])[1]
    assert workload.name == "vllm-gptoss-"


def test_sys_executable_running_vllms_server_in_a_python_app(tmp_path):
    # batch s66 (AJ23CodeBreaker/project-aura modal_vllm.py)
    app = ('import subprocess, sys\nimport modal\napp = modal.App("aura")\n\n@app.function(gpu="H100")\ndef serve():\n'
           '    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "Qwen/Qwen3-8B"]\n'
           '    subprocess.Popen(cmd)\n')
    (workload,) = read_manifests([str(write_tree(tmp_path / "repo", {"modal_vllm.py": app}))])[1]
    assert [t.text for t in workload.argv] == ["--model", "Qwen/Qwen3-8B"] and workload.gpu_limit == 1


def test_a_projects_pin_names_the_release_of_a_script_run_by_the_hosts_python(tmp_path):
    # batch s61 (ajdsouz/vllm_server): init_server.sh beside a pyproject.toml pinning vllm==0.16.0
    root = write_tree(tmp_path / "repo", {
        "pyproject.toml": '[project]\nname = "x"\ndependencies = [\n\t"vllm==0.16.0",\n]\n',
        "scripts/init_server.sh": "#!/bin/bash\nvllm serve Qwen/Qwen3-8B --enable-reasoning\n",
    })
    os.mkdir(root / ".git")
    (script,) = read_manifests([str(root)])[1]
    assert script.vllm_pin == "0.16.0"
    assert script.where(script.vllm_pin_line) == (str((root / "pyproject.toml").resolve()), 4)


def test_no_pin_is_taken_from_outside_the_checkout_or_from_a_range(tmp_path):
    root = write_tree(tmp_path / "repo", {"requirements.txt": "vllm>=0.16.0\n", "serve.sh": "vllm serve Qwen/Qwen3-8B\n"})
    os.mkdir(root / ".git")
    (script,) = read_manifests([str(root)])[1]
    assert script.vllm_pin is None



def test_the_script_that_builds_the_activated_venv_names_the_release(tmp_path):
    # batch s134 (vitthal-bhandari/benchmarking-code-llms): a Slurm job activates .venv, which install_venv.sh creates
    # with `uv venv` and fills with `pip install "vllm==0.21.0"`; a venv no script creates, or two pins, name nothing
    job = "#!/bin/bash\n#SBATCH --gpus=1\ncd $PROJECT_DIR\nsource .venv/bin/activate\nvllm serve Qwen/Qwen3-8B\n"
    installer = ('#!/bin/bash\nuv venv --python 3.11 --seed .venv\nsource .venv/bin/activate\n'
                 'uv pip install "vllm==0.21.0" --only-binary=:all:\n')
    root = write_tree(tmp_path / "repo", {"scripts/serve.slurm": job, "scripts/install_venv.sh": installer})
    os.mkdir(root / ".git")
    (script,) = read_manifests([str(root / "scripts" / "serve.slurm")])[1]
    assert script.vllm_pin == "0.21.0"
    assert script.where(script.vllm_pin_line) == (str((root / "scripts" / "install_venv.sh").resolve()), 4)
    other = write_tree(tmp_path / "other", {"serve.slurm": job.replace(".venv/", "env/"), "install.sh": installer})
    os.mkdir(other / ".git")
    assert read_manifests([str(other / "serve.slurm")])[1][0].vllm_pin is None
    two = write_tree(tmp_path / "two", {"serve.slurm": job, "install.sh": installer,
                                        "install_new.sh": installer.replace("0.21.0", "0.23.1")})
    os.mkdir(two / ".git")
    assert read_manifests([str(two / "serve.slurm")])[1][0].vllm_pin is None

BUILT_COMMAND = """\
#!/bin/bash
: ${MODEL_PATH:="Qwen/Qwen2.5-72B-Instruct"}
: ${MAX_MODEL_LEN:=131072}
: ${TRUST_REMOTE_CODE:="false"}
main() {
    local vllm_cmd="vllm serve \\"$MODEL_PATH\\""
    vllm_cmd+=" --async-scheduling"
    [[ -n "$MAX_MODEL_LEN" ]] && vllm_cmd+=" --max-model-len \\"$MAX_MODEL_LEN\\""
    [[ -n "$UNSET_IN_THE_SCRIPT" ]] && vllm_cmd+=" --max-num-seqs \\"$UNSET_IN_THE_SCRIPT\\""
    [[ "$TRUST_REMOTE_CODE" == "true" ]] && vllm_cmd+=" --trust-remote-code"
    eval "$vllm_cmd &"
}
if main; then
    exit 0
fi
"""


def test_a_command_line_built_piece_by_piece_and_run_by_eval(tmp_path):
    # batch s66 (khaledbenmachiche/slurm_jobs_pfe): `: ${X:=default}`, `+=` after decided tests, eval, `if main`
    (script,) = read_manifests([str(write_tree(tmp_path / "repo", {"serve.sh": BUILT_COMMAND}))])[1]
    assert [t.text for t in script.argv] == ["Qwen/Qwen2.5-72B-Instruct", "--async-scheduling", "--max-model-len",
                                             "131072"]  # fmt: skip


def test_a_command_held_in_a_variable_is_not_mistaken_for_the_launch(tmp_path):
    text = '#!/bin/bash\nMODEL=Qwen/Qwen3-8B\nCMD="vllm serve $MODEL --port 8000"\nexec $CMD\n'
    (script,) = read_manifests([str(write_tree(tmp_path / "repo", {"serve.sh": text}))])[1]
    assert [t.text for t in script.argv] == ["Qwen/Qwen3-8B", "--port", "8000"]


LAUNCHER = """\
#!/bin/bash
if [ $# -lt 2 ]; then
  echo "usage: $0 <container_name> <model_id> [extra vllm serve args...]" >&2
  exit 1
fi
NAME="$1"
MODEL="$2"
shift 2
docker run --gpus all --name "$NAME" vllm/vllm-openai:v0.25.1 \\
  --model "$MODEL" --tensor-parallel-size 8 "$@"
"""


def test_a_script_run_with_arguments_is_read_with_them_and_not_alone(tmp_path):
    # batch s68 (kenzhangwangshu/b300_benchmark): a per-model wrapper runs the repository's launcher
    root = write_tree(tmp_path / "repo", {
        "scripts/launch_server.sh": LAUNCHER,
        "scripts/serve_kimi.sh": "#!/bin/bash\nexec bash ~/bench/scripts/launch_server.sh kimi nvidia/Kimi-K2.5-NVFP4 "
                                 "--quantization modelopt_fp4 --swap-space 4\n",
    })  # fmt: skip
    (served,) = read_manifests([str(root)])[1]  # the launcher's own reading ($1, $2 unknown) is not kept beside it
    assert (served.name, served.container, served.image) == ("serve_kimi.sh", "kimi", "vllm/vllm-openai:v0.25.1")
    assert [t.text for t in served.argv] == ["--model", "nvidia/Kimi-K2.5-NVFP4", "--tensor-parallel-size", "8",
                                             "--quantization", "modelopt_fp4", "--swap-space", "4"]  # fmt: skip
    assert served.file.endswith("launch_server.sh")  # findings point at the launcher's lines
