"""Launch shapes a platform team writes that the scan probes of stop 62 found unread: a Modal class building
vLLM's LLM with the model as its first argument (the older modal.Stub API), llm-d's ModelService (its model URI and
both roles), a Slurm job whose Shifter image is an #SBATCH directive, Replicate Cog's python_packages pin, PM2
ecosystem files, and JavaScript / TypeScript programs that are not read as YAML."""

from __future__ import annotations

import textwrap

from scan_support import scan

from kvdoctor.scan.run import find_workloads
from kvdoctor.vllm_pack.candidates import candidates


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_a_modal_stub_class_building_llm_with_a_positional_model_is_a_workload(tmp_path):
    path = _write(tmp_path, "app.py", """\
        import modal
        MODEL_NAME = "mistralai/Mistral-7B-Instruct-v0.2"
        image = modal.Image.debian_slim().pip_install("vllm==0.9.2")
        stub = modal.Stub("example-vllm", image=image)

        @stub.cls(gpu=modal.gpu.A100(count=1))
        class Model:
            @modal.enter()
            def load(self):
                from vllm import LLM
                self.llm = LLM(MODEL_NAME, tensor_parallel_size=1, max_model_len=8192)
        """)
    (job,) = find_workloads([path])[1]
    assert (job.name, job.container, job.vllm_pin) == ("example-vllm", "Model", "0.9.2")
    assert [t.text for t in job.argv] == ["mistralai/Mistral-7B-Instruct-v0.2", "--tensor-parallel-size", "1",
                                         "--max-model-len", "8192"]


def test_engine_args_built_from_a_mapping_are_still_not_read(tmp_path):
    path = _write(tmp_path, "app.py", """\
        from vllm import LLM
        kwargs = dict(model="m")
        llm = LLM(**kwargs)
        """)
    assert find_workloads([path])[1] == []


MODEL_SERVICE = """\
    apiVersion: llm-d.ai/v1alpha1
    kind: ModelService
    metadata:
      name: llama-3b
    spec:
      baseConfigMapRef:
        name: basic-gpu-preset
      modelArtifacts:
        uri: {uri}
      decode:
        replicas: 1
        containers:
        - name: vllm
          args: ["--max-model-len", "8192", "--kv-cache-dtype", "fp8"]
      prefill:
        replicas: 1
        containers:
        - name: vllm
          args: ["--max-model-len", "8192"]
    """


def test_a_model_service_serves_its_model_uri_in_both_roles_on_its_presets_image(tmp_path):
    path = _write(tmp_path, "ms.yaml", MODEL_SERVICE.format(uri="hf://meta-llama/Llama-3.2-3B-Instruct"))
    jobs = {w.name: w for w in find_workloads([path])[1]}
    assert set(jobs) == {"llama-3b-decode", "llama-3b-prefill"}
    for job in jobs.values():
        assert job.argv[0].text == "meta-llama/Llama-3.2-3B-Instruct"
        assert any("preset (baseConfigMapRef)" in note for note in job.notes)
        assert job.release_by == "the image of the llm-d preset basic-gpu-preset (baseConfigMapRef)"  # KVD217
    assert "--kv-cache-dtype" in [t.text for t in jobs["llama-3b-decode"].argv]


def test_a_model_service_on_a_volume_serves_a_path_unknown_here_never_vllms_default(tmp_path):
    path = _write(tmp_path, "ms.yaml", MODEL_SERVICE.format(uri="pvc://models/llama-3b"))
    for job in find_workloads([path])[1]:
        assert job.argv[0].text == "$(pvc://models/llama-3b)"
        assert any("a model path not known here" in note for note in job.notes)


