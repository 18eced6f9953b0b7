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


K8S_TASKS = """\
- name: Deploy vLLM
  kubernetes.core.k8s:
    state: present
    definition:
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: "{{ app_name }}"
      spec:
        selector: {matchLabels: {app: vllm}}
        template:
          metadata: {labels: {app: vllm}}
          spec:
            containers:
            - name: vllm
              image: vllm/vllm-openai:v0.25.1
              args: ["--model", "{{ model }}", "--swap-space", "4"]
              resources: {limits: {nvidia.com/gpu: 1}}
- name: Apply the service from a string
  k8s:
    definition: |
      apiVersion: v1
      kind: Pod
      metadata:
        name: vllm-pod
      spec:
        containers:
        - name: server
          image: vllm/vllm-openai:v0.25.1
          args:
          - --model
          - Qwen/Qwen3-8B
          - --disable-log-requests
"""


def test_a_k8s_task_definition_is_read_as_the_objects_it_applies(tmp_path):
    root = write_tree(tmp_path / "repo", {
        "roles/llm/tasks/main.yml": K8S_TASKS,
        "roles/llm/defaults/main.yml": "app_name: vllm-qwen\nmodel: Qwen/Qwen2.5-7B-Instruct\n",
    })
    deployment, pod = find_workloads([str(root)])[1]
    assert (deployment.kind, deployment.name, deployment.container) == ("Deployment", "vllm-qwen", "vllm")
    assert [t.text for t in deployment.argv][:2] == ["--model", "Qwen/Qwen2.5-7B-Instruct"]
    assert (pod.kind, pod.name, pod.container) == ("Pod", "vllm-pod", "server")
    result = {r.workload.name: r for r in scan([str(root)], tmp_path, gpu="A100").workloads}
    swap = [p for p in result["vllm-qwen"].placed if p.finding.rule_id == "KVD004"]
    assert swap and swap[0].location.line == 17  # the args line of the mapping definition
    refused = [p for p in result["vllm-pod"].placed if p.finding.rule_id == "KVD004"]
    assert refused and refused[0].location.line == 33  # the literal block keeps the file's lines


PLAYBOOK = """\
- hosts: gpu
  vars:
    vllm_image: vllm/vllm-openai:v0.25.1
  tasks:
    - name: Start vLLM
      ansible.builtin.shell: |
        docker run -d --gpus all --name vllm {{ vllm_image }} \\
          --model Qwen/Qwen3-8B --swap-space 8
    - name: Apply the manifest
      shell: |
        kubectl apply -f - <<EOF
        apiVersion: v1
        kind: Pod
        metadata:
          name: vllm-heredoc
        spec:
          containers:
          - name: vllm
            image: vllm/vllm-openai:v0.25.1
            args: ["--model", "Qwen/Qwen3-8B"]
        EOF
"""


def test_a_playbooks_shell_tasks_are_read_as_scripts_with_the_plays_vars(tmp_path):
    root = write_tree(tmp_path / "repo", {"deploy.yml": PLAYBOOK})
    workloads = {w.name: w for w in find_workloads([str(root)])[1]}
    run = workloads["deploy.yml"]  # a script's workload is named by its file
    assert run.image == "vllm/vllm-openai:v0.25.1"  # the play's vars rendered into the command
    assert any("the play's vars" in n for n in run.notes)
    pod = workloads["vllm-heredoc"]
    assert (pod.kind, pod.line) == ("Pod", 12)


def test_a_shell_task_that_installs_vllm_is_no_workload(tmp_path):
    root = write_tree(tmp_path / "repo", {"site.yml": "- hosts: all\n  tasks:\n  - shell: pip install vllm==0.8.5\n"})
    assert find_workloads([str(root)])[1] == []
