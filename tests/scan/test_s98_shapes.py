"""Stop 48 (issue 27), batch s98's shapes: every value option of docker run (a `--pids-limit 4096` had been read as
the image), and the launch script an Ansible copy task writes from its `content:`, its Jinja2 rendered with the role's
variables."""

from __future__ import annotations

from scan_support import scan


def test_every_docker_run_value_option_takes_its_value(tmp_path):
    (tmp_path / "run.sh").write_text(
        "#!/bin/bash\ndocker run --gpus all --security-opt no-new-privileges --pids-limit 4096 "
        "--health-interval 30s --memory-swappiness 0 vllm/vllm-openai:v0.25.1 "
        "--model Qwen/Qwen2.5-3B-Instruct --max-model-len 4096\n")
    (result,) = scan([str(tmp_path / "run.sh")], tmp_path, gpu="H100").workloads
    assert result.workload.image == "vllm/vllm-openai:v0.25.1"
    assert not [p for p in result.placed if p.finding.rule_id == "KVD004"]


ROLE_TASKS = """\
- name: Create vLLM serve convenience script
  copy:
    dest: /usr/local/bin/vllm-serve
    content: |
      #!/bin/bash
      docker run --rm --gpus all \\
        -e VLLM_FLASH_ATTN_VERSION={{ vllm_flash_attn_version }} \\
        -p {{ vllm_host_port }}:8000 \\
        {{ vllm_image }} \\
        --model Qwen/Qwen2.5-3B-Instruct --max-modle-len 4096
    mode: '0755'
"""


def test_an_ansible_copy_task_writes_a_launch_script_read_with_the_roles_variables(tmp_path):
    role = tmp_path / "roles" / "vllm"
    (role / "tasks").mkdir(parents=True)
    (role / "defaults").mkdir()
    (role / "tasks" / "main.yml").write_text(ROLE_TASKS)
    (role / "defaults" / "main.yml").write_text(
        'vllm_flash_attn_version: "2"\nvllm_host_port: 8001\nvllm_image: "vllm/vllm-openai:v0.25.1"\n')
    (result,) = scan([str(role)], tmp_path, gpu="H100").workloads
    assert result.workload.image == "vllm/vllm-openai:v0.25.1"
    assert any("copy: the script it writes" in note for note in result.workload.notes)
    (kvd004,) = [p for p in result.placed if p.finding.rule_id == "KVD004"]
    assert "--max-modle-len" in kvd004.finding.title and "{{" not in kvd004.finding.title


def test_a_template_comparing_a_value_set_elsewhere_is_read_not_refused(tmp_path):
    (tmp_path / "launch.sh.j2").write_text(
        "#!/bin/bash\npython3 -m vllm.entrypoints.openai.api_server \\\n    --model {{ VLLM_MODEL }} \\\n"
        "{% if VLLM_TENSOR_PARALLEL_SIZE > 1 %}\n    --tensor-parallel-size {{ VLLM_TENSOR_PARALLEL_SIZE }} \\\n"
        "{% endif %}\n    --port 8000\n")
    report = scan([str(tmp_path / "launch.sh.j2")], tmp_path, gpu="H100")
    assert not report.unread and len(report.workloads) == 1
