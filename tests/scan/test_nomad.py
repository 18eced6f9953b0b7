"""Nomad job files, written from Nomad's job specification (job / group / task, the docker driver's config.image,
command, args and entrypoint, env, resources.device "nvidia/gpu" with a ${device.model} constraint), and the HCL
reader under them."""

from __future__ import annotations

import subprocess
import sys

import pytest
from scan_support import REPO, by_name, scan

from kvdoctor.scan import hcl, nodes

JOB = """# a Nomad job
job "llm" {{
  datacenters = ["dc1"]
  group "serving" {{
    network {{ port "http" {{ to = 8000 }} }}
    task "vllm" {{
      driver = "{driver}"
      config {{
        image = "{image}"
        ports = ["http"]
{config}
      }}
      env {{
        HF_TOKEN               = "${{HF_TOKEN}}"
        VLLM_ATTENTION_BACKEND = "FLASH_ATTN"
      }}
      resources {{
        cpu    = 4000
        memory = 16000
        device "nvidia/gpu" {{
          count = {gpus}
          constraint {{
            attribute = "${{device.model}}"
            value     = "NVIDIA A100-SXM4-80GB"
          }}
        }}
      }}
    }}
    task "ui" {{
      driver = "docker"
      config {{ image = "ghcr.io/open-webui/open-webui:main" }}
    }}
  }}
}}
"""
ARGS = """        args  = [
          "--model", "Qwen/Qwen2.5-7B-Instruct",
          "--tensor-parallel-size", "2",  // two GPUs
          "--port", "${NOMAD_PORT_http}",
        ]"""


def _job(tmp_path, config: str = ARGS, gpus: int = 2, image: str = "vllm/vllm-openai:v0.10.2", driver: str = "docker"):
    path = tmp_path / "llm.nomad"
    path.write_text(JOB.format(config=config, gpus=gpus, image=image, driver=driver))
    return path


def test_a_docker_task_of_the_vllm_image_is_a_workload(tmp_path):
    report = scan([str(_job(tmp_path))], tmp_path / "s", gpu=None)
    result = by_name(report)["llm"]
    workload = result.workload
    assert (workload.kind, workload.container, workload.platform) == ("Nomad task", "vllm", "nomad")
    assert [t.text for t in workload.argv][:4] == ["--model", "Qwen/Qwen2.5-7B-Instruct", "--tensor-parallel-size", "2"]
    assert (workload.gpu_limit, workload.gpu_limit_line) == (2, 25)
    assert {e.name: e.value for e in workload.env} == {"HF_TOKEN": None, "VLLM_ATTENTION_BACKEND": "FLASH_ATTN"}
    assert result.report.facts["gpu.name"].startswith("A100")
    assert len(report.workloads) == 1  # the open-webui task runs no vLLM


def test_too_few_gpus_points_at_the_device_count(tmp_path):
    result = by_name(scan([str(_job(tmp_path, gpus=1))], tmp_path / "s"))["llm"]
    placed = next(p for p in result.placed if p.finding.rule_id == "KVD201")
    assert placed.finding.status == "fired" and placed.location.line == 25


def test_command_and_args_are_the_images_cmd(tmp_path):
    """Nomad's docker driver sets the container's Cmd from command + args: on a plain image `vllm serve` runs."""
    config = '        command = "vllm"\n        args = ["serve", "Qwen/Qwen2.5-7B-Instruct", "--tensor-parallel-size", "2"]'
    workload = scan([str(_job(tmp_path, config, image="python:3.12"))], tmp_path / "s").workloads[0].workload
    assert [t.text for t in workload.argv] == ["Qwen/Qwen2.5-7B-Instruct", "--tensor-parallel-size", "2"]


def test_raw_exec_runs_command_and_args(tmp_path):
    config = '        command = "/opt/venv/bin/vllm"\n        args = ["serve", "Qwen/Qwen2.5-7B-Instruct"]'
    workload = scan([str(_job(tmp_path, config, driver="raw_exec"))], tmp_path / "s").workloads[0].workload
    assert [t.text for t in workload.argv] == ["Qwen/Qwen2.5-7B-Instruct"]


def test_a_templated_args_list_is_a_variable_not_an_error(tmp_path):
    """A job file a launcher fills in (`args = ${VLLM_ARGS}`): read, the arguments unknown here."""
    workload = scan([str(_job(tmp_path, "        args = ${VLLM_ARGS}"))], tmp_path / "s").workloads[0].workload
    assert [t.text for t in workload.argv] == ["${VLLM_ARGS}"]


def test_a_job_without_vllm_is_not_a_workload(tmp_path):
    path = _job(tmp_path, '        args = ["--port", "8080"]', image="ghcr.io/acme/web:1")
    (tmp_path / "infra.tf").write_text('resource "aws_instance" "gpu" { instance_type = "g5.xlarge" }\n')
    report = scan([str(path), str(tmp_path / "infra.tf")], tmp_path / "s")
    assert report.workloads == () and report.unread == ()


