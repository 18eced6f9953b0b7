"""What a new user writes around the vLLM command: the release a script or a machine's boot commands pip-install
before running it, a Modal app's registry image and GPU object, cloud-init writing a systemd unit, and a launcher
named by its path (/usr/bin/env)."""

from __future__ import annotations

import textwrap

from scan_support import scan

from kvdoctor.scan.run import find_workloads


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_a_script_that_pip_installs_a_release_then_serves_runs_that_release(tmp_path):
    path = _write(tmp_path, "start.sh", """\
        #!/bin/bash
        uv pip install "vllm==0.10.1.1" --torch-backend=auto
        vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192
        """)
    (job,) = find_workloads([path])[1]
    assert (job.vllm_pin, job.vllm_pin_line) == ("0.10.1.1", 2)
    assert any("installed by the script before it runs" in note for note in job.notes)
    assert not any("unknown here" in note for note in job.notes)


def test_an_install_after_the_command_or_of_a_range_pins_nothing(tmp_path):
    path = _write(tmp_path, "start.sh", """\
        pip install "vllm>=0.9"
        vllm serve Qwen/Qwen2.5-7B-Instruct
        pip install vllm==0.9.2
        """)
    (job,) = find_workloads([path])[1]
    assert job.vllm_pin is None


def test_cloud_init_writing_a_systemd_unit_is_read_as_that_unit_with_the_release_runcmd_installs(tmp_path):
    path = _write(tmp_path, "cloud-init.yaml", """\
        #cloud-config
        write_files:
          - path: /etc/systemd/system/vllm.service
            content: |
              [Unit]
              Description=vLLM
              [Service]
              Environment=MODEL=Qwen/Qwen2.5-7B-Instruct
              ExecStart=/opt/venv/bin/vllm serve ${MODEL} --max-model-len 8192 --swap-space 4
              [Install]
              WantedBy=multi-user.target
        runcmd:
          - python3 -m venv /opt/venv
          - /opt/venv/bin/pip install vllm==0.9.2
          - systemctl enable --now vllm
        """)
    (job,) = scan([path], tmp_path, gpu=None).workloads
    assert job.workload.argv[0].text == "Qwen/Qwen2.5-7B-Instruct" and job.workload.line == 9
    assert job.report.facts["vllm.version"] == "0.9.2"
    assert any("a systemd unit in `content`" in note for note in job.workload.notes)


def test_a_modal_app_on_a_registry_image_with_a_gpu_object(tmp_path):
    path = _write(tmp_path, "batch.py", """\
        import modal

        N_GPU = 2
        image = modal.Image.from_registry("vllm/vllm-openai:v0.10.1.1", add_python="3.12").entrypoint([])
        app = modal.App("batch-infer")

        @app.cls(gpu=modal.gpu.A100(count=N_GPU, size="80GB"), image=image)
        class Model:
            @modal.enter()
            def load(self):
                from vllm import LLM
                self.llm = LLM(model="meta-llama/Llama-3.1-8B-Instruct", tensor_parallel_size=4)
        """)
    (job,) = scan([path], tmp_path, gpu=None).workloads
    assert (job.workload.image, job.workload.image_line) == ("vllm/vllm-openai:v0.10.1.1", 4)
    assert job.report.facts["vllm.version"] == "0.10.1.1"
    assert job.report.facts["gpu.name"] == "A100 80GB" and job.report.facts["deploy.gpu_limit"] == 2
    assert any(p.finding.rule_id == "KVD201" and p.finding.status == "fired" for p in job.placed)  # 2 GPUs < TP 4


def test_a_launcher_named_by_its_path_runs_vllm(tmp_path):
    path = _write(tmp_path, "vllm.service", """\
        [Service]
        ExecStart=/usr/bin/env HF_HOME=/data vllm serve meta-llama/Llama-3.2-3B-Instruct --port 9000
        """)
    (job,) = find_workloads([path])[1]
    # the environment env sets stays in front of the options, as for `VAR=value vllm serve`
    assert [t.text for t in job.argv][:2] == ["HF_HOME=/data", "meta-llama/Llama-3.2-3B-Instruct"]


def test_a_ray_serve_app_runs_the_release_its_runtime_env_pip_installs(tmp_path):
    path = _write(tmp_path, "rayservice.yaml", """\
        apiVersion: ray.io/v1
        kind: RayService
        metadata:
          name: llama-3-8b
        spec:
          serveConfigV2: |
            applications:
            - name: llm
              import_path: serve:model
              runtime_env:
                pip: ["vllm==0.5.4"]
                env_vars:
                  MODEL_ID: "meta-llama/Meta-Llama-3-8B-Instruct"
                  TENSOR_PARALLELISM: "2"
          rayClusterConfig:
            headGroupSpec:
              template:
                spec:
                  containers:
                  - name: ray-head
                    image: rayproject/ray-ml:2.33.0.914af0-py311
        """)
    (job,) = scan([path], tmp_path, gpu=None).workloads
    assert (job.workload.vllm_pin, job.workload.vllm_pin_line) == ("0.5.4", 11)  # the pip line
    assert job.report.facts["vllm.version"] == "0.5.4"


def test_a_skypilot_task_runs_the_release_its_setup_installs(tmp_path):
    path = _write(tmp_path, "serve.yaml", """\
        envs:
          MODEL_NAME: meta-llama/Meta-Llama-3.1-8B-Instruct
        resources:
          accelerators: L4:1
        setup: |
          pip install vllm==0.6.1.post2
        run: |
          vllm serve $MODEL_NAME --max-model-len 8192
        """)
    (job,) = scan([path], tmp_path, gpu=None).workloads
    assert (job.workload.vllm_pin, job.workload.vllm_pin_line) == ("0.6.1.post2", 6)
    assert job.report.facts["vllm.version"] == "0.6.1.post2"
