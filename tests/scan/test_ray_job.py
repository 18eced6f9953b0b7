"""KubeRay: a Ray container without a command runs KubeRay's `ray start`, not its image's entrypoint; a RayJob's
spec.entrypoint is the command submitted to the cluster (the shapes of vllm-project/aibrix's
development/tutorials/distributed raycluster.yaml and rayjob.yaml)."""

from __future__ import annotations

from kvdoctor.scan.run import read_manifests

CLUSTER = """\
apiVersion: ray.io/v1
kind: {kind}
metadata:
  name: vllm-server
spec:
{entrypoint}  {cluster}:
    headGroupSpec:
      rayStartParams: {{}}
      template:
        {annotations}spec:
          containers:
          - name: ray-head
            image: aibrix/vllm-openai:v0.9.2-distributed
            env:
            - name: TP
              value: "2"
            resources:
              limits:
                nvidia.com/gpu: "1"
    workerGroupSpecs:
    - groupName: small-group
      template:
        spec:
          containers:
          - name: ray-worker
            image: aibrix/vllm-openai:v0.9.2-distributed
"""


def _read(tmp_path, kind="RayCluster", entrypoint="", annotations=""):
    text = CLUSTER.format(kind=kind, entrypoint=entrypoint, annotations=annotations,
                          cluster="rayClusterSpec" if kind == "RayJob" else "rayClusterSpecUnused")  # fmt: skip
    if kind == "RayCluster":  # a RayCluster's spec is the cluster spec itself
        text = text.replace("  rayClusterSpecUnused:\n", "").replace("\n    ", "\n  ")
    path = tmp_path / "ray.yaml"
    path.write_text(text)
    _, found, notes, unread = read_manifests([str(path)])
    assert not unread
    return found, notes


def test_ray_containers_without_a_command_run_ray_start_and_are_named_not_checked(tmp_path):
    found, notes = _read(tmp_path)
    assert found == []  # was two workloads that errored: 'nothing to judge: no model given'
    assert any("KubeRay runs `ray start`" in n and "ray-head, ray-worker" in n for n in notes)


def test_the_overwrite_annotation_keeps_the_images_entrypoint(tmp_path):
    found, _ = _read(tmp_path, annotations='metadata:\n          annotations:\n            ray.io/overwrite-container-cmd: "true"\n        ')
    assert [w.container for w in found] == ["ray-head", "ray-worker"]


def test_a_ray_jobs_entrypoint_is_the_vllm_workload_with_the_head_groups_image_and_env(tmp_path):
    entry = '  entrypoint: vllm serve facebook/opt-13b --tensor-parallel-size $TP --distributed-executor-backend ray\n'
    found, notes = _read(tmp_path, kind="RayJob", entrypoint=entry)
    (job,) = found
    assert (job.kind, job.name, job.container, job.image) == ("RayJob", "vllm-server", "entrypoint",
                                                              "aibrix/vllm-openai:v0.9.2-distributed")  # fmt: skip
    assert [t.text for t in job.argv][:3] == ["facebook/opt-13b", "--tensor-parallel-size", "2"]
    assert job.gpu_limit is None and job.command_line == 6


SERVE_LLM_CONFIG = """\
applications:
  - name: llm_app
    route_prefix: /
    import_path: ray.serve.llm:build_openai_app
    args:
      llm_configs:
        - model_loading_config:
            model_id: qwen
            model_source: Qwen/Qwen2.5-7B-Instruct
          accelerator_type: L4
          engine_kwargs:
            tensor_parallel_size: 2
            max_model_len: 8192
"""


def test_a_ray_serve_config_file_is_read_as_a_rayservices_serve_config_and_one_without_engine_data_named(tmp_path):
    # `serve run config.yaml` takes what a RayService holds in spec.serveConfigV2; robbypambudi/ray-vllm-benchmark's
    # deployer/config.yaml imports vLLM's api_server app with env vars on a deployment: named, not checked
    (tmp_path / "serve.yaml").write_text(SERVE_LLM_CONFIG)
    (tmp_path / "other.yaml").write_text(
        "applications:\n  - name: vllm-gpt2\n    import_path: vllm.entrypoints.openai.api_server:app\n"
        "    deployments:\n      - name: VLLMDeployment\n        runtime_env: {env_vars: {MODEL_NAME: gpt2}}\n")
    _, found, notes, _ = read_manifests([str(tmp_path)])
    (llm,) = found
    assert (llm.kind, llm.name, llm.container) == ("Ray Serve config", "serve.yaml", "llm_configs qwen")
    assert [t.text for t in llm.argv][:1] == ["Qwen/Qwen2.5-7B-Instruct"] and llm.line == 7
    assert any("other.yaml:1: a Ray Serve config, application vllm-gpt2" in n for n in notes)
