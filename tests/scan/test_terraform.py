"""Terraform, written from the providers' documentation: the Kubernetes provider's kubernetes_deployment(_v1) nested
blocks (container, env, value_from, resources.limits, node_selector), kubernetes_manifest, Google's Cloud Run v2
service (template.containers, node_selector.accelerator), nomad_job's jobspec heredoc, and helm_release."""

from __future__ import annotations

from scan_support import by_name, scan

DEPLOYMENT = """resource "kubernetes_deployment_v1" "vllm" {{
  metadata {{
    name      = "vllm"
    namespace = "llm"
  }}
  spec {{
    replicas = 1
    selector {{ match_labels = {{ app = "vllm" }} }}
    template {{
      metadata {{ labels = {{ app = "vllm" }} }}
      spec {{
        node_selector = {{
          "cloud.google.com/gke-accelerator" = "nvidia-l4"
        }}
        container {{
          name  = "vllm"
          image = "{image}"
          args  = ["--model", var.model, "--tensor-parallel-size", "{tp}"]
          env {{
            name  = "VLLM_ATTENTION_BACKEND"
            value = "FLASHINFER"
          }}
          env {{
            name = "HF_TOKEN"
            value_from {{
              secret_key_ref {{
                name = "hf"
                key  = "token"
              }}
            }}
          }}
          resources {{
            limits = {{ "nvidia.com/gpu" = 2 }}
          }}
        }}
        container {{
          name  = "metrics"
          image = "prom/statsd-exporter:v0.26.0"
        }}
      }}
    }}
  }}
}}
"""
VARIABLES = 'variable "model" {\n  type    = string\n  default = "Qwen/Qwen2.5-7B-Instruct"\n}\n'


def _module(tmp_path, image: str = "vllm/vllm-openai:v0.10.2", tp: int = 2):
    (tmp_path / "main.tf").write_text(DEPLOYMENT.format(image=image, tp=tp))
    (tmp_path / "variables.tf").write_text(VARIABLES)
    return tmp_path / "main.tf"


def test_kubernetes_deployment_blocks_are_the_deployment(tmp_path):
    result = by_name(scan([str(_module(tmp_path))], tmp_path / "s", gpu=None))["vllm"]
    workload = result.workload
    assert (workload.kind, workload.namespace, workload.container) == ("Deployment", "llm", "vllm")
    assert [t.text for t in workload.argv] == ["--model", "Qwen/Qwen2.5-7B-Instruct", "--tensor-parallel-size", "2"]
    assert any("variables" not in n and "var.model" in n for n in workload.notes)  # the default, said so
    assert {e.name: (e.value, e.source) for e in workload.env} == {
        "VLLM_ATTENTION_BACKEND": ("FLASHINFER", None), "HF_TOKEN": (None, "Secret 'hf' key 'token'")}
    assert (workload.gpu_limit, workload.gpu_limit_line) == (2, 33)
    assert result.report.facts["gpu.name"] == "L4"


def test_too_few_gpus_in_a_deployment_block(tmp_path):
    result = by_name(scan([str(_module(tmp_path, tp=4))], tmp_path / "s"))["vllm"]
    assert next(p for p in result.placed if p.finding.rule_id == "KVD201").finding.status == "fired"


def test_a_deployment_block_without_vllm_is_not_a_workload(tmp_path):
    (tmp_path / "main.tf").write_text(DEPLOYMENT.format(image="ghcr.io/acme/web:1", tp=1).replace(
        '["--model", var.model, "--tensor-parallel-size", "1"]', '["--port", "8080"]') + "# serves vllm's clients\n")
    report = scan([str(tmp_path)], tmp_path / "s")
    assert report.workloads == () and report.unread == ()


