"""KServe shapes whose container is not under spec.predictor.containers (KServe's CRDs and docs): a predictor.model
on a ServingRuntime of the scanned files, KFServing v1alpha2's custom container, and the v1beta1 field that is not there
(spec.predictor.container)."""

from __future__ import annotations

from pathlib import Path

from scan_support import finding, scan

RUNTIME = """\
apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata:
  name: vllm-runtime
spec:
  supportedModelFormats:
    - name: vLLM
      autoSelect: true
  containers:
    - name: kserve-container
      image: vllm/vllm-openai:v0.10.2
      args:
        - --port=8080
        - --model=/mnt/models
        - --served-model-name={{.Name}}
"""

MODEL = """\
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: qwen
spec:
  predictor:
    nodeSelector:
      nvidia.com/gpu.product: NVIDIA-L4
    model:
      modelFormat:
        name: vLLM
      runtime: vllm-runtime
      storageUri: hf://Qwen/Qwen2.5-7B-Instruct
      args:
        - --tensor-parallel-size=2
      resources:
        limits:
          nvidia.com/gpu: "1"
"""


def by_kind(report) -> dict:
    return {r.workload.kind: r for r in report.workloads}


def test_a_model_on_a_runtime_of_the_scanned_files_is_the_pod_kserve_builds_from_both(tmp_path):
    (tmp_path / "runtime.yaml").write_text(RUNTIME)
    (tmp_path / "isvc.yaml").write_text(MODEL.replace("      runtime:", "      name: \"\"\n      runtime:"))  # 1 line
    report = scan([str(tmp_path)], tmp_path)
    model = by_kind(report)["InferenceService"]  # its name "" is the runtime container's (MergeRuntimeContainers)
    assert model.workload.title == "InferenceService/qwen (container kserve-container)"
    assert [t.text for t in model.workload.argv] == ["--port=8080", "--model=/mnt/models", "--served-model-name=qwen",
                                                     "--tensor-parallel-size=2"]  # the runtime's args, then the model's
    assert model.workload.image == "vllm/vllm-openai:v0.10.2"
    assert (Path(model.sources["vllm."].file).name, model.sources["vllm."].line) == ("runtime.yaml", 11)
    short = finding(model, "KVD201")  # TP 2 on the model's one GPU: at the model's limit
    assert (Path(short.location.file).name, short.location.line) == ("isvc.yaml", 19)
    assert model.sources["gpu."].what == "nvidia.com/gpu.product: NVIDIA-L4"
    assert any("runs on ServingRuntime vllm-runtime" in n and "hf://Qwen/Qwen2.5-7B-Instruct" in n
               for n in model.workload.notes)  # fmt: skip
    # the runtime the model runs on is that model's pod, not a workload of its own too (batch s84's pairs)
    assert "ServingRuntime" not in by_kind(report)
    alone = scan([str(tmp_path / "runtime.yaml")], tmp_path)  # with no model on it, the runtime is read on its own
    assert "ServingRuntime" in by_kind(alone)
    # ... also when a kustomization renders both (batch s87: the runtime read as the kustomization's)
    (tmp_path / "kustomization.yaml").write_text("resources:\n  - runtime.yaml\n  - isvc.yaml\n")
    rendered = scan([str(tmp_path / "kustomization.yaml")], tmp_path)
    assert sorted(by_kind(rendered)) == ["InferenceService"]


def test_a_model_without_a_runtime_name_takes_the_one_runtime_that_auto_selects_its_format(tmp_path):
    (tmp_path / "all.yaml").write_text(RUNTIME + "---\n" + MODEL.replace("      runtime: vllm-runtime\n", ""))
    assert "InferenceService" in by_kind(scan([str(tmp_path)], tmp_path))


def test_a_model_whose_runtime_is_not_scanned_is_named_not_checked(tmp_path):
    (tmp_path / "isvc.yaml").write_text(MODEL.replace("vllm-runtime", "vllm-runtime-elsewhere"))
    report = scan([str(tmp_path)], tmp_path)
    assert not report.workloads
    assert any("spec.predictor.model" in n and "not checked" in n for n in report.notes)


def test_a_model_on_a_runtime_that_does_not_run_vllm_is_no_workload(tmp_path):
    other = RUNTIME.replace("vllm/vllm-openai:v0.10.2", "kserve/sklearnserver:v0.14.0").replace(
        "        - --served-model-name={{.Name}}\n", "")  # fmt: skip
    (tmp_path / "runtime.yaml").write_text(other.replace("--port=8080", "--http_port=8080").replace(
        "--model=/mnt/models", "--model_dir=/mnt/models"))  # fmt: skip
    (tmp_path / "isvc.yaml").write_text(MODEL.replace("vLLM", "sklearn").replace("      args:\n        - --tensor-parallel-size=2\n", ""))
    assert not scan([str(tmp_path)], tmp_path).workloads


SINGULAR = """\
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: llama
spec:
  predictor:
    container:
      name: kserve-container
      image: vllm/vllm-openai:v0.10.2
      args: [--model, Qwen/Qwen2.5-7B-Instruct, --max-model-len, "4096"]
      resources: {limits: {nvidia.com/gpu: 1}}
"""


def test_a_v1beta1_predictor_container_is_checked_as_meant_and_never_passes(run_cli, tmp_path):
    (tmp_path / "isvc.yaml").write_text(SINGULAR)
    (result,) = scan([str(tmp_path)], tmp_path).workloads
    assert result.workload.title == "InferenceService/llama (container kserve-container)"  # KServe's default name
    assert [t.text for t in result.workload.argv][:2] == ["--model", "Qwen/Qwen2.5-7B-Instruct"]
    (why,) = [u for u in result.unjudged if "spec.predictor.container" in u]
    assert "isvc.yaml:7: spec.predictor.container is not a field of KServe's InferenceService" in why  # the key's line
    assert "never runs this container" in why and result.verdict == "WARN"
    cli = run_cli("scan", str(tmp_path / "isvc.yaml"), "--gpu", "A100", "--no-compile", "--offline")
    assert cli.code == 0 and not cli.stderr and cli.stdout.startswith("WARN")
    assert "never runs this container" in cli.stdout


def test_the_same_singular_container_without_vllm_is_no_workload(tmp_path):
    (tmp_path / "isvc.yaml").write_text(SINGULAR.replace("vllm/vllm-openai:v0.10.2", "kserve/sklearnserver:v0.14.0")
                                        .replace("[--model, Qwen/Qwen2.5-7B-Instruct, --max-model-len, \"4096\"]",
                                                 "[--model_dir=/mnt/models]"))  # fmt: skip
    assert not scan([str(tmp_path)], tmp_path).workloads


def test_a_kfserving_v1alpha2_custom_container_is_the_predictors_container(tmp_path):
    (tmp_path / "isvc.yaml").write_text(
        "apiVersion: serving.kubeflow.org/v1alpha2\nkind: InferenceService\nmetadata:\n  name: old\nspec:\n  default:\n"
        "    predictor:\n      custom:\n        container:\n          image: vllm/vllm-openai:v0.10.2\n"
        "          args: [--model, Qwen/Qwen2.5-7B-Instruct]\n")  # fmt: skip
    (result,) = scan([str(tmp_path)], tmp_path).workloads
    assert result.workload.name == "old" and result.error is None
    assert [t.text for t in result.workload.argv] == ["--model", "Qwen/Qwen2.5-7B-Instruct"]
