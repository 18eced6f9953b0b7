"""An Ansible task that runs vLLM's container (scan/ansible_tasks.py): community.docker.docker_container's parameters
read as a Compose service's, their Jinja2 rendered with the role's variables (a real role's shape: manifest batch s56,
elmuz/catafalco roles/vllm/tasks/main.yml)."""

from __future__ import annotations

from scan_support import scan, write_tree

from kvdoctor.scan.run import find_workloads

TASKS = """\
---
- name: Create the configuration directory
  file:
    path: "{{ docker_dir }}/{{ vllm_container_name }}"
    state: directory

- name: Run vLLM
  block:
    - name: Ensure that vLLM container is created and running
      community.docker.docker_container:
        name: "{{ vllm_container_name }}"
        image: docker.io/vllm/vllm-openai:v0.25.1
        env:
          HUGGING_FACE_HUB_TOKEN: "{{ hugging_face_token }}"
          VLLM_ATTENTION_BACKEND: FLASHINFER
        command: >
          --model "{{ vllm_default_model }}"
          --gpu-memory-utilization 0.85
          --swap-space 4
        device_requests:
          - driver: nvidia
            count: 2
            capabilities: [gpu]
"""


def test_a_docker_container_task_is_a_workload_with_the_roles_values(tmp_path):
    root = write_tree(tmp_path / "repo", {
        "roles/vllm/tasks/main.yml": TASKS,
        "roles/vllm/defaults/main.yml": "vllm_container_name: vllm\nvllm_default_model: Qwen/Qwen2.5-7B-Instruct\n",
    })
    (task,) = find_workloads([str(root)])[1]
    assert (task.kind, task.name, task.container, task.platform) == ("Ansible docker_container", "vllm", "vllm",
                                                                     "ansible")  # fmt: skip
    assert (task.image, task.gpu_limit) == ("docker.io/vllm/vllm-openai:v0.25.1", 2)
    assert [t.text for t in task.argv][:2] == ["--model", "Qwen/Qwen2.5-7B-Instruct"]
    assert {e.name: e.value for e in task.env}["VLLM_ATTENTION_BACKEND"] == "FLASHINFER"
    (result,) = scan([str(root)], tmp_path, gpu="A100").workloads
    kvd004 = [p for p in result.placed if p.finding.rule_id == "KVD004"]
    assert kvd004 and kvd004[0].location.line == 19  # --swap-space: gone from 0.25.1's parser, at its own line


def test_a_task_list_without_a_container_task_is_no_workload(tmp_path):
    root = write_tree(tmp_path / "repo", {"roles/x/tasks/main.yml": "- name: install vllm\n  pip: {name: vllm}\n"})
    assert find_workloads([str(root)])[1] == []
