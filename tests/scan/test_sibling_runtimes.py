"""A KServe InferenceService given alone (a pre-commit hook's changed file, `kvdoctor scan isvc.yaml`) runs on the
ServingRuntime of a YAML file beside it: KServe's docs apply a runtime and the InferenceService that names it
together (`kubectl apply -f`), and the predictor pod is built from both (MergeRuntimeContainers)."""

from __future__ import annotations

from scan_support import scan
from test_kserve_runtimes import MODEL, RUNTIME

from kvdoctor.scan.run import find_workloads


def _folder(tmp_path, **files: str):
    folder = tmp_path / "manifests"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def test_an_inferenceservice_given_alone_runs_on_the_runtime_beside_it_on_that_files_lines(tmp_path):
    folder = _folder(tmp_path, **{"03-servingruntime.yaml": RUNTIME, "04-inferenceservice.yaml": MODEL})
    report = scan([str(folder / "04-inferenceservice.yaml")], tmp_path)
    (model,) = report.workloads
    workload = model.workload
    assert workload.title == "InferenceService/qwen (container kserve-container)"
    assert [t.text for t in workload.argv] == ["--port=8080", "--model=/mnt/models", "--served-model-name=qwen",
                                               "--tensor-parallel-size=2"]  # fmt: skip
    runtime_file = str(folder / "03-servingruntime.yaml")
    assert workload.image == "vllm/vllm-openai:v0.10.2" and workload.where(workload.image_line) == (runtime_file, 11)
    assert any("not in the scanned files: read from" in n and runtime_file in n for n in workload.notes)


def test_a_runtime_auto_selected_by_format_beside_it_is_found_and_a_malformed_sibling_is_passed_over(tmp_path):
    folder = _folder(tmp_path, **{"runtime.yaml": RUNTIME, "isvc.yaml": MODEL.replace("      runtime: vllm-runtime\n", ""),
                                  "broken.yaml": "kind: ServingRuntime\n  bad: [\n"})  # fmt: skip
    (model,) = find_workloads([str(folder / "isvc.yaml")])[1]
    assert model.kind == "InferenceService" and model.image == "vllm/vllm-openai:v0.10.2"


def test_a_sibling_runtime_of_another_name_or_one_that_runs_no_vllm_is_not_read(tmp_path):
    other_name = _folder(tmp_path, **{"runtime.yaml": RUNTIME, "isvc.yaml": MODEL.replace("vllm-runtime", "triton")})
    files, found, notes = find_workloads([str(other_name / "isvc.yaml")])
    assert found == [] and any("not in the scanned files" in n and "not checked" in n for n in notes)
    sklearn = RUNTIME.replace("vllm/vllm-openai:v0.10.2", "kserve/sklearnserver:v0.14.0").replace(
        "--model=/mnt/models", "--model_dir=/mnt/models").replace("        - --served-model-name={{.Name}}\n", "")  # fmt: skip
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "runtime.yaml").write_text(sklearn)
    (tmp_path / "b" / "isvc.yaml").write_text(MODEL.replace("      args:\n        - --tensor-parallel-size=2\n", ""))
    assert find_workloads([str(tmp_path / "b" / "isvc.yaml")])[1] == []


def test_a_malformed_inferenceservice_is_one_line_exit_2(run_cli, tmp_path):
    folder = _folder(tmp_path, **{"runtime.yaml": RUNTIME, "isvc.yaml": MODEL.replace("  predictor:", "  predictor: [")})
    result = run_cli("scan", str(folder / "isvc.yaml"), "--gpu", "A100", "--no-compile")
    assert result.code == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"kvdoctor: error: {folder / 'isvc.yaml'}:") and "malformed YAML" in line


def test_a_runtime_elsewhere_in_the_same_checkout_is_read_and_none_outside_one(tmp_path):
    """A GitOps tree keeps its platform's ClusterServingRuntime apart from the apps (a real repository's shape,
    manifest batch s54, agud97/k8s-vllm: gitops/platform/kserve/ and gitops/apps/llm-serving/): the runtime is looked
    for in the git checkout the InferenceService lies in, never above it."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "gitops" / "platform" / "kserve").mkdir(parents=True)
    (repo / "gitops" / "apps" / "llm").mkdir(parents=True)
    (repo / "gitops" / "platform" / "kserve" / "runtime.yaml").write_text(RUNTIME)
    isvc = repo / "gitops" / "apps" / "llm" / "isvc.yaml"
    isvc.write_text(MODEL)
    (model,) = find_workloads([str(isvc)])[1]
    assert model.image == "vllm/vllm-openai:v0.10.2"
    assert any("in the same repository" in n and "platform/kserve/runtime.yaml" in n for n in model.notes)
    (repo / ".git").rmdir()  # no checkout: nothing above the file's folder is read
    assert find_workloads([str(isvc)])[1] == []
