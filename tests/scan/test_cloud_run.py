"""Cloud Run, written from its documentation (cloud.google.com/run/docs/configuring/services/gpu, the gcloud
reference for `run deploy`): the service YAML (a Knative Service of serving.knative.dev/v1 with nvidia.com/gpu limits
and the run.googleapis.com/accelerator node selector) and `gcloud run deploy` in scripts, Makefiles and workflow
steps."""

from __future__ import annotations

import subprocess
import sys

from scan_support import REPO, by_name, scan

SERVICE_YAML = """apiVersion: serving.knative.dev/v1
kind: Service
metadata:
  name: {name}
  annotations:
    run.googleapis.com/launch-stage: BETA
spec:
  template:
    metadata:
      annotations:
        autoscaling.knative.dev/maxScale: '1'
        run.googleapis.com/cpu-throttling: 'false'
    spec:
      containers:
      - image: {image}
        args: {args}
        ports:
        - containerPort: 8000
        resources:
          limits:
            cpu: '8'
            memory: 32Gi
            nvidia.com/gpu: '1'
      nodeSelector:
        run.googleapis.com/accelerator: nvidia-l4
"""


def _fired(result) -> set[str]:
    return {p.finding.rule_id for p in result.placed if p.finding.status == "fired"}


def test_cloud_run_service_yaml_is_a_workload_on_an_l4(tmp_path):
    path = tmp_path / "service.yaml"
    path.write_text(SERVICE_YAML.format(name="vllm-gemma", image="vllm/vllm-openai:v0.10.2",
                                        args='["--model", "google/gemma-3-4b-it", "--tensor-parallel-size", "2"]'))
    result = by_name(scan([str(path)], tmp_path / "s", gpu=None))["vllm-gemma"]
    assert result.workload.kind == "Service" and result.report is not None
    assert result.report.facts["gpu.name"] == "L4"
    assert "KVD201" in _fired(result)  # TP 2 on the one GPU the limit gives
    assert next(p for p in result.placed if p.finding.rule_id == "KVD201").location.line == 23


def test_a_knative_service_without_vllm_and_a_core_service_are_not_workloads(tmp_path):
    path = tmp_path / "service.yaml"
    path.write_text(SERVICE_YAML.format(name="web", image="gcr.io/acme/web:1", args='["--port", "8080"]')
                    + "---\napiVersion: v1\nkind: Service\nmetadata: {name: vllm}\nspec: {ports: [{port: 8000}]}\n")
    report = scan([str(path)], tmp_path / "s")
    assert report.workloads == () and not any("vllm" in n.lower() and "service.yaml:" in n for n in report.notes)


DEPLOY = """#!/bin/bash
REGION=us-central1
MODEL=google/gemma-3-4b-it
gcloud beta run deploy vllm-gemma \\
  --image=vllm/vllm-openai:v0.10.2 \\
  --args=--model,$MODEL,--max-model-len,8192,--tensor-parallel-size,{tp} \\
  --set-env-vars=HF_HUB_OFFLINE=1,VLLM_ATTENTION_BACKEND=FLASH_ATTN \\
  --set-secrets=HF_TOKEN=hf-token:latest \\
  --cpu 8 --memory 32Gi --gpu 1 --gpu-type nvidia-l4 \\
  --no-cpu-throttling --region $REGION
"""


def test_gcloud_run_deploy_in_a_script(tmp_path):
    path = tmp_path / "deploy.sh"
    path.write_text(DEPLOY.format(tp=1))
    result = by_name(scan([str(path)], tmp_path / "s", gpu=None))["deploy.sh"]
    workload = result.workload
    assert (workload.kind, workload.container, workload.image) == ("Cloud Run service", "vllm-gemma",
                                                                   "vllm/vllm-openai:v0.10.2")
    assert [t.text for t in workload.argv] == ["--model", "google/gemma-3-4b-it", "--max-model-len", "8192",
                                               "--tensor-parallel-size", "1"]
    assert {e.name: e.value for e in workload.env} == {"HF_HUB_OFFLINE": "1", "VLLM_ATTENTION_BACKEND": "FLASH_ATTN",
                                                       "HF_TOKEN": None}
    assert (workload.gpu_limit, workload.gpu_limit_line) == (1, 9)
    assert result.report.facts["gpu.name"] == "L4" and not _fired(result) & {"KVD201", "KVD202"}