def test_cloud_run_v2_service_and_kubernetes_manifest(tmp_path):
    (tmp_path / "run.tf").write_text("""resource "google_cloud_run_v2_service" "gemma" {
  name     = "vllm-gemma"
  location = "us-central1"
  template {
    containers {
      image = "vllm/vllm-openai:v0.10.2"
      args  = ["--model=google/gemma-3-4b-it", "--max-model-len=8192"]
      resources {
        limits = { cpu = "8", memory = "32Gi", "nvidia.com/gpu" = "1" }
      }
    }
    node_selector {
      accelerator = "nvidia-l4"
    }
  }
}

resource "kubernetes_manifest" "pod" {
  manifest = {
    apiVersion = "v1"
    kind       = "Pod"
    metadata   = { name = "vllm-pod" }
    spec = {
      containers = [{
        name  = "vllm"
        image = "vllm/vllm-openai:v0.10.2"
        args  = ["Qwen/Qwen2.5-7B-Instruct"]
      }]
    }
  }
}
""")
    found = by_name(scan([str(tmp_path / "run.tf")], tmp_path / "s", gpu=None))
    assert set(found) == {"vllm-gemma", "vllm-pod"}
    gemma = found["vllm-gemma"]
    assert gemma.workload.gpu_limit == 1 and gemma.report.facts["gpu.name"] == "L4"
    assert found["vllm-pod"].workload.kind == "Pod"


def test_nomad_job_heredoc_and_helm_release(tmp_path):
    (tmp_path / "nomad.tf").write_text("""resource "nomad_job" "vllm" {
  jobspec = <<EOT
job "vllm" {
  group "g" {
    task "server" {
      driver = "docker"
      config {
        image = "vllm/vllm-openai:v0.10.2"
        args  = ["--model", "Qwen/Qwen2.5-7B-Instruct"]
      }
      resources {
        device "nvidia/gpu" { count = 1 }
      }
    }
  }
}
EOT
}

resource "helm_release" "stack" {
  name       = "vllm"
  repository = "https://vllm-project.github.io/production-stack"
  chart      = "vllm-stack"
}
""")
    report = scan([str(tmp_path / "nomad.tf")], tmp_path / "s")
    (result,) = report.workloads
    assert (result.workload.kind, result.workload.container, result.workload.command_line) == ("Nomad task", "server", 9)
    assert any("nomad.tf:20: Terraform helm_release stack installs chart vllm-stack" in n for n in report.notes)


def test_a_deployment_block_of_an_image_whose_command_is_unseen_is_named(tmp_path):
    (tmp_path / "main.tf").write_text(DEPLOYMENT.format(image="${var.registry}/llm/vllm-release-guard:0.5.2", tp=1)
                                      .replace('args  = ["--model", var.model, "--tensor-parallel-size", "1"]',
                                               'env { \n name = "MODEL1"\n value = "/workspace/x" \n}'))  # fmt: skip
    report = scan([str(tmp_path / "main.tf")], tmp_path / "s")
    assert report.workloads == ()
    assert [n for n in report.notes if "main.tf:17: Deployment vllm (container vllm) runs an image whose command" in n]


DOCKER_CONTAINER = """resource "docker_image" "vllm" {{
  name = "{image}"
}}

resource "docker_container" "vllm" {{
  name    = "llm-server"
  image   = docker_image.vllm.image_id
  runtime = "nvidia"
  command = ["--model", "/models/tinyllama", "--max-model-len", "2048", "{flag}"]
  env     = ["NVIDIA_VISIBLE_DEVICES=all", "VLLM_ATTENTION_BACKEND=FLASHINFER"]
  ports {{
    internal = 8000
    external = 8000
  }}
}}
"""


def test_a_docker_container_resource_is_the_compose_service_it_runs(tmp_path):
    """The Docker provider (kreuzwerker/docker): `command` is the image's CMD, `env` "K=V" items, `name` the
    container's name."""
    (tmp_path / "main.tf").write_text(DOCKER_CONTAINER.format(image="vllm/vllm-openai:v0.25.1", flag="--enforce-eager")
                                      .replace("docker_image.vllm.image_id", '"vllm/vllm-openai:v0.25.1"'))
    result = by_name(scan([str(tmp_path / "main.tf")], tmp_path / "s"))["llm-server"]
    assert [t.text for t in result.workload.argv][-4:] == ["/models/tinyllama", "--max-model-len", "2048",
                                                           "--enforce-eager"]
    assert {e.name: e.value for e in result.workload.env}["VLLM_ATTENTION_BACKEND"] == "FLASHINFER"
    assert result.report.facts["vllm.version"] == "0.25.1"
    refused = by_name(scan([str((tmp_path / "main.tf").write_text(
        DOCKER_CONTAINER.format(image="x", flag="--no-such-flag").replace("docker_image.vllm.image_id",
                                                                          '"vllm/vllm-openai:v0.25.1"')) and
        tmp_path / "main.tf")], tmp_path / "s2"))["llm-server"]
    assert any(p.finding.status == "fired" and p.finding.severity == "error" and p.location.line == 9
               for p in refused.placed)  # the refused flag, at its own line