def test_a_walk_reads_hcl_only_where_it_names_vllm(tmp_path):
    _job(tmp_path)
    (tmp_path / "broken.tf").write_text('resource "x" "y" {\n  a = \n')  # no vLLM: infrastructure, not read
    report = scan([str(tmp_path)], tmp_path / "s")
    assert len(report.workloads) == 1 and report.unread == ()


def test_malformed_hcl_that_names_vllm_is_one_line_exit_2(tmp_path):
    path = tmp_path / "vllm.nomad"
    path.write_text('job "vllm" {\n  group "g" {\n    task "t" {\n      config { image = "vllm/vllm-openai }\n')
    run = subprocess.run([sys.executable, "-m", "kvdoctor", "scan", str(path), "--no-compile", "--offline"],
                         capture_output=True, text=True, cwd=REPO)  # fmt: skip
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "vllm.nomad:4: malformed HCL: a string without its closing quote" in run.stderr


@pytest.mark.parametrize("text, problem", [
    ('a = [1, 2\n', "a list without its closing ]"),
    ('b { c = 1\n', "a block without its closing }"),
    ('x = <<EOF\nno end\n', "a heredoc <<EOF without its closing EOF"),
    ('/* open', "a /\\* comment that never ends"),
    ('= 1', "expected an attribute or a block"),
])
def test_hcl_errors_name_the_problem(text, problem):
    with pytest.raises(hcl.HclError, match=problem):
        hcl.parse(text, "f.hcl")


def test_hcl_literals_and_expressions():
    root = hcl.parse('a = "x${var.y}z"\nb = var.model\nc = 3\nd = true\ne = { "k.io/x" = 1, m: "n" }\n'
                     'f = <<-EOT\n    line one\n      two\n    EOT\ng = "esc\\"aped\\n"\nh = x ? 1 : 2\n'
                     'i = [for s in xs : upper(s)]\nj = "$${literal}"\n', "f.hcl")
    values = {key: nodes.plain(value) if not nodes.is_scalar(value) else nodes.text(value)
              for key, _, value in nodes.pairs(root)}  # fmt: skip
    assert values == {"a": "x${var.y}z", "b": "${var.model}", "c": "3", "d": "true", "e": {"k.io/x": 1, "m": "n"},
                      "f": "line one\n  two\n", "g": 'esc"aped\n', "h": "${x ? 1 : 2}",
                      "i": "${[for s in xs : upper(s)]}", "j": "${literal}"}
    assert nodes.line(nodes.get(root, "h")) == 11


def test_a_task_of_an_image_whose_command_is_unseen_is_named(tmp_path):
    path = _job(tmp_path, "", image="registry.example/acme/vllm-server:2")
    report = scan([str(path)], tmp_path / "s")
    assert report.workloads == ()
    assert [n for n in report.notes if "llm.nomad:9: Nomad job llm (task vllm) runs an image whose command" in n]


def test_a_nomad_pack_template_is_named_as_one(tmp_path):
    path = tmp_path / "vllm.nomad.hcl"
    path.write_text('job [[ template "job_name" . ]] {\n  group "g" {\n    task "t" {\n      driver = "docker"\n'
                    '      config { image = "vllm/vllm-openai:[[ .vllm.version ]]" }\n    }\n  }\n}\n')
    report = scan([str(path)], tmp_path / "s")
    (unread,) = report.unread
    assert unread.message.endswith("vllm.nomad.hcl:1: Nomad Pack / Levant template syntax ([[ ]]), not HCL yet")
    assert "nomad-pack render" in unread.hint


TEMPLATED_SCRIPT = """\
job "vllm-qwen" {
  group "inference" {
    task "vllm" {
      driver = "docker"
      config {
        image      = "vllm/vllm-openai:v0.25.1"
        entrypoint = ["/bin/bash", "/local/run.sh"]
      }
      template {
        destination = "local/run.sh"
        data        = <<-EOF
#!/bin/bash
unset ROCR_VISIBLE_DEVICES
exec python3 -m vllm.entrypoints.openai.api_server \\
  --model Qwen/Qwen3-8B \\
  --max-model-len 8192
EOF
      }
      resources {
        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
"""


def test_a_task_that_runs_the_script_its_template_writes_is_read_as_that_script(tmp_path):
    from kvdoctor.scan.run import find_workloads

    path = tmp_path / "vllm.nomad.hcl"
    path.write_text(TEMPLATED_SCRIPT)
    (task,) = find_workloads([str(path)])[1]
    assert (task.kind, task.name, task.container, task.image) == ("Nomad task", "vllm-qwen", "vllm",
                                                                   "vllm/vllm-openai:v0.25.1")
    texts = [t.text for t in task.argv]
    assert texts == ["--model", "Qwen/Qwen3-8B", "--max-model-len", "8192"]
    assert task.argv[0].line == 15 and task.gpu_limit == 1
    # a template written elsewhere than the script the task runs is not that script
    path.write_text(TEMPLATED_SCRIPT.replace('destination = "local/run.sh"', 'destination = "local/other.sh"'))
    assert find_workloads([str(path)])[1] == []
