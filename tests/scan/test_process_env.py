"""The environment a vLLM process run by a script, a systemd unit, PM2 or supervisord inherits becomes the workload's
env: a script's exports before the command (not after it, not a plain assignment), a unit's Environment= and its
EnvironmentFile= (unknown values), and a placeholder left to fill in is unknown, never the value run."""

from __future__ import annotations

import textwrap

from scan_support import scan

from kvdoctor.scan.run import find_workloads


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def _env(path: str) -> dict:
    (job,) = find_workloads([path])[1]
    return {v.name: (v.value, v.line) for v in job.env}


def test_a_scripts_exports_before_the_command_reach_vllm_and_later_or_plain_ones_do_not(tmp_path):
    path = _write(tmp_path, "serve.sh", """\
        #!/bin/bash
        BACKEND=FLASHINFER
        export VLLM_ATTENTION_BACKEND=$BACKEND
        LOCAL_ONLY=1
        export VLLM_LOGGING_LEVEL
        vllm serve Qwen/Qwen2.5-0.5B-Instruct
        export VLLM_USE_V1=0
        """)
    env = _env(path)
    assert env["VLLM_ATTENTION_BACKEND"] == ("FLASHINFER", 3)
    assert env["VLLM_LOGGING_LEVEL"] == (None, 5)  # exported, its value is the caller's
    assert "LOCAL_ONLY" not in env and "VLLM_USE_V1" not in env


def test_an_exported_visible_devices_decides_the_gpu_count_and_a_placeholder_does_not(tmp_path):
    short = _write(tmp_path, "short.sh", """\
        export CUDA_VISIBLE_DEVICES=0,1
        vllm serve Qwen/Qwen2.5-0.5B-Instruct --tensor-parallel-size 4
        """)
    todo = _write(tmp_path, "todo.sh", """\
        export CUDA_VISIBLE_DEVICES=TODO ###
        vllm serve Qwen/Qwen2.5-0.5B-Instruct --tensor-parallel-size 4
        """)
    results = {r.workload.name: r for r in scan([short, todo], tmp_path, gpu=None).workloads}
    assert any(p.finding.rule_id == "KVD201" for p in results["short.sh"].placed)
    assert not any(p.finding.rule_id in ("KVD201", "KVD216") for p in results["todo.sh"].placed)


def test_a_docker_run_in_a_script_gets_only_its_own_env(tmp_path):
    path = _write(tmp_path, "run.sh", """\
        export VLLM_ATTENTION_BACKEND=FLASHINFER
        docker run --gpus all vllm/vllm-openai:v0.9.2 --model Qwen/Qwen2.5-0.5B-Instruct
        """)
    assert _env(path) == {}


def test_a_units_environment_and_environment_file_are_the_process_environment(tmp_path):
    path = _write(tmp_path, "vllm.service", """\
        [Service]
        ExecStart=/opt/venv/bin/vllm serve Qwen/Qwen2.5-0.5B-Instruct --tensor-parallel-size 4
        Environment="CUDA_VISIBLE_DEVICES=0,1" VLLM_ATTENTION_BACKEND=FLASHINFER
        EnvironmentFile=-/etc/vllm.env
        """)
    (job,) = find_workloads([path])[1]
    assert {v.name: (v.value, v.line) for v in job.env} == {"CUDA_VISIBLE_DEVICES": ("0,1", 3),
                                                             "VLLM_ATTENTION_BACKEND": ("FLASHINFER", 3)}
    assert job.env_from == ("EnvironmentFile /etc/vllm.env",)


def test_a_forced_backend_extending_a_known_name_on_a_host_vllm_is_a_forks_not_an_error(tmp_path):
    variant = _write(tmp_path, "variant.sh", """\
        export VLLM_ATTENTION_BACKEND=FLASH_ATTN_V100
        vllm serve Qwen/Qwen2.5-0.5B-Instruct
        """)
    typo = _write(tmp_path, "typo.sh", """\
        export VLLM_ATTENTION_BACKEND=FLASH_ATEN
        vllm serve Qwen/Qwen2.5-0.5B-Instruct
        """)
    results = {r.workload.name: r for r in scan([variant, typo], tmp_path, gpu="V100").workloads}
    assert not any(p.finding.rule_id == "KVD010" for p in results["variant.sh"].placed)
    assert any(p.finding.rule_id == "KVD010" for p in results["typo.sh"].placed)