def test_a_docker_container_resource_without_vllm_is_not_a_workload(tmp_path):
    (tmp_path / "main.tf").write_text(DOCKER_CONTAINER.format(image="x", flag="--verbose").replace(
        "docker_image.vllm.image_id", '"postgres:16"').replace('"--model", "/models/tinyllama", ', ""))
    assert scan([str(tmp_path)], tmp_path / "s").workloads == ()


def test_type_conversions_compact_concat_and_locals_built_from_variables_are_read_through(tmp_path):
    """A real module's shape (manifest batch s54, kweinmeister/vllm-gke-terraform): args = compact([... var.model_id,
    tostring(var.max_model_len) ...]), metadata.name = local.deployment_name where deployment_name = local.app_label =
    "vllm-${var.name_prefix}"; each read with the module's defaults."""
    (tmp_path / "locals.tf").write_text('locals {\n  app_label = "vllm-${var.name_prefix}"\n'
                                        '  deployment_name = local.app_label\n}\n')
    (tmp_path / "variables.tf").write_text(
        'variable "name_prefix" {\n  default = "qwen3"\n}\nvariable "model_id" {\n  default = "Qwen/Qwen3-8B"\n}\n'
        'variable "max_model_len" {\n  default = 8192\n}\n')
    (tmp_path / "main.tf").write_text('''resource "kubernetes_deployment" "vllm" {
  metadata {
    name = local.deployment_name
  }
  spec {
    template {
      spec {
        container {
          name  = "vllm"
          image = "vllm/vllm-openai:v0.25.1"
          args  = compact(concat(["--model", var.model_id, ""], [
            "--max-model-len", tostring(var.max_model_len),
          ]))
        }
      }
    }
  }
}
''')
    (workload,) = scan([str(tmp_path / "main.tf")], tmp_path / "s", gpu=None).workloads
    assert workload.workload.name == "vllm-qwen3"
    assert [t.text for t in workload.workload.argv] == ["--model", "Qwen/Qwen3-8B", "--max-model-len", "8192"]
    assert workload.workload.argv[2].line == 12  # each word on its own line


def test_an_object_key_that_is_a_traversal_parses(tmp_path):
    # a module's providers map: `aws.dns = aws` (an HCL object key may be a traversal)
    from kvdoctor.scan import hcl

    root = hcl.parse('module "m" {\n  providers = {\n    aws     = aws\n    aws.dns = aws\n  }\n}\n', "main.tf")
    assert root is not None


def test_a_nomad_job_rendered_by_templatefile_takes_its_values_and_is_read_once(tmp_path):
    from kvdoctor.scan.run import find_workloads

    (tmp_path / "variables.tf").write_text('variable "model" {\n  default = "Qwen/Qwen3-8B"\n}\n')
    (tmp_path / "main.tf").write_text(
        'resource "nomad_job" "vllm" {\n  jobspec = templatefile("${path.module}/vllm.nomad.hcl", {\n'
        '    model = var.model\n    image = "vllm/vllm-openai:v0.25.1"\n    gpus  = var.unset\n  })\n}\n')
    (tmp_path / "vllm.nomad.hcl").write_text(
        'job "vllm" {\n  group "g" {\n    task "vllm" {\n      driver = "docker"\n      config {\n'
        '        image = "${image}"\n        args  = ["--model", "${model}", "--max-model-len", "8192"]\n      }\n'
        '      constraint {\n        attribute = "$${meta.gpu}"\n        value = "true"\n      }\n    }\n  }\n}\n')
    (task,) = find_workloads([str(tmp_path)])[1]  # the job file read on its own is not a second workload
    assert task.image == "vllm/vllm-openai:v0.25.1" and [t.text for t in task.argv][:2] == ["--model", "Qwen/Qwen3-8B"]
    assert task.file.endswith("vllm.nomad.hcl") and task.argv[1].line == 7
    assert any("templatefile()" in n and "model=Qwen/Qwen3-8B" in n for n in task.notes)
    (alone,) = find_workloads([str(tmp_path / "vllm.nomad.hcl")])[1]  # alone, its variables stay unknown
    assert alone.image == "${image}"
