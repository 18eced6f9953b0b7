"""Terraform as platform teams write it, from Terraform's documentation (language/modules/syntax,
functions/templatefile, functions/file): a root module calling a local module once per model, the module's instance
rendering its user_data from a template (a script writing a systemd unit, a #cloud-config document), base64-encoded,
or reading a script with file()."""

from __future__ import annotations

from scan_support import by_name, scan, write_tree

ROOT = """module "llama" {
  source        = "./modules/vllm"
  model_id      = "meta-llama/Llama-3.1-8B-Instruct"
  instance_type = var.big_machine
  max_model_len = 8192
}

module "qwen" {
  source   = "./modules/vllm"
  model_id = "Qwen/Qwen2.5-7B-Instruct"
  hf_token = var.hf_token
}

variable "big_machine" {
  default = "g5.12xlarge"
}
"""
MODULE_VARIABLES = """variable "model_id" {
  type = string
}
variable "instance_type" {
  default = "g6.xlarge"
}
variable "max_model_len" {
  default = 4096
}
variable "hf_token" {
  default = ""
}
"""
MODULE_MAIN = """resource "aws_instance" "vllm" {
  ami           = "ami-0123456789"
  instance_type = var.instance_type
  user_data = base64encode(templatefile("${path.module}/user_data.sh.tpl", {
    model_id      = var.model_id
    max_model_len = var.max_model_len, port = 8000
  }))
}
"""
TEMPLATE = """#!/bin/bash
cat > /etc/systemd/system/vllm.service <<UNIT
[Unit]
Description=vLLM
[Service]
ExecStart=/usr/bin/docker run --gpus all -p ${port}:8000 vllm/vllm-openai:v0.8.5 --model ${model_id} --max-model-len ${max_model_len} --tensor-parallel-size 4
Restart=always
[Install]
WantedBy=multi-user.target
UNIT
systemctl enable --now vllm
"""


def _tree(tmp_path):
    return write_tree(tmp_path / "infra", {
        "main.tf": ROOT, "modules/vllm/variables.tf": MODULE_VARIABLES, "modules/vllm/main.tf": MODULE_MAIN,
        "modules/vllm/user_data.sh.tpl": TEMPLATE})  # fmt: skip


def _words(workload) -> list[str]:
    return [t.text for t in workload.argv]


def test_each_module_call_is_a_workload_with_its_own_values(tmp_path):
    report = scan([str(_tree(tmp_path))], tmp_path / "s", gpu=None)
    results = by_name(report)
    assert set(results) == {"module.llama/user_data.sh.tpl", "module.qwen/user_data.sh.tpl"}
    llama, qwen = results["module.llama/user_data.sh.tpl"], results["module.qwen/user_data.sh.tpl"]
    assert "meta-llama/Llama-3.1-8B-Instruct" in _words(llama.workload)
    assert "8192" in _words(llama.workload)  # the call's value over the module's default
    assert "4096" in _words(qwen.workload)  # the module's default where the call gives none
    assert llama.report.facts["gpu.name"] == "A10G"  # g5.12xlarge, from the caller's own variable
    assert qwen.report.facts["gpu.name"] == "L4"  # g6.xlarge, the module's default
    assert llama.workload.file.endswith("user_data.sh.tpl") and llama.workload.line == 6
    assert any('module "llama"' in n and "model_id=meta-llama/Llama-3.1-8B-Instruct" in n for n in llama.workload.notes)
    assert any("hf_token given values not known here" in n for n in qwen.workload.notes)
    assert any("templatefile()" in n and "max_model_len=8192" in n for n in llama.workload.notes)
    # the module's own files are read through the calls, not alone with model_id unknown
    assert any("modules/vllm/main.tf: a module the scan's" in n for n in report.notes)


def test_a_module_scanned_alone_keeps_its_callers_values_unknown(tmp_path):
    tree = _tree(tmp_path)
    report = scan([str(tree / "modules" / "vllm")], tmp_path / "s", gpu=None)
    (result,) = report.workloads
    assert "${model_id}" in _words(result.workload)  # the caller sets it: unknown here, never a literal
    assert "4096" in _words(result.workload)
    assert result.report.facts["gpu.name"] == "L4"
    assert any("model_id not known here" in n for n in result.workload.notes)


def test_a_module_passing_its_variable_on_to_a_module_it_calls(tmp_path):
    tree = write_tree(tmp_path / "infra", {
        "main.tf": 'module "serving" {\n  source = "./modules/serving"\n  model = "google/gemma-2-9b-it"\n}\n',
        "modules/serving/main.tf": 'variable "model" {}\nmodule "node" {\n  source = "../vllm"\n'
                                   '  model_id = var.model\n  instance_type = "g6e.xlarge"\n}\n',
        "modules/vllm/variables.tf": MODULE_VARIABLES, "modules/vllm/main.tf": MODULE_MAIN,
        "modules/vllm/user_data.sh.tpl": TEMPLATE})  # fmt: skip
    (result,) = scan([str(tree)], tmp_path / "s", gpu=None).workloads
    assert result.workload.name == "module.serving/module.node/user_data.sh.tpl"
    assert "google/gemma-2-9b-it" in _words(result.workload)
    assert result.report.facts["deploy.gpu_from"] == "node label node.kubernetes.io/instance-type=g6e.xlarge"


