"""Reading manifest files: Terraform templates (templatefile() directives) as YAML."""

from __future__ import annotations

from kvdoctor.scan.run import find_workloads, read_manifests

TERRAFORM_TEMPLATE = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
  namespace: ${namespace}
spec:
  template:
    spec:
      volumes:
%{ for secret in secrets ~}
        - name: hftoken
          csi: {driver: secrets-store.csi.k8s.io}
%{ endfor ~}
      containers:
        - name: vllm
          image: "vllm/vllm-openai:v0.5.5"
          command: ["python3", "-m", "vllm.entrypoints.openai.api_server"]
          args: ["--model", "${model_id}", "--tensor-parallel-size", "${gpu_count}", "--port", "80"]
          resources:
            limits:
              nvidia.com/gpu: ${gpu_count}
"""


def test_a_terraform_templates_directive_lines_are_blank_and_its_variables_unknown(tmp_path):
    path = tmp_path / "vllm.tftpl"
    path.write_text(TERRAFORM_TEMPLATE)
    _, workloads, _ = find_workloads([str(path)])
    (vllm,) = workloads
    assert [t.text for t in vllm.argv] == ["--model", "${model_id}", "--tensor-parallel-size", "${gpu_count}",
                                           "--port", "80"]  # fmt: skip
    assert vllm.argv[1].line == TERRAFORM_TEMPLATE.splitlines().index(
        '          args: ["--model", "${model_id}", "--tensor-parallel-size", "${gpu_count}", "--port", "80"]') + 1
    assert vllm.gpu_limit is None  # ${gpu_count}: not a count here


def test_the_same_text_outside_a_tftpl_file_is_still_malformed_yaml(tmp_path):
    path = tmp_path / "vllm.yaml"
    path.write_text(TERRAFORM_TEMPLATE)
    _, found, _, unread = read_manifests([str(path)])
    assert not found and len(unread) == 1 and "malformed YAML" in unread[0].message


def test_a_directory_walk_reads_yaml_tftpl_files(tmp_path):
    (tmp_path / "deploy.yaml.tftpl").write_text(TERRAFORM_TEMPLATE)
    (tmp_path / "main.tf.tftpl").write_text("resource x {}\n")  # not YAML: not picked up
    files, workloads, _, unread = read_manifests([str(tmp_path)])
    assert [f.rsplit("/", 1)[-1] for f in files] == ["deploy.yaml.tftpl"] and len(workloads) == 1 and not unread


def test_a_walk_reads_a_tftpl_without_yaml_in_its_name_when_it_is_a_kubernetes_manifest(tmp_path):
    # GoogleCloudPlatform/ai-on-gke benchmarks/inference-server/vllm/manifest-templates/vllm.tftpl (silent before)
    (tmp_path / "vllm.tftpl").write_text("# Copyright\n\n" + TERRAFORM_TEMPLATE)
    (tmp_path / "startup.tftpl").write_text("#!/bin/bash\necho ${kind}: apiVersion\n")  # not a manifest
    files, workloads, _, unread = read_manifests([str(tmp_path)])
    assert [f.rsplit("/", 1)[-1] for f in files] == ["vllm.tftpl"] and len(workloads) == 1 and not unread


def test_a_document_of_a_kind_that_runs_nothing_is_not_composed_and_the_others_keep_their_lines(tmp_path):
    # kserve's install/*/kserve.yaml: 1.5 MB of CustomResourceDefinitions (with {{ }} in descriptions) before the
    # objects that run containers; composing them node by node was most of a 120 s whole-repository scan
    crd = ("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: x\nspec:\n"
           "  description: 'use {{ .Name }}'\n  versions: [" + ", ".join(["{a: 1}"] * 50) + "\n")  # unclosed
    deployment = TERRAFORM_TEMPLATE.split("%{")[0].replace("${namespace}", "default").rstrip() + "\n      containers:\n" \
        "        - name: vllm\n          image: vllm/vllm-openai:v0.25.1\n          args: [--model, Qwen/Qwen3-0.6B]\n"
    path = tmp_path / "install.yaml"
    path.write_text(crd + "---\n" + deployment)
    _, found, notes, unread = read_manifests([str(path)])
    assert not unread and not notes  # the CRD (here malformed) is never composed: it cannot hide the Deployment
    (vllm,) = found
    assert vllm.argv[1].line == (crd + "---\n" + deployment).splitlines().index(
        "          args: [--model, Qwen/Qwen3-0.6B]") + 1
