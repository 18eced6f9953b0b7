"""NVIDIA Dynamo's DynamoGraphDeployment: each service's mainContainer that runs dynamo.vllm, named by its service."""

from __future__ import annotations

from scan_support import scan

from kvdoctor.scan.run import find_workloads, read_manifests

GRAPH = """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: vllm-disagg
spec:
  services:
    Frontend:
      componentType: frontend
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.4.0
    VllmDecodeWorker:
      envFromSecret: hf-token-secret
      resources:
        limits:
          gpu: "2"
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.4.0
          command: [/bin/sh, -c]
          args:
            - "python3 -m dynamo.vllm --model Qwen/Qwen3-0.6B --tensor-parallel-size 4"
    VllmPrefillWorker:
      resources:
        limits:
          gpu: "1"
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.4.0
          command: [/bin/sh, -c]
          args:
            - "python3 -m dynamo.vllm --model Qwen/Qwen3-0.6B --is-prefill-worker"
"""


def _graph(tmp_path):
    path = tmp_path / "disagg.yaml"
    path.write_text(GRAPH)
    return str(path)


def test_each_worker_service_is_a_workload_with_its_gpus_and_without_dynamos_own_options(tmp_path):
    decode, prefill = find_workloads([_graph(tmp_path)])[1]
    assert (decode.kind, decode.name, decode.container) == ("DynamoGraphDeployment", "vllm-disagg", "VllmDecodeWorker")
    assert (decode.gpu_limit, decode.gpu_limit_line) == (2, 16) and "hf-token-secret" in decode.env_from[0]
    assert prefill.container == "VllmPrefillWorker" and "--is-prefill-worker" not in [t.text for t in prefill.argv]


def test_a_workers_parallel_sizes_are_compared_with_its_services_gpus(tmp_path):
    report = scan([_graph(tmp_path)], tmp_path, gpu=None)
    decode = next(r for r in report.workloads if r.workload.container == "VllmDecodeWorker")
    prefill = next(r for r in report.workloads if r.workload.container == "VllmPrefillWorker")
    assert report.exit_code("error") == 1  # TP 4 on a 2-GPU service
    assert [(p.finding.rule_id, p.location.line) for p in decode.placed if p.finding.status == "fired"
            and p.finding.severity == "error"] == [("KVD201", 16)]  # fmt: skip
    assert prefill.error is None and not [p for p in prefill.placed if p.finding.status == "fired"
                                          and p.finding.severity == "error"]  # fmt: skip


def test_dynamos_runtime_tag_is_dynamos_release_not_vllms(tmp_path):
    report = scan([_graph(tmp_path)], tmp_path, gpu=None)
    assert {r.report.facts["vllm.version"] for r in report.workloads} == {None}  # vllm-runtime:0.4.0 is Dynamo 0.4.0


def test_dynamos_later_options_disaggregation_mode_and_negatable_switches_are_not_vllms(tmp_path):
    # the shape of vllm-project/aibrix brixbench's DynamoGraphDeployments (a Dynamo 1.x runtime): an exported-
    # variable script ending in python3 -m dynamo.vllm ... --disaggregation-mode decode
    text = GRAPH.replace("--is-prefill-worker", "--disaggregation-mode prefill --no-enable-multimodal").replace(
        "--tensor-parallel-size 4", "--tensor-parallel-size 2 --disaggregation-mode=decode")
    path = tmp_path / "disagg.yaml"
    path.write_text(text)
    report = scan([str(path)], tmp_path, gpu=None)
    for result in report.workloads:
        words = [t.text for t in result.workload.argv]
        assert not [w for w in words if "disaggregation" in w or "multimodal" in w or w in ("prefill", "decode")]
        assert result.error is None and "KVD004" not in {p.finding.rule_id for p in result.placed
                                                          if p.finding.status == "fired"}  # fmt: skip


def test_a_graph_of_dynamos_earlier_sdk_is_named_as_such(tmp_path):
    # vllm-project/aibrix test/regression/v0.4.0/dynamo/disagg.yaml: `dynamo serve graphs.disagg:Processor`, the
    # engine arguments in DYN_DEPLOYMENT_CONFIG (was: 'kvdoctor scan does not read kind DynamoGraphDeployment')
    text = GRAPH.replace("python3 -m dynamo.vllm --model Qwen/Qwen3-0.6B --tensor-parallel-size 4",
                         "dynamo serve graphs.disagg:VllmWorker --service-name VllmWorker").replace(
        "python3 -m dynamo.vllm --model Qwen/Qwen3-0.6B --is-prefill-worker", "dynamo serve graphs.disagg:PrefillWorker")
    path = tmp_path / "disagg.yaml"
    path.write_text(text)
    _, found, notes, _ = read_manifests([str(path)])
    assert found == []
    (note,) = notes
    assert "Dynamo's SDK (`dynamo serve graphs.disagg:VllmWorker`)" in note and "does not read kind" not in note