def test_gcloud_run_deploy_too_few_gpus_points_at_the_gpu_flag(tmp_path):
    path = tmp_path / "deploy.sh"
    path.write_text(DEPLOY.format(tp=2))
    result = by_name(scan([str(path)], tmp_path / "s", gpu=None))["deploy.sh"]
    assert next(p for p in result.placed if p.finding.rule_id == "KVD201").location.line == 9


def test_gcloud_list_delimiter_and_command_flag(tmp_path):
    path = tmp_path / "deploy.sh"
    path.write_text("gcloud run deploy qwen --image=us-docker.pkg.dev/p/r/server:1 --command=vllm,serve "
                    "'--args=^;^Qwen/Qwen2.5-7B-Instruct;--limit-mm-per-prompt;{\"image\":1,\"video\":0}' --gpu=1\n")
    workload = scan([str(path)], tmp_path / "s").workloads[0].workload
    assert [t.text for t in workload.argv] == ["Qwen/Qwen2.5-7B-Instruct", "--limit-mm-per-prompt",
                                               '{"image":1,"video":0}']
    assert workload.container == "qwen" and workload.gpu_limit == 1 and workload.gpu_selectors == ()


def test_an_image_built_elsewhere_is_named_never_silent(tmp_path):
    path = tmp_path / "deploy.sh"
    path.write_text("gcloud run deploy vllm-server --source . --gpu 1 --gpu-type nvidia-l4\n"
                    "gcloud run deploy web --image gcr.io/acme/web:1 --port 8080\n")
    report = scan([str(path)], tmp_path / "s")
    assert report.workloads == ()
    unseen = [n for n in report.notes if "cannot see" in n]
    assert len(unseen) == 1 and "deploy.sh:1" in unseen[0] and "vllm-server" in unseen[0]


def test_gcloud_run_deploy_in_a_makefile_and_a_workflow_step(tmp_path):
    (tmp_path / "Makefile").write_text("deploy:\n\tgcloud run deploy vllm --image vllm/vllm-openai:v0.10.2 "
                                       "--args=Qwen/Qwen2.5-7B-Instruct,--dtype,bfloat16 --gpu 1 --gpu-type nvidia-l4\n")
    workflow = tmp_path / ".github" / "workflows"
    workflow.mkdir(parents=True)
    (workflow / "deploy.yml").write_text("""name: Deploy
on: push
jobs:
  deploy:
    runs-on: ubuntu-latest
    steps:
      - run: |
          gcloud run deploy ${{ vars.SERVICE }} --image ${{ vars.IMAGE }} --gpu 1 --gpu-type nvidia-l4
      - run: gcloud run deploy vllm-router --image us-docker.pkg.dev/p/r/vllm-router:1 --gpu 1
""")
    report = scan([str(tmp_path)], tmp_path / "s", gpu=None)
    (result,) = report.workloads
    assert (result.workload.container, result.workload.kind) == ("deploy", "Makefile target")
    assert result.report.facts["gpu.name"] == "L4"
    unseen = [n for n in report.notes if "cannot see" in n]
    assert len(unseen) == 1 and "vllm-router" in unseen[0] and "deploy.yml:9" in unseen[0]


def test_a_gpu_count_that_is_not_a_number_is_left_unknown(tmp_path):
    path = tmp_path / "deploy.sh"
    path.write_text("gcloud run deploy vllm --image vllm/vllm-openai:v0.10.2 --gpu=$GPUS --args=Qwen/Qwen2.5-7B\n")
    workload = scan([str(path)], tmp_path / "s").workloads[0].workload
    assert workload.gpu_limit is None and workload.gpu_limit_line == 1


