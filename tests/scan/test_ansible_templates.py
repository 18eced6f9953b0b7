"""An Ansible role's template of a systemd unit (scan/ansible_templates.py): rendered with the role's defaults and
vars, then read as the unit it becomes, its lines where the template has them (a real role's shape: manifest batch
s53, karinehei/linux-vllm-infra-lab roles/vllm/templates/vllm.service.j2)."""

from __future__ import annotations

from kvdoctor.scan.run import find_workloads, read_manifests
from scan_support import write_tree

UNIT = """\
{#
  systemd unit for vLLM in a container
#}
[Unit]
Description=vLLM
{% if container_runtime | default('podman') == 'docker' %}
Requires=docker.service
{% endif %}

[Service]
{% if container_runtime | default('podman') == 'podman' %}
ExecStart=/usr/bin/podman run --name vllm --rm \\
  --device nvidia.com/gpu=all \\
  {{ vllm_image }} \\
  --model {{ vllm_model }} \\
  --max-model-len {{ vllm_max_model_len }} \\
  --tensor-parallel-size {{ vllm_tp }}{% for arg in vllm_extra_args %} \\
  {{ arg }}{% endfor %}
{% endif %}

[Install]
WantedBy=multi-user.target
"""


def test_a_role_template_is_rendered_with_its_defaults_and_vars_and_keeps_its_lines(tmp_path):
    root = write_tree(tmp_path / "repo", {
        "roles/vllm/templates/vllm.service.j2": UNIT,
        "roles/vllm/defaults/main.yml": "vllm_image: vllm/vllm-openai:v0.6.3\nvllm_model: Qwen/Qwen2.5-7B-Instruct\n"
                                        "vllm_max_model_len: 4096\nvllm_extra_args: [--enforce-eager]\n",
        "roles/vllm/vars/main.yml": "vllm_image: vllm/vllm-openai:v0.25.1\n",
    })
    _, (served,), notes = find_workloads([str(root)])
    assert served.image == "vllm/vllm-openai:v0.25.1"  # vars/main.yml over defaults/main.yml, as Ansible orders them
    words = [t.text for t in served.argv]
    assert words[words.index("--model") + 1] == "Qwen/Qwen2.5-7B-Instruct" and "--enforce-eager" in words
    assert words[words.index("--tensor-parallel-size") + 1] == "${vllm_tp}"  # set elsewhere: unknown here
    assert served.argv[words.index("--max-model-len")].line == 16  # the taken branch keeps the template's lines
    assert any("a Jinja2 template, rendered with its role's variables" in n for n in notes)


def test_a_template_jinja_refuses_is_reported_on_its_own(tmp_path):
    root = write_tree(tmp_path / "repo", {"roles/vllm/templates/vllm.service.j2": "[Service]\n{% if %}\nExecStart=x\n"})
    (unread,) = read_manifests([str(root)])[3]
    assert "vllm.service.j2:2: Jinja2 template not rendered" in unread.message


def test_a_roles_deployment_and_script_templates_are_read_as_yaml_and_a_script(tmp_path):
    root = write_tree(tmp_path / "repo", {
        "roles/llm/templates/deployment.yaml.j2": """apiVersion: apps/v1
kind: Deployment
metadata: {name: "{{ app_name }}"}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: "vllm/vllm-openai:{{ vllm_tag }}"
        args: ["--model", "{{ model }}", "--tensor-parallel-size", "{{ tp | default(1) }}"]
        resources: {limits: {nvidia.com/gpu: "{{ gpus }}"}}
""",
        "roles/llm/templates/serve.sh.j2": "vllm serve {{ model }} --max-model-len {{ max_len }}\n",
        "roles/llm/defaults/main.yaml": "app_name: qwen\nvllm_tag: v0.25.1\nmodel: Qwen/Qwen3-8B\ngpus: 2\n"
                                        "max_len: 8192\n",
        "chat_template.jinja": "{% for m in messages %}{{ m['content'] }}{% endfor %}",  # a chat template: not read
    })
    files, workloads, _ = find_workloads([str(root)])
    deployment = next(w for w in workloads if w.kind == "Deployment")
    assert (deployment.name, deployment.image, deployment.gpu_limit) == ("qwen", "vllm/vllm-openai:v0.25.1", 2)
    assert [t.text for t in deployment.argv][:4] == ["--model", "Qwen/Qwen3-8B", "--tensor-parallel-size", "1"]
    script = next(w for w in workloads if w.kind != "Deployment")
    assert [t.text for t in script.argv] == ["Qwen/Qwen3-8B", "--max-model-len", "8192"]
    assert not any(f.endswith("chat_template.jinja") for f in files)