CLOUD_INIT = """#cloud-config
runcmd:
  - docker run -d --gpus all -e HF_TOKEN=${hf_token} vllm/vllm-openai:v0.8.5 --model ${model} --tensor-parallel-size ${tp}
"""
GCE = """resource "google_compute_instance" "vllm" {
  name         = "vllm"
  machine_type = "g2-standard-8"
  metadata = {
    user-data = templatefile("${path.module}/cloud-init.yaml", { model = "mistralai/Mistral-7B-Instruct-v0.3", tp = 2, hf_token = var.hf_token })
  }
}
resource "azurerm_linux_virtual_machine" "vm" {
  size        = "Standard_NC24ads_A100_v4"
  custom_data = base64encode(file("${path.module}/start.sh"))
}
"""
START = """#!/bin/bash
pip install vllm==0.9.2
vllm serve microsoft/Phi-3-mini-4k-instruct --max-model-len 4096
"""


def test_cloud_init_template_and_a_file_read_as_it_is(tmp_path):
    tree = write_tree(tmp_path / "vm", {"main.tf": GCE, "cloud-init.yaml": CLOUD_INIT, "start.sh": START})
    report = scan([str(tree)], tmp_path / "s", gpu=None)
    results = by_name(report)
    assert set(results) == {"cloud-init.yaml", "start.sh"}  # each once: their own readings give way
    gce, azure = results["cloud-init.yaml"], results["start.sh"]
    assert _words(gce.workload)[-4:] == ["--model", "mistralai/Mistral-7B-Instruct-v0.3", "--tensor-parallel-size", "2"]
    assert gce.workload.line == 3 and gce.report.facts["gpu.name"] == "L4"
    assert any("hf_token not known here" in n for n in gce.workload.notes)
    assert azure.report.facts["gpu.name"] == "A100 80GB" and azure.workload.vllm_pin == "0.9.2"
    assert any("read by Terraform's file()" in n for n in azure.workload.notes)
    assert sum("read with the values the file that renders it gives" in n for n in report.notes) == 2


def test_template_directives_of_known_values_render_and_the_others_stay_unknown(tmp_path):
    """`%{ if x }` with a boolean the call gives takes its branch; a `for` over a list and `join()` of one (values not
    read here) become a variable unknown to the script, never words vLLM's parser would be judged to refuse."""
    tree = write_tree(tmp_path / "infra", {
        "main.tf": 'module "llama" {\n  source = "./modules/vllm"\n  model_id = "meta-llama/Llama-3.1-8B-Instruct"\n'
                   '  extra_args = ["--max-model-len", "8192"]\n  prefix = true\n}\n',
        "modules/vllm/main.tf": 'variable "model_id" {}\nvariable "extra_args" {\n  default = []\n}\n'
                                'variable "prefix" {\n  default = false\n}\nresource "aws_instance" "vllm" {\n'
                                '  instance_type = "g5.xlarge"\n  user_data = templatefile("${path.module}/start.sh.tftpl", {\n'
                                '    model_id = var.model_id\n    extra_args = var.extra_args\n    prefix = var.prefix\n  })\n}\n',
        "modules/vllm/start.sh.tftpl": '#!/bin/bash\ndocker run -d --gpus all vllm/vllm-openai:v0.10.1.1 --model ${model_id} '
                                       '${join(" ", extra_args)} %{ if prefix }--enable-prefix-caching%{ endif } '
                                       '%{ for a in extra_args ~}${a} %{ endfor ~}\n'})  # fmt: skip
    (result,) = scan([str(tree)], tmp_path / "s", gpu=None).workloads
    words = [t.text for t in result.workload.argv]
    assert "--enable-prefix-caching" in words and not any("%{" in w or "join(" in w for w in words)
    assert not [p for p in result.placed if p.finding.rule_id == "KVD004" and p.finding.status == "fired"]
    assert any("extra_args given values not known here" in n for n in result.workload.notes)
    assert any("2 template directive(s)" in n for n in result.workload.notes)


def test_a_registry_module_that_names_vllm_is_named_not_read(tmp_path):
    tree = write_tree(tmp_path / "infra", {
        "main.tf": 'module "vllm" {\n  source = "git::https://github.com/acme/terraform-vllm.git?ref=v1.2.0"\n'
                   '  image = "vllm/vllm-openai:v0.10.1.1"\n  model = "Qwen/Qwen2.5-7B-Instruct"\n}\n'})  # fmt: skip
    report = scan([str(tree)], tmp_path / "s", gpu=None)
    assert not report.workloads
    assert any('Terraform module "vllm" from git::https://github.com/acme/terraform-vllm.git' in n
               and ".terraform/modules/vllm" in n for n in report.notes)
