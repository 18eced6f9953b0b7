"""Amazon ECS task definitions (scan/ecs.py): a task-definition JSON, a Terraform aws_ecs_task_definition with
jsonencode'd container definitions, and terraform-aws-modules/ecs's service module (a real public file of manifest
batch s48, aws-ia/ecs-blueprints): `command` is the image's CMD, resourceRequirements GPU the container's GPUs."""

from __future__ import annotations

from scan_support import by_name, finding, rel, scan, write_tree

TASK_DEFINITION = """{
  "family": "vllm-qwen",
  "containerDefinitions": [
    {
      "name": "vllm",
      "image": "vllm/vllm-openai:v0.25.1",
      "command": ["--model", "Qwen/Qwen2.5-3B-Instruct", "--tensor-parallel-size", "2", "--swap-space", "4"],
      "environment": [{"name": "VLLM_USE_V2_MODEL_RUNNER", "value": "0"}],
      "resourceRequirements": [{"type": "GPU", "value": "1"}]
    },
    {"name": "agent", "image": "amazon/cloudwatch-agent:latest"}
  ]
}
"""

TERRAFORM = """locals {
  image = "vllm/vllm-openai:v0.25.1"
}
resource "aws_ecs_task_definition" "vllm" {
  family = "vllm-task"
  container_definitions = jsonencode([
    {
      name    = "server"
      image   = local.image
      command = ["--model", "Qwen/Qwen2.5-3B-Instruct", "--tensor-parallel-size", "4"]
      resourceRequirements = [{ type = "GPU", value = "4" }]
    }
  ])
}
"""


def test_a_task_definition_json_in_a_folder_is_read_other_json_is_not(tmp_path):
    root = write_tree(tmp_path / "repo", {"ecs/taskdef.json": TASK_DEFINITION,
                                          "package.json": '{"dependencies": {"vllm-client": "1"}}'})
    report = scan([str(root)], tmp_path)
    (served,) = report.workloads
    assert (served.workload.name, served.workload.container, served.workload.gpu_limit) == ("vllm-qwen", "vllm", 1)
    assert served.report.facts["env.VLLM_USE_V2_MODEL_RUNNER"] == "0"
    assert finding(served, "KVD201").location.line == 9  # -tp 2 on its 1 GPU, at the resourceRequirements value
    assert finding(served, "KVD004").location.line == 7  # --swap-space: gone from 0.25.1's parser


def test_terraform_task_definition_jsonencode_with_a_local(tmp_path):
    root = write_tree(tmp_path / "repo", {"main.tf": TERRAFORM})
    served = by_name(scan([str(root / "main.tf")], tmp_path))["vllm-task"]
    assert served.workload.container == "server" and served.workload.image == "vllm/vllm-openai:v0.25.1"
    assert served.workload.gpu_limit == 4 and served.report.facts["serve.tensor_parallel_size"] == 4
    assert any("local.image" in n for n in served.report.notes)


def test_the_ecs_service_module_of_a_real_blueprint(tmp_path):
    path = rel("public/aws-ia__ecs-blueprints/terraform__ec2-examples__vllm-gpu__main.tf")
    served = by_name(scan([path], tmp_path, gpu=None))["vllm_inference_service"]
    assert served.workload.container == "vllm" and served.workload.image == "vllm/vllm-openai:v0.10.2"
    assert served.workload.gpu_limit == 4 and served.report.facts["serve.tensor_parallel_size"] == 4
    assert not any(p.finding.status == "fired" and p.finding.severity == "error" for p in served.placed)
    # the GPU of the one instance type the file names (local.instance_type = g5.12xlarge: 4 x A10G)
    assert served.report.facts["gpu.name"] == "A10G"
    assert any("one instance type the file names (g5.12xlarge" in n for n in served.report.notes)


def test_the_instance_type_of_the_modules_launch_template_in_another_file(tmp_path):
    """A Terraform module is its directory: the task definition in ecs.tf, the capacity's launch template in
    main.tf, the instance type's default in variables.tf. A variable declared but used nowhere names no machine."""
    launch = 'resource "aws_launch_template" "gpu" {\n  instance_type = var.instance_type\n}\n'
    variables = 'variable "instance_type" {\n  default = "g5.12xlarge"\n}\n'
    root = write_tree(tmp_path / "repo", {"ecs.tf": TERRAFORM, "main.tf": launch, "variables.tf": variables})
    served = by_name(scan([str(root / "ecs.tf")], tmp_path, gpu=None))["vllm-task"]
    assert served.report.facts["gpu.name"] == "A10G"
    assert any("one instance type the module names (g5.12xlarge, main.tf line 2)" in n for n in served.report.notes)
    unused = write_tree(tmp_path / "unused", {"ecs.tf": TERRAFORM, "variables.tf": variables})
    alone = by_name(scan([str(unused / "ecs.tf")], tmp_path, gpu=None))["vllm-task"]
    assert alone.report.facts["gpu.name"] is None
