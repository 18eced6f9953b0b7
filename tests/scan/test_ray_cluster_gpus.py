"""KubeRay clusters: one vLLM engine's -tp x -pp compared with the cluster's most GPUs (head + each worker group's
GPUs per pod x replicas, x maxReplicas when enableInTreeAutoscaling is true), a shortfall only (KVD201). Shapes from
KubeRay's RayService / RayCluster API reference and Ray Serve LLM's RayService example (llm_configs, engine_kwargs)."""

from __future__ import annotations

import subprocess
import sys

from kvdoctor.check.run import CheckSettings
from kvdoctor.scan.judge import ScanDefaults
from kvdoctor.scan.run import read_manifests, run_scan
from tests.scan.scan_support import by_name, scan

RAY_SERVICE = """\
apiVersion: ray.io/v1
kind: RayService
metadata:
  name: {name}
spec:
  serveConfigV2: |
    applications:
    - name: llms
      import_path: {import_path}
      route_prefix: "/"
      args:
        llm_configs:
        - model_loading_config:
            model_id: qwen
            model_source: Qwen/Qwen2.5-7B-Instruct
          engine_kwargs:
            tensor_parallel_size: 4
            pipeline_parallel_size: 2
  rayClusterConfig:
    enableInTreeAutoscaling: {autoscaling}
    headGroupSpec:
      rayStartParams: {{num-gpus: "0"}}
      template:
        spec:
          containers:
          - name: ray-head
            image: rayproject/ray-llm:2.46.0-py311-cu124
    workerGroupSpecs:
    - groupName: gpu-group
      replicas: {replicas}
      minReplicas: 1
      maxReplicas: {max_replicas}
      rayStartParams: {{}}
      template:
        spec:
          containers:
          - name: llm
            image: rayproject/ray-llm:2.46.0-py311-cu124
            resources:
              limits:
                nvidia.com/gpu: "2"
"""


def _write(tmp_path, name="llm", import_path="ray.serve.llm:build_openai_app", autoscaling="false", replicas="2",
           max_replicas="4"):  # fmt: skip
    path = tmp_path / f"{name}.yaml"
    path.write_text(RAY_SERVICE.format(name=name, import_path=import_path, autoscaling=autoscaling, replicas=replicas,
                                       max_replicas=max_replicas))  # fmt: skip
    return path


def _rules(result) -> set[str]:
    return {p.finding.rule_id for p in result.placed}


def test_a_cluster_with_fewer_gpus_than_one_engine_needs_is_kvd201_on_the_tensor_parallel_line(tmp_path):
    path = _write(tmp_path)  # head 0 + 2 GPUs x replicas 2 = 4 < tp 4 x pp 2
    (workload,) = read_manifests([str(path)])[1]
    assert workload.cluster_gpus == (4, "across the Ray cluster at most (head 0 + gpu-group 2 x replicas 2)")
    result = by_name(scan([str(path)], tmp_path))["llm"]
    placed = next(p for p in result.placed if p.finding.rule_id == "KVD201")
    assert (placed.location.file, placed.location.line) == (str(path), 17)  # tensor_parallel_size: 4
    assert "4 GPU(s)" in placed.finding.title and "8" in placed.finding.title


def test_an_autoscaled_cluster_counts_max_replicas_and_more_gpus_than_needed_is_no_finding(tmp_path):
    path = _write(tmp_path, autoscaling="true", replicas="1", max_replicas="4")  # 2 x 4 = 8 = tp x pp
    (workload,) = read_manifests([str(path)])[1]
    assert workload.cluster_gpus[0] == 8 and "maxReplicas 4" in workload.cluster_gpus[1]
    assert not {"KVD201", "KVD202"} & _rules(by_name(scan([str(path)], tmp_path))["llm"])
    bigger = _write(tmp_path, name="big", replicas="10")  # 20 GPUs: other engines and Ray's own tasks may use them
    assert not {"KVD201", "KVD202"} & _rules(by_name(scan([str(bigger)], tmp_path))["big"])


def test_a_count_not_written_as_a_number_leaves_the_cluster_uncounted(tmp_path):
    path = _write(tmp_path, replicas='"{{ .Values.workers }}"')
    (workload,) = read_manifests([str(path)])[1]
    assert workload.cluster_gpus is None
    assert "KVD201" not in _rules(by_name(scan([str(path)], tmp_path))["llm"])


def test_a_rayservice_without_vllm_is_no_workload(tmp_path):
    path = _write(tmp_path, import_path="fruit.deployment:graph")
    text = path.read_text().replace("llm_configs", "fruits").replace("engine_kwargs", "prices")
    text = text.replace("model_loading_config", "basket").replace("tensor_parallel_size", "apples")
    path.write_text(text)
    assert read_manifests([str(path)])[1] == []


