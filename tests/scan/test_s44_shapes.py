"""Shapes batch s44 showed (spent after its one measure): the `.env` Compose reads beside a compose file for
`${VAR}` interpolation, and Red Hat's / Open Data Hub's vLLM images run with `args` only (their entrypoint is vLLM's
OpenAI server or the vllm-tgis-adapter, which takes vLLM's serve arguments plus its own). Files written from
Compose's documented interpolation (compose-spec: the project directory's `.env`), opendatahub-io/vllm's
Dockerfile.ubi and vllm-tgis-adapter's add_tgis_args."""

from __future__ import annotations

from scan_support import scan

from kvdoctor.scan.compose_dotenv import project_env


def _fired(result) -> set[str]:
    return {p.finding.rule_id for p in result.placed if p.finding.status == "fired"}


COMPOSE = """\
services:
  vllm-server:
    image: vllm/vllm-openai:${IMAGE_TAG}
    command: >
      --model ${MODEL_PATH}
      --max-model-len ${MAX_MODEL_LEN:-4096}
      --served-model-name ${MODEL_NAME}
"""
DOTENV = """\
# image version
# IMAGE_TAG=latest
IMAGE_TAG=v0.25.1-cu130  # <--- changed here
export MODEL_PATH=Qwen/Qwen2.5-7B-Instruct # a local path
MODEL_NAME="gpt-3.5 #turbo"
MAX_MODEL_LEN=
"""


def test_the_env_file_beside_a_compose_file_decides_its_variables(tmp_path):
    (tmp_path / "docker-compose.yml").write_text(COMPOSE)
    (tmp_path / ".env").write_text(DOTENV)
    (result,) = scan([str(tmp_path / "docker-compose.yml")], tmp_path).workloads
    assert result.workload.image == "vllm/vllm-openai:v0.25.1-cu130"
    texts = [t.text for t in result.workload.argv]
    # a string command is split after interpolation (compose-go's ShellCommand): the quoted value's words split too
    assert "Qwen/Qwen2.5-7B-Instruct" in texts and texts[texts.index("--served-model-name") + 1:][:2] == ["gpt-3.5", "#turbo"]
    assert "4096" in texts  # ${VAR:-default}: an empty value in .env takes the default, as Compose does
    assert result.report.facts.get("vllm.version") == "0.25.1"
    notes = result.report.notes + result.workload.notes
    assert any("${IMAGE_TAG}" in n and ".env" in n for n in notes), notes


def test_a_list_items_value_stays_one_argument_and_a_string_commands_splits(tmp_path):
    (tmp_path / ".env").write_text("TOOL_ARGS=--enable-auto-tool-choice --tool-call-parser hermes\nNAME=a b\n")
    listed = "services:\n  vllm:\n    image: vllm/vllm-openai:v0.25.1\n    command: [--model, m, --served-model-name, \"${NAME}\"]\n"
    (tmp_path / "docker-compose.yml").write_text(listed)
    (result,) = scan([str(tmp_path / "docker-compose.yml")], tmp_path).workloads
    assert [t.text for t in result.workload.argv][-1] == "a b"
    (tmp_path / "docker-compose.yml").write_text(
        "services:\n  vllm:\n    image: vllm/vllm-openai:v0.25.1\n    command: >\n      --model m ${TOOL_ARGS:-}\n")
    (result,) = scan([str(tmp_path / "docker-compose.yml")], tmp_path).workloads
    assert [t.text for t in result.workload.argv] == ["--model", "m", "--enable-auto-tool-choice", "--tool-call-parser",
                                                      "hermes"]
    assert "KVD004" not in _fired(result)


def test_without_an_env_file_the_variables_stay_the_hosts(tmp_path):
    (tmp_path / "docker-compose.yml").write_text(COMPOSE)
    (result,) = scan([str(tmp_path / "docker-compose.yml")], tmp_path).workloads
    assert "${IMAGE_TAG}" in (result.workload.image or "")
    assert result.report.facts.get("vllm.version") is None


def test_env_file_lines_as_compose_reads_them(tmp_path):
    (tmp_path / ".env").write_text(DOTENV + "not a line\nQUOTED='a # b'\n")
    env = project_env(str(tmp_path / "docker-compose.yml"))
    assert env == {"IMAGE_TAG": "v0.25.1-cu130", "MODEL_PATH": "Qwen/Qwen2.5-7B-Instruct",
                   "MODEL_NAME": "gpt-3.5 #turbo", "MAX_MODEL_LEN": "", "QUOTED": "a # b"}


RED_HAT_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: "%s"
          args: ["--port", "8000", "--otlp-endpoint", "otel:4317", "--grpc-port", "8033"]
          resources: {limits: {nvidia.com/gpu: 1}}