def test_a_malformed_service_yaml_is_one_line_exit_2(tmp_path):
    path = tmp_path / "service.yaml"
    path.write_text("apiVersion: serving.knative.dev/v1\nkind: Service\nspec: {template: [\n")
    run = subprocess.run([sys.executable, "-m", "kvdoctor", "scan", str(path), "--no-compile", "--offline"],
                         capture_output=True, text=True, cwd=REPO)  # fmt: skip
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert any("service.yaml:" in line and "malformed YAML" in line for line in run.stderr.splitlines())


CLOUD_BUILD = """substitutions:
  _SERVICE: vllm-gemma
steps:
  - name: gcr.io/cloud-builders/docker
    args: [build, -t, gcr.io/$PROJECT_ID/web:$SHORT_SHA, .]
  - name: gcr.io/google.com/cloudsdktool/cloud-sdk
    entrypoint: gcloud
    args:
      - run
      - deploy
      - ${_SERVICE}
      - --image=vllm/vllm-openai:v0.10.2
      - --args=--model,google/gemma-3-4b-it,--tensor-parallel-size,2
      - --gpu=1
      - --gpu-type=nvidia-l4
  - name: gcr.io/cloud-builders/gcloud
    args: ['run', 'deploy', 'vllm-app', '--image=gcr.io/$PROJECT_ID/vllm-app:$SHORT_SHA', '--gpu=1']
  - name: gcr.io/cloud-builders/gcloud
    args: ['run', 'deploy', 'web', '--image=ghcr.io/vllm-project/semantic-router/extproc:1']
  - name: gcr.io/google.com/cloudsdktool/cloud-sdk:slim
    entrypoint: bash
    args:
      - -c
      - |
        gcloud run deploy vllm-small --image vllm/vllm-openai:v0.10.2 \\
          --args=Qwen/Qwen2.5-0.5B-Instruct --gpu 1 --gpu-type nvidia-l4
"""


def test_cloud_build_steps_that_deploy_to_cloud_run(tmp_path):
    path = tmp_path / "cloudbuild.yaml"
    path.write_text(CLOUD_BUILD)
    report = scan([str(path)], tmp_path / "s", gpu=None)
    found = {r.workload.container: r for r in report.workloads}
    assert set(found) == {"vllm-gemma", "vllm-small"}  # the substitution's default names the service
    gemma = found["vllm-gemma"]
    assert next(p for p in gemma.placed if p.finding.rule_id == "KVD201").location.line == 14
    assert found["vllm-small"].workload.line == 25  # the gcloud line of the step's script
    unseen = [n for n in report.notes if "cannot see" in n]
    assert len(unseen) == 1 and "cloudbuild.yaml:16" in unseen[0] and "vllm-app" in unseen[0]  # not the org's name


def test_a_drone_pipeline_is_not_a_cloud_build_config(tmp_path):
    from kvdoctor.scan.cloud_build import is_cloud_build
    from kvdoctor.scan.documents import SourceFile, compose_documents

    drone = "kind: pipeline\nsteps:\n  - name: serve\n    image: vllm/vllm-openai:v0.10.2\n    commands: [vllm serve x]\n"
    (doc,) = compose_documents(SourceFile("drone.yml", drone))
    (build,) = compose_documents(SourceFile("cloudbuild.yaml", CLOUD_BUILD))
    assert not is_cloud_build(doc.root) and is_cloud_build(build.root)


def test_a_cloud_run_service_of_an_image_built_elsewhere_is_named_once(tmp_path):
    path = tmp_path / "service.yaml"
    path.write_text(SERVICE_YAML.format(name="llm", image="us-docker.pkg.dev/p/r/vllm-gemma:1", args="[]"))
    report = scan([str(path)], tmp_path / "s")
    assert report.workloads == ()
    named = [n for n in report.notes if "service.yaml:" in n]
    assert len(named) == 1 and "service.yaml:15: Service llm (container (unnamed)) runs an image whose command" in named[0]
