"""KServe's Hugging Face runtime (KServe docs, "Hugging Face LLM serving runtime"): an InferenceService whose
predictor.model has modelFormat huggingface runs KServe's huggingfaceserver, which serves with vLLM's engine unless
--backend=huggingface; KServe's own options apart, vLLM's read as vllm serve; the release the runtime's image installs."""

from __future__ import annotations

import subprocess
import sys

from kvdoctor.scan.run import read_manifests
from tests.scan.scan_support import scan

ISVC = """\
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: huggingface-llama3
spec:
  predictor:
    model:
      modelFormat:
        name: huggingface
{runtime}{image}      args:
        - --model_name=llama3
        - --model_id=meta-llama/meta-llama-3-8b-instruct
        - --tensor-parallel-size=2
        - --max_length
        - "8192"
{backend}      resources:
        limits:
          nvidia.com/gpu: "{gpus}"
"""
RUNTIME = """\
apiVersion: serving.kserve.io/v1alpha1
kind: ClusterServingRuntime
metadata:
  name: kserve-huggingfaceserver
spec:
  supportedModelFormats:
    - name: huggingface
      version: "1"
      autoSelect: true
  containers:
    - name: kserve-container
      image: kserve/huggingfaceserver:{tag}
      args:
        - --model_name={{{{.Name}}}}
"""


def _write(tmp_path, runtime="", image="", backend="", gpus="2", name="isvc.yaml"):
    path = tmp_path / name
    path.write_text(ISVC.format(runtime=runtime, image=image, backend=backend, gpus=gpus))
    return path


def test_a_huggingface_model_is_vllm_serve_with_kserves_own_options_apart(tmp_path):
    _, found, _, _ = read_manifests([str(_write(tmp_path))])
    (workload,) = found
    assert [t.text for t in workload.argv] == ["meta-llama/meta-llama-3-8b-instruct", "--tensor-parallel-size=2",
                                               "--max-model-len", "8192"]  # fmt: skip
    assert [t.line for t in workload.argv][:2] == [12, 13]
    assert (workload.kind, workload.container, workload.gpu_limit) == ("InferenceService", "kserve-container", 2)
    assert any("KServe's own options, not vLLM's, left out: --model_name llama3 --model_id meta-llama" in n
               for n in workload.notes)  # fmt: skip
    # no image here: the release is the built-in runtime's, unknown, named as what decides it (never a PASS)
    assert workload.vllm_pin is None and any("kserve/huggingfaceserver:vX.Y.Z" in u for u in workload.undecided)


def test_the_runtimes_image_names_the_vllm_release_it_installs(tmp_path):
    (tmp_path / "runtime.yaml").write_text(RUNTIME.format(tag="v0.15.2"))
    _write(tmp_path)
    _, found, _, _ = read_manifests([str(tmp_path)])
    (workload,) = found
    assert (workload.image, workload.vllm_pin) == ("kserve/huggingfaceserver:v0.15.2", "0.8.5")
    assert workload.undecided == () and any("huggingface_server.Dockerfile:57,83" in n for n in workload.notes)
    result = scan([str(tmp_path)], tmp_path).workloads[0]
    assert result.report.facts["vllm.version"] == "0.8.5"


def test_a_model_image_of_an_unlisted_tag_leaves_the_release_unknown(tmp_path):
    path = _write(tmp_path, image="      image: kserve/huggingfaceserver:latest\n")
    (workload,) = read_manifests([str(path)])[1]
    assert workload.vllm_pin is None and any("a tag with no vLLM release listed" in u for u in workload.undecided)


def test_too_few_gpus_for_the_tensor_parallel_size_is_kvd201(tmp_path):
    result = scan([str(_write(tmp_path, gpus="1"))], tmp_path).workloads[0]
    assert "KVD201" in {p.finding.rule_id for p in result.placed}


def test_the_huggingface_backend_and_other_runtimes_are_not_vllm(tmp_path):
    off = _write(tmp_path, backend="        - --backend=huggingface\n", name="off.yaml")
    task = _write(tmp_path, backend="        - --task=fill_mask\n", name="task.yaml")
    other = _write(tmp_path, runtime="      runtime: my-triton\n", name="other.yaml")
    sklearn = tmp_path / "sklearn.yaml"
    sklearn.write_text(ISVC.format(runtime="", image="", backend="", gpus="1").replace("name: huggingface", "name: sklearn"))
    for path in (off, task, other, sklearn):
        assert read_manifests([str(path)])[1] == [], path.name


def test_a_path_that_is_not_there_is_one_line_and_exit_2(tmp_path):
    run = subprocess.run([sys.executable, "-m", "kvdoctor", "scan", str(tmp_path / "isvc-missing.yaml"), "--offline"],
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr


WRAPPER_RUNTIME = """\
apiVersion: serving.kserve.io/v1alpha1
kind: ClusterServingRuntime
metadata:
  name: warm-huggingfaceserver
spec:
  supportedModelFormats:
    - name: huggingface
      autoSelect: true
  containers:
    - name: kserve-container
      image: kserve/huggingfaceserver:v0.16.0
      command: ["/bin/bash"]
      args:
        - "-c"
        - |
          cat /mnt/models/* > /dev/null
          python3 -m huggingfaceserver "$@"
        - "--"
        - --model_name={{.Name}}
"""


def test_a_runtime_whose_shell_script_hands_its_arguments_to_the_server_is_read(tmp_path):
    (tmp_path / "runtime.yaml").write_text(WRAPPER_RUNTIME)
    _write(tmp_path)
    (workload,) = read_manifests([str(tmp_path)])[1]
    assert [t.text for t in workload.argv][:2] == ["meta-llama/meta-llama-3-8b-instruct", "--tensor-parallel-size=2"]
    assert workload.vllm_pin == "0.9.2"
    (tmp_path / "runtime.yaml").write_text(WRAPPER_RUNTIME.replace('python3 -m huggingfaceserver "$@"', "sleep 1"))
    assert read_manifests([str(tmp_path)])[1] == []  # a script that runs something else: not the server