def test_a_job_script_that_is_a_jinja_template_renders_its_blocks_in_place(tmp_path):
    """A real job template's shape (manifest batch s55, princeton-ddss/blackfish text_generation_slurm.sh): a `.sh`
    whose lines open with `{% extends %}` / `{% block %}` and whose values are the launching program's."""
    script = tmp_path / "text_generation_slurm.sh"
    script.write_text('{% extends "base_slurm.sh" %}\n{% block command %}\n'
                      "apptainer run {{ '--nv' if job_config.gres else '' }} \\\n"
                      "  --bind {{ container_config.model_dir }}:/data \\\n"
                      "  {{ profile.cache_dir }}/images/vllm-openai_v0.20.0.sif \\\n"
                      "  --model /data/model \\\n  --tensor-parallel-size {{ job_config.gres }}\n{%- endblock %}\n")
    (run,) = find_workloads([str(script)])[1]
    words = [t.text for t in run.argv]
    assert words[:2] == ["--model", "/data/model"] and words[3] == "${job_config.gres}"  # the program's value: unknown here
    assert run.argv[0].line == 6
    plain = tmp_path / "plain.sh"
    plain.write_text('echo "${x%}"\nvllm serve m --port 8000\n')  # a shell's own `%}` is no template
    (served,) = find_workloads([str(plain)])[1]
    assert [t.text for t in served.argv] == ["m", "--port", "8000"]


def test_a_role_template_is_rendered_once_per_inventory_each_with_its_group_vars(tmp_path):
    """Ansible's documented layout, one inventory per environment (inventories/<env>/group_vars): the role's defaults
    leave the instances empty and each inventory sets its own (manifest batch s118, aigineering/amtm-gpu-server):
    one workload per inventory, named for it, each with that inventory's values."""
    root = write_tree(tmp_path / "repo", {
        "ansible/roles/vllm/templates/vllm.service.j2": UNIT,
        "ansible/roles/vllm/defaults/main.yml": "vllm_image: vllm/vllm-openai:v0.25.1\nvllm_extra_args: []\n",
        "ansible/inventories/prod/group_vars/all.yml": "vllm_model: Qwen/Qwen2.5-72B-Instruct\nvllm_tp: 4\n"
                                                       "vllm_max_model_len: 32768\n",
        "ansible/inventories/test/group_vars/all.yml": "vllm_model: Qwen/Qwen2.5-7B-Instruct\nvllm_tp: 1\n"
                                                       "vllm_max_model_len: 4096\n",
    })
    _, found, _ = find_workloads([str(root)])
    by_name = {w.name: [t.text for t in w.argv] for w in found}
    assert sorted(by_name) == ["vllm.service.j2 (inventory prod)", "vllm.service.j2 (inventory test)"]
    prod, test = by_name["vllm.service.j2 (inventory prod)"], by_name["vllm.service.j2 (inventory test)"]
    assert prod[prod.index("--tensor-parallel-size") + 1] == "4" and "Qwen/Qwen2.5-72B-Instruct" in prod
    assert test[test.index("--tensor-parallel-size") + 1] == "1" and "Qwen/Qwen2.5-7B-Instruct" in test


def test_one_inventory_renders_once_without_a_name(tmp_path):
    root = write_tree(tmp_path / "repo", {
        "roles/vllm/templates/vllm.service.j2": UNIT,
        "roles/vllm/defaults/main.yml": "vllm_image: vllm/vllm-openai:v0.25.1\nvllm_extra_args: []\n",
        "inventory/prod/group_vars/all.yml": "vllm_model: Qwen/Qwen2.5-7B-Instruct\nvllm_tp: 2\nvllm_max_model_len: 4096\n",
    })
    _, (served,), _ = find_workloads([str(root)])
    words = [t.text for t in served.argv]
    assert served.name == "vllm.service.j2" and words[words.index("--tensor-parallel-size") + 1] == "2"


def test_a_role_template_is_rendered_once_per_host_whose_host_vars_set_its_variables(tmp_path):
    """host_vars/<host>.yml (or host_vars/<host>/*.yml) over the group_vars, as Ansible orders them (manifest batch s121,
    Dirty13itch/athanor: each node's host_vars sets its own vLLM instances): one workload per host that sets the role's
    variables, named for it; a host whose host_vars set none of them (a different role's) adds no rendering."""
    root = write_tree(tmp_path / "repo", {
        "ansible/roles/vllm/templates/vllm.service.j2": UNIT,
        "ansible/roles/vllm/defaults/main.yml": "vllm_image: vllm/vllm-openai:v0.25.1\nvllm_extra_args: []\n"
                                                "vllm_model: Qwen/Qwen2.5-7B-Instruct\nvllm_max_model_len: 4096\n",
        "ansible/group_vars/all.yml": "vllm_tp: 1\n",
        "ansible/host_vars/core.yml": "vllm_model: Qwen/Qwen2.5-72B-Instruct-AWQ\nvllm_tp: 4\n",
        "ansible/host_vars/node2.lab/main.yml": "vllm_max_model_len: 16384\n",
        "ansible/host_vars/nas.yml": "samba_shares: [media]\n",
    })
    _, found, _ = find_workloads([str(root)])
    by_name = {w.name: [t.text for t in w.argv] for w in found}
    assert sorted(by_name) == ["vllm.service.j2 (host core)", "vllm.service.j2 (host node2.lab)"]
    core, node2 = by_name["vllm.service.j2 (host core)"], by_name["vllm.service.j2 (host node2.lab)"]
    assert core[core.index("--tensor-parallel-size") + 1] == "4" and "Qwen/Qwen2.5-72B-Instruct-AWQ" in core
    assert node2[node2.index("--max-model-len") + 1] == "16384" and node2[node2.index("--tensor-parallel-size") + 1] == "1"
