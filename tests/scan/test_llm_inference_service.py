"""KServe's LLMInferenceService whose container `main` gives only env and resources (batch s82, sukantadash/rhoai3 and
the RHOAI 3 pattern): its controller's config template runs vLLM there (kvdoctor/data/llm_inference_service.yaml)."""

from __future__ import annotations

from scan_support import write_tree

from kvdoctor.scan.run import read_manifests

SERVICE = """apiVersion: serving.kserve.io/v1alpha1
kind: LLMInferenceService
metadata:
  name: qwen
  namespace: demo-llm
spec:
  replicas: 1
  model:
    uri: URI
    name: Qwen/Qwen3-0.6B
  parallelism:
    tensor: 2
  router:
    route: {}
  TEMPLATE
"""
MAIN = """template:
    containers:
      - name: main
        env:
          - name: VLLM_ADDITIONAL_ARGS
            value: "--max-model-len 8192 --enable-auto-tool-choice"
        resources:
          limits:
            nvidia.com/gpu: '2'
"""


def _one(tmp_path, uri: str, template: str):
    root = write_tree(tmp_path / uri.split(":")[0], {"llmisvc.yaml": SERVICE.replace("URI", uri).replace("TEMPLATE", template)})
    (workload,) = read_manifests([str(root)])[1]
    return workload


def test_the_main_container_runs_the_config_templates_vllm_command_with_its_args_and_gpus(tmp_path):
    workload = _one(tmp_path, "hf://Qwen/Qwen3-0.6B", MAIN)
    assert (workload.name, workload.container, workload.gpu_limit) == ("qwen", "main", 2)
    assert [t.text for t in workload.argv] == ["Qwen/Qwen3-0.6B", "--served-model-name", "Qwen/Qwen3-0.6B", "--port",
                                               "8000", "--tensor-parallel-size", "2", "--max-model-len", "8192",
                                               "--enable-auto-tool-choice"]
    assert "config template" in workload.notes[0] and "release unknown" in workload.notes[0]


def test_a_modelcar_is_the_files_at_mnt_models_and_no_template_is_the_controllers_own(tmp_path):
    workload = _one(tmp_path, "oci://quay.io/redhat-ai-services/modelcar-catalog:qwen3", "")
    assert workload.argv[0].text == "/mnt/models" and workload.gpu_limit is None and workload.container == "main"


def test_an_image_of_its_own_replaces_the_templates_and_its_args_follow_the_templates_command(tmp_path):
    """rh-aiservices-bu/rhoai-2.25-baseline (batch s84): `main` names a CPU image and args, no command."""
    own = MAIN.replace("      - name: main\n", "      - name: main\n        image: quay.io/x/vllm-cpu:v0.11.0\n"
                       "        args: [--dtype, bfloat16]\n")
    workload = _one(tmp_path, "hf://Qwen/Qwen3-0.6B", own)
    assert workload.image == "quay.io/x/vllm-cpu:v0.11.0" and [t.text for t in workload.argv][-2:] == ["--dtype", "bfloat16"]