def test_shifter_without_an_image_option_runs_the_image_of_the_sbatch_directive(tmp_path):
    path = _write(tmp_path, "job.sbatch", """\
        #!/bin/bash
        #SBATCH --nodes=1
        #SBATCH --gpus-per-node=4
        #SBATCH --image=docker:vllm/vllm-openai:v0.9.2
        shifter --module=gpu vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4
        """)
    (job,) = find_workloads([path])[1]
    assert (job.image, job.image_line, job.gpu_limit) == ("vllm/vllm-openai:v0.9.2", 4, 4)
    assert not any("unknown here" in note for note in job.notes)


def test_a_cog_projects_python_packages_pin_the_predictors_release(tmp_path):
    (tmp_path / ".git").mkdir()
    _write(tmp_path, "cog.yaml", """\
        build:
          gpu: true
          python_packages:
            - "torch==2.3.0"
            - "vllm==0.9.2"
        predict: "predict.py:Predictor"
        """)
    path = _write(tmp_path, "predict.py", """\
        from vllm import LLM
        class Predictor:
            def setup(self):
                self.llm = LLM(model="meta-llama/Meta-Llama-3-8B-Instruct", max_model_len=4096)
        """)
    report = scan([str(tmp_path)], tmp_path, gpu=None)
    (result,) = report.workloads
    assert result.workload.vllm_pin == "0.9.2"
    assert any(note.startswith("vLLM 0.9.2 from ") and "cog.yaml:5" in note for note in result.workload.notes)
    assert any("a Replicate Cog config" in note for note in report.notes)
    assert [path] == [result.workload.file]


def test_a_pm2_ecosystem_file_runs_each_apps_script_with_its_args_and_env(tmp_path):
    path = _write(tmp_path, "ecosystem.config.js", """\
        // pm2 start ecosystem.config.js
        module.exports = {
          apps: [
            {
              name: "vllm-qwen",
              script: "vllm",
              args: "serve Qwen/Qwen2.5-7B-Instruct --gpu-memory-utilization 0.85 --tensor-parallel-size 2",
              interpreter: "none",
              env: { CUDA_VISIBLE_DEVICES: "0,1", HF_HOME: process.env.HF_HOME },
            },
            { name: "web", script: "npm", args: "start" },
          ],
        };
        """)
    (job,) = find_workloads([path])[1]
    assert (job.kind, job.name, job.line) == ("PM2 app", "vllm-qwen", 7)
    assert [t.text for t in job.argv][:2] == ["Qwen/Qwen2.5-7B-Instruct", "--gpu-memory-utilization"]
    assert {e.name: e.value for e in job.env}.get("CUDA_VISIBLE_DEVICES") == "0,1"


def test_a_pm2_app_with_an_interpreter_and_an_argument_list(tmp_path):
    path = _write(tmp_path, "pm2.json", """\
        {"apps": [{"name": "api", "script": "-m", "interpreter": "/opt/venv/bin/python3",
                   "args": ["vllm.entrypoints.openai.api_server", "--model", "facebook/opt-125m"]}]}
        """)
    (job,) = find_workloads([path])[1]
    assert (job.name, [t.text for t in job.argv]) == ("api", ["--model", "facebook/opt-125m"])


def test_a_typescript_program_launching_vllm_is_named_not_read_as_yaml(tmp_path):
    """A program whose vLLM launch is no @pulumi/kubernetes object literal (a CDK construct) is named, never read as
    YAML; a Pulumi Deployment is read (tests/scan/test_s137_shapes.py)."""
    path = _write(tmp_path, "index.ts", """\
        import * as eks from "./constructs";
        new eks.VllmService(this, "vllm", { image: "vllm/vllm-openai:v0.9.2", args: ["--model", "m"] });
        """)
    _write(tmp_path, "client.ts", 'fetch("http://vllm:8000/v1/models")\n')
    report = scan([str(tmp_path)], tmp_path, gpu=None)
    assert report.unread == ()
    assert sum("a TypeScript program that names a vLLM launch" in note for note in report.notes) == 1
    alone = scan([path], tmp_path, gpu=None)  # given by name: named the same way, never "malformed YAML"
    assert alone.unread == () and any("a TypeScript program" in note for note in alone.notes)