RAY_CLUSTER = """\
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: vllm
spec:
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: head
          image: vllm/vllm-openai:v0.9.2
          command: ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--tensor-parallel-size", "8",
                    "--distributed-executor-backend", "ray"]
          resources:
            limits:
              nvidia.com/gpu: "1"
  workerGroupSpecs:
  - groupName: workers
    replicas: 1
    numOfHosts: 2
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: worker
          image: rayproject/ray:2.46.0-py311-gpu
          resources:
            limits:
              nvidia.com/gpu: "2"
"""


def test_a_rayclusters_own_vllm_serve_is_compared_with_the_whole_cluster(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text(RAY_CLUSTER)  # head 1 + 2 x replicas 1 x numOfHosts 2 = 5 < 8
    (result,) = scan([str(path)], tmp_path).workloads  # the worker runs KubeRay's `ray start`
    assert result.workload.cluster_gpus == (5, "across the Ray cluster at most (head 1 + workers 2 x replicas 1 x "
                                               "numOfHosts 2)")  # fmt: skip
    assert "KVD201" in _rules(result)
    path.write_text(RAY_CLUSTER.replace('"8"', '"4"'))
    assert not {"KVD201", "KVD202"} & _rules(scan([str(path)], tmp_path).workloads[0])


def test_a_path_that_is_not_there_is_one_line_and_exit_2(tmp_path):
    run = subprocess.run([sys.executable, "-m", "kvdoctor", "scan", str(tmp_path / "ray-missing.yaml"), "--offline"],
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr



RAY_JOB = """\
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: opt
spec:
  entrypoint: vllm serve facebook/opt-13b --tensor-parallel-size 8 --distributed-executor-backend ray
  rayClusterSpec:
    headGroupSpec:
      rayStartParams: {}
      template:
        spec:
          containers:
          - name: ray-head
            image: vllm/vllm-openai:v0.9.2
    workerGroupSpecs:
    - groupName: gpus
      replicas: 3
      rayStartParams: {}
      template:
        spec:
          containers:
          - name: ray-worker
            image: vllm/vllm-openai:v0.9.2
            resources:
              limits:
                nvidia.com/gpu: "2"
"""


def test_a_rayjobs_entrypoint_is_compared_with_its_clusters_most_gpus(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(RAY_JOB)  # head 0 + 2 x replicas 3 = 6 < 8
    (result,) = scan([str(path)], tmp_path).workloads  # the Ray containers run KubeRay's `ray start`
    assert (result.workload.container, result.workload.cluster_gpus[0]) == ("entrypoint", 6)
    assert "KVD201" in _rules(result)
    path.write_text(RAY_JOB.replace("replicas: 3", "replicas: 4"))
    assert "KVD201" not in _rules(scan([str(path)], tmp_path).workloads[0])


PD_SERVE_CONFIG = """\
applications:
  - name: pd
    route_prefix: /
    import_path: ray.serve.llm:build_pd_openai_app
    args:
      prefill_config:
        model_loading_config:
          model_id: qwen
          model_source: Qwen/Qwen2.5-7B-Instruct
        engine_kwargs:
          tensor_parallel_size: 2
          kv_transfer_config: {kv_connector: NixlConnector, kv_role: kv_both}
      decode_config:
        model_loading_config:
          model_id: qwen
          model_source: Qwen/Qwen2.5-7B-Instruct
        engine_kwargs:
          tensor_parallel_size: 4
          swap_space: 4
"""


def test_a_disaggregated_serve_config_is_two_engines_prefill_and_decode(tmp_path):
    # Ray Serve LLM's build_pd_openai_app (PDServingArgs: prefill_config, decode_config), as a `serve run` config file
    path = tmp_path / "pd.yaml"
    path.write_text(PD_SERVE_CONFIG)
    workloads = read_manifests([str(path)])[1]
    assert [(w.kind, w.name, w.container) for w in workloads] == [
        ("Ray Serve config", "pd.yaml", "prefill_config qwen"), ("Ray Serve config", "pd.yaml", "decode_config qwen")]
    assert [w.argv[0].text for w in workloads] == ["Qwen/Qwen2.5-7B-Instruct"] * 2
    assert "--tensor-parallel-size" in [t.text for t in workloads[1].argv]
    report = run_scan([str(path)], ScanDefaults(gpu="A100", vllm_version="0.25.1", offline=True,
                                                cache_dir=tmp_path / "cache"), CheckSettings(compile=False))
    refused = [r for r in report.workloads if any(p.finding.rule_id == "KVD004" for p in r.placed)]
    assert [r.workload.container for r in refused] == ["decode_config qwen"]  # --swap-space: gone by 0.25.1