"""


def test_red_hat_vllm_images_read_args_as_serve_arguments_with_the_adapters_own(tmp_path):
    for image in ("registry.redhat.io/rhoai/vllm:latest", "quay.io/modh/vllm:rhoai-2.16-cuda"):
        path = tmp_path / "deploy.yaml"
        path.write_text(RED_HAT_DEPLOYMENT % image)
        (result,) = scan([str(path)], tmp_path).workloads
        assert result.error is None, image
        refused = next(p.finding for p in result.placed if p.finding.rule_id == "KVD004")
        assert "--otlp-endpoint" in refused.title and "--grpc-port" not in refused.title, refused.title


def test_the_tgis_adapter_module_is_a_launcher_of_vllms_engine(tmp_path):
    path = tmp_path / "runtime.yaml"
    path.write_text("""\
apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata: {name: vllm-grpc}
spec:
  containers:
    - name: kserve-container
      image: quay.io/modh/vllm:rhoai-2.16-cuda
      command: ["python", "-m", "vllm_tgis_adapter"]
      args: ["--port=8080", "--model=/mnt/models", "--grpc-port=8033", "--max-new-tokens", "2048"]
""")
    (result,) = scan([str(path)], tmp_path).workloads
    assert result.error is None and "KVD004" not in _fired(result)


def _compose(tmp_path, tag: str, command: str):
    path = tmp_path / "docker-compose.yml"
    path.write_text(f"services:\n  vllm:\n    image: vllm/vllm-openai:{tag}\n    command: {command}\n")
    (result,) = scan([str(path)], tmp_path).workloads
    return result


def test_a_release_between_two_read_ones_is_judged_by_both_for_its_arguments(tmp_path):
    # 0.14.0 is not in the pack; 0.13.0 and 0.14.1 are, and both refuse a flag no release has
    result = _compose(tmp_path, "v0.14.0", "--model Qwen/Qwen3-8B --max-model-length 4096")
    refused = next(p.finding for p in result.placed if p.finding.rule_id == "KVD004")
    assert refused.status == "fired" and "--max-model-length" in refused.title
    assert "0.13.0" in refused.cause and "0.14.1" in refused.cause
    # what both accept is accepted
    assert "KVD004" not in _fired(_compose(tmp_path, "v0.14.0", "--model Qwen/Qwen3-8B --max-model-len 4096"))


def test_an_unknown_value_of_a_many_valued_option_takes_the_words_after_it(tmp_path):
    # compose-go splits a string command without comment syntax: '#' words after ${MODEL_NAME} are served names
    result = _compose(tmp_path, "v0.25.1", "'--model Qwen/Qwen3-8B --served-model-name ${MODEL_NAME} # an old client'")
    assert "KVD004" not in _fired(result)
    assert any("--served-model-name takes its value from ${MODEL_NAME}" in n
               for n in result.report.notes + result.workload.notes)


RAY_SAMPLE = """\
apiVersion: ray.io/v1
kind: RayService
metadata: {name: llama-3-8b}
spec:
  serveConfigV2: |
    applications:
    - name: llm
      route_prefix: /
      import_path: ray-operator.config.samples.vllm.serve:model
      runtime_env:
        env_vars:
          MODEL_ID: "meta-llama/Meta-Llama-3-8B-Instruct"
          TENSOR_PARALLELISM: "%s"
          PIPELINE_PARALLELISM: "1"
  rayClusterConfig:
    headGroupSpec:
      rayStartParams: {num-gpus: "0"}
      template:
        spec:
          containers: [{name: ray-head, image: "rayproject/ray-ml:2.33.0.914af0-py311"}]
    workerGroupSpecs:
    - groupName: gpu-group
      replicas: 1
      maxReplicas: 1
      rayStartParams: {}
      template:
        spec:
          containers:
          - name: llm
            image: rayproject/ray-ml:2.33.0.914af0-py311
            resources: {limits: {nvidia.com/gpu: "1"}}
"""


def test_kuberays_vllm_sample_reads_its_parallelism_variables(tmp_path):
    # KubeRay's and GKE's sample serve.py: tensor-parallel-size from TENSOR_PARALLELISM, pipeline from PIPELINE_...
    path = tmp_path / "ray-service.vllm.yaml"
    path.write_text(RAY_SAMPLE % "2")
    (result,) = scan([str(path)], tmp_path).workloads
    assert "KVD201" in _fired(result)  # 2 GPUs wanted, 1 in the cluster
    path.write_text(RAY_SAMPLE % "1")
    (result,) = scan([str(path)], tmp_path).workloads
    assert "KVD201" not in _fired(result)