def test_a_release_missing_from_the_pack_names_the_ones_read_in_its_series():
    assert "of its series kvdoctor read 0.9.0.1, 0.9.1, 0.9.2 (--vllm-version 0.9.2" in candidates("0.9.0").note
    assert "of its series" not in candidates("0.3.0").note


def test_a_workflow_step_using_a_local_composite_action_runs_its_steps_with_the_with_values(tmp_path):
    (tmp_path / ".git").mkdir()
    _write(tmp_path, ".github/actions/setup-vllm/action.yml", """\
        name: Setup vLLM
        inputs:
          model:
            default: facebook/opt-125m
          max-model-len:
            default: "4096"
        runs:
          using: composite
          steps:
            - shell: bash
              run: pip install vllm==0.10.2
            - shell: bash
              run: nohup vllm serve ${{ inputs.model }} --max-model-len ${{ inputs.max-model-len }} &
        """)
    workflow = _write(tmp_path, ".github/workflows/gpu.yml", """\
        name: gpu tests
        on: [workflow_dispatch]
        jobs:
          record:
            runs-on: [self-hosted, g6.2xlarge]
            steps:
              - uses: actions/checkout@v4
              - uses: ./.github/actions/setup-vllm
                with:
                  model: Qwen/Qwen3-0.6B
        """)
    (job,) = find_workloads([workflow])[1]
    assert job.name == "gpu tests / record" and job.file.endswith("action.yml")
    assert [t.text for t in job.argv] == ["Qwen/Qwen3-0.6B", "--max-model-len", "4096"]
    assert job.vllm_pin == "0.10.2"
    assert [(s.key, s.values) for s in job.gpu_selectors] == [("node.kubernetes.io/instance-type", ("g6.2xlarge",))]


def test_a_jobs_earlier_step_pins_the_release_its_later_step_runs(tmp_path):
    path = _write(tmp_path, "ci.yml", """\
        name: e2e
        on: [push]
        jobs:
          test:
            runs-on: ubuntu-latest
            steps:
              - run: pip install "vllm==0.9.2"
              - run: vllm serve Qwen/Qwen2.5-0.5B-Instruct &
          other:
            runs-on: ubuntu-latest
            steps:
              - run: vllm serve Qwen/Qwen2.5-0.5B-Instruct &
        """)
    jobs = {w.name: w for w in find_workloads([path])[1]}
    assert jobs["e2e / test"].vllm_pin == "0.9.2" and jobs["e2e / other"].vllm_pin is None
    assert jobs["e2e / test"].gpu_selectors == ()


def test_a_make_target_running_another_with_other_variables_is_a_workload_of_its_own(tmp_path):
    path = _write(tmp_path, "Makefile", """\
        IMAGE ?= vllm/vllm-openai:v0.9.2
        MODEL ?= Qwen/Qwen2.5-7B-Instruct

        run:
        \tdocker run -d --gpus all $(IMAGE) --model $(MODEL)

        run-small:
        \t$(MAKE) run MODEL=Qwen/Qwen2.5-1.5B-Instruct

        run-same:
        \t$(MAKE) run

        run-big: MODEL = Qwen/Qwen2.5-32B-Instruct-AWQ
        run-big: run
        """.replace("\\t", "\t"))
    jobs = {w.container: w for w in find_workloads([path])[1]}
    assert set(jobs) == {"run", "run-small", "run-big"}
    assert {name: w.argv[1].text for name, w in jobs.items()} == {
        "run": "Qwen/Qwen2.5-7B-Instruct", "run-small": "Qwen/Qwen2.5-1.5B-Instruct",
        "run-big": "Qwen/Qwen2.5-32B-Instruct-AWQ"}
    assert all(w.line == 5 for w in jobs.values())  # the words are those of run's recipe line
