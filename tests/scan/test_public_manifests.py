"""Issue 27: kvdoctor scan on real public deployment files (tests/fixtures/manifests/public/, index.yaml), as they
are, with no model config, no network and no --gpu: every workload a human reads is found and checked, no error
the index does not list as true, every true error is found (one that needs the model's config.json, `needs: model
config`, is left undecided naming --model-path), a scan of many folders never aborts. The held-back
quarter (heldout: true) is measured by tools/measure_scan_public.py, never asserted on here."""

from __future__ import annotations

import re
import shutil
import zlib
from pathlib import Path

import pytest
import yaml
from scan_support import MANIFESTS, public_index, scan

PUBLIC = MANIFESTS / "public"
INDEX = public_index()
SEEN = [e for e in INDEX if not e["heldout"]]
DECIDING_INPUTS = ("--gpu", "--model-path", "--vllm-version")
# another accelerator than an NVIDIA GPU: no input decides what kvdoctor does not model (scan/accelerator.py)
SETTLED = ("not an NVIDIA GPU:",)
# Seen files that scan does not pass yet, each with what differs (strict xfail: passing one fails the test, so the
# entry is removed with the change that mends it): the files released from held-out in stop 58.
NOT_READ_YET: dict[str, str] = yaml.safe_load((Path(__file__).parent / "public_not_passing_yet.yaml").read_text())


def _seen_params():
    return [pytest.param(e, id=e["file"].split("/")[-1], marks=pytest.mark.xfail(strict=True, reason=why))
            if (why := NOT_READ_YET.get(e["file"])) else pytest.param(e, id=e["file"].split("/")[-1]) for e in SEEN]


def _walked(entry: dict) -> bool:
    """Whether a directory walk reads the file (YAML, *.yaml.tftpl, shell scripts, Python naming vLLM) and scan reads
    its workloads."""
    from kvdoctor.scan.documents import PYTHON_SUFFIX, SCRIPT_SUFFIXES, YAML_SUFFIXES

    return (entry["file"].endswith(YAML_SUFFIXES + SCRIPT_SUFFIXES + (PYTHON_SUFFIX,)) and entry["file"] not in NOT_READ_YET
            and not _chart_tree_copy(entry).is_file())  # a chart's file is read with its chart, not in the flat folder


def _chart_tree_copy(entry: dict):
    return MANIFESTS / "charts" / entry["repo"].replace("/", "__") / entry["path"]


def _scan(entry: dict, tmp_path):
    """The file where it sits in its repository when its chart is stored whole (tests/fixtures/manifests/charts), in
    a copy of that tree with a `.git` folder at its top, as a user's checkout has it and as
    tools/measure_scan_public.py scans it (in place, kvdoctor's own checkout would be the one found above it); else
    the flat fixture."""
    tree = _chart_tree_copy(entry)
    if not tree.is_file():
        return scan([str((PUBLIC / entry["file"]).relative_to(MANIFESTS.parents[2]))], tmp_path, gpu=None)
    repo = entry["repo"].replace("/", "__")
    checkout = tmp_path / "checkouts" / repo
    if not checkout.exists():
        shutil.copytree(MANIFESTS / "charts" / repo, checkout, symlinks=True)
        (checkout / ".git").mkdir()
    return scan([str(checkout / entry["path"])], tmp_path, gpu=None)


def _errors(result) -> set[str]:
    found = {p.finding.rule_id for p in result.placed if p.finding.status == "fired" and p.finding.severity == "error"}
    return found | ({"ERROR"} if result.error is not None else set())


def test_the_index_is_complete_and_sourced():
    assert len(INDEX) >= 66 and len({e["repo"] for e in INDEX}) >= 26
    files = {p.relative_to(PUBLIC).as_posix() for p in PUBLIC.rglob("*") if p.is_file() and not re.fullmatch(r"index(?:-\d+)?\.yaml", p.name)}
    assert files == {e["file"] for e in INDEX}
    for entry in INDEX:
        assert len(entry["commit"]) == 40 and entry["url"].endswith(entry["path"]) and entry["commit"] in entry["url"]
        # the path flattened, or kept as it is where a flattened name would hide what the file is (vllm/Makefile)
        assert entry["file"] in (entry["repo"].replace("/", "__") + "/" + entry["path"].replace("/", "__"),
                                 entry["repo"].replace("/", "__") + "/" + entry["path"])
    import math
    import random

    first = [e for e in INDEX if "batch" not in e]
    held = sorted(e["file"] for e in first if e["heldout"])
    drawn = sorted(e["file"] for e in first if "added_after_draw" not in e)  # the draw was over these
    assert held == sorted(random.Random(27).sample(drawn, round(len(drawn) * 0.25)))
    assert not any(e["heldout"] for e in INDEX if "added_after_draw" in e)
    s32 = sorted(e["file"] for e in INDEX if e.get("batch") == "s32")  # drawn before scan ran on any of them
    held = sorted(e["file"] for e in INDEX if e.get("batch") == "s32" and e["heldout"])
    assert len(s32) >= 25 and held == sorted(random.Random(32).sample(s32, round(len(s32) * 0.25)))
    s33 = sorted(e["file"] for e in INDEX if e.get("batch") == "s33")
    held = sorted(e["file"] for e in INDEX if e.get("batch") == "s33" and e["heldout"])
    assert len(s33) >= 25 and held == sorted(random.Random(33).sample(s33, math.ceil(len(s33) / 4)))
    s34 = sorted(e["file"] for e in INDEX if e.get("batch") == "s34")
    held = sorted(e["file"] for e in INDEX if e.get("batch") == "s34" and e["heldout"])
    assert len(s34) >= 25 and held == sorted(random.Random(34).sample(s34, math.ceil(len(s34) / 4)))
    s37 = sorted(e["file"] for e in INDEX if e.get("batch") == "s37")  # measured whole first, then half held out
    held = sorted(e["file"] for e in INDEX if e.get("batch") == "s37" and e["heldout"])
    assert len(s37) >= 24 and held == sorted(random.Random(37).sample(s37, len(s37) // 2))
    # stop 58 released three quarters of batches s35-s99 (s37 aside) to seen, drawn over their sorted file names
    older = sorted({e["file"] for e in INDEX if 35 <= int(e.get("batch", "s0")[1:]) <= 99 and e["batch"] != "s37"})
    released = {e["file"] for e in INDEX if e["file"] in older and not e["heldout"]}
    assert released == set(random.Random(58).sample(older, round(len(older) * 0.75)))
    assert set(NOT_READ_YET) <= {e["file"] for e in SEEN}


@pytest.mark.parametrize("entry", _seen_params())
def test_every_workload_is_found_checked_and_has_no_false_error(entry, tmp_path):
    report = _scan(entry, tmp_path)
    assert bool(report.unread) == bool(entry.get("unreadable"))
    results = {(r.workload.name, r.workload.container): r for r in report.workloads}
    assert set(results) == {(w["name"], w["container"]) for w in entry["workloads"]}
    for want in entry["workloads"]:
        result = results[(want["name"], want["container"])]
        assert result.report is not None and result.error is None, result.error
        open_ = [f for f in result.report.findings if f.status == "undecided"]
        assert all(f.decided_by for f in open_)  # nothing left open without what decides it
        assert all(any(i in u for i in DECIDING_INPUTS) or u.startswith(SETTLED) for u in result.unjudged), result.unjudged
        true = {t["rule"] for t in want.get("true_errors", ()) if t.get("needs") != "model config"}
        assert _errors(result) == true, [p.finding.title for p in result.placed]
        if any(t.get("needs") == "model config" for t in want.get("true_errors", ())):  # offline: left to the config
            assert any("--model-path" in d for f in open_ if f.severity == "error" or f.rule_id.startswith("KVD18")
                       for d in f.decided_by), [f.rule_id for f in open_]  # fmt: skip
        facts = result.report.facts
        if isinstance(want["tp"], int):
            assert facts["serve.tensor_parallel_size"] == want["tp"]
            assert facts["serve.pipeline_parallel_size"] == want["pp"]
        if want["vllm"] is not None:
            assert facts["vllm.version"] == str(want["vllm"])
        if want["gpu"] is not None:
            assert facts["gpu.name"] == want["gpu"]


# Released files (stop 58) whose error finding is placed on another line than the index's, with why.
LINE_NOT_YET = {
    "AyeniOluwatosinOlawale__vllm-k8s-stack/vllm__deployment.yaml": "the parser error is placed at "
    "--enable-prefix-caching=$(ENABLE_PREFIX_CACHING) (line 140), which the index does not list among the refused flags",
    "mohamedtalal1__deepseek-ocr-builder/Dockerfile": "a Dockerfile's exec-form CMD: the finding points at the CMD's "
    "first line (18), not at the refused flag's own line (21)",
    "rajyadav9__mlops/helm__vllm-inference__values.yaml": "the GPU shortfall is placed at the template's GPU limit "
    "(templates/qwen-deployment.yaml:121), the index at the values file's tensor-parallel size (41)",
    "kubernetes-sigs__inference-perf/demos__kubecon-na-2025__vllm+quantization__manifests.yaml": "the finding "
    "points at the container's `command` (30), not at the refused flag in it (28)",
    "johnahull__llm-d-xks-gke/deployments__llm-d-infra-xks-gke-tpu-native-gateway__manifests__llmisvc-gpu-pattern3.yaml":
    "the finding points at the LLMInferenceService's `command` (8), not at the refused flag (55)",
    "SURF-ML__vllm-inference-slurm/jobs__run_vllm_serve.job": "the GPU shortfall is placed at the job's GPU count "
    "(line 6), the index at the tensor-parallel flag (39)",
    "DavitGadyan__vLLM_deployment/deploy__helm__vllm__values.yaml": "the parser finding points at the image's "
    "entrypoint script line that adds --disable-log-requests (serving/entrypoint.sh:121), the index at the values key "
    "that turns it on (values.yaml:41)",
}


def test_each_true_error_points_at_its_line(tmp_path):
    """One parser finding holds every refused flag of a workload: it points at one of the lines the index gives."""
    for entry in (e for e in SEEN if e["file"] not in NOT_READ_YET and e["file"] not in LINE_NOT_YET):
        for want in entry["workloads"]:
            trues = [t for t in want.get("true_errors", ()) if t.get("needs") != "model config" and "line" in t]
            for rule in {t["rule"] for t in trues}:
                (result,) = [r for r in _scan(entry, tmp_path).workloads if r.workload.name == want["name"]
                             and r.workload.container == want["container"]]  # fmt: skip
                placed = next(p for p in result.placed if p.finding.rule_id == rule)
                assert placed.location.line in {t["line"] for t in trues if t["rule"] == rule}, entry["file"]


def _sampled_folders() -> list[Path]:
    """Every repository folder that holds an unreadable file, and a fixed sixth of the others (by a hash of the name,
    so the sample does not move between runs): each file is scanned on its own above, this walks folders at once."""
    unreadable = {e["file"].split("/")[0] for e in INDEX if e.get("unreadable")}
    return sorted(folder for folder in PUBLIC.iterdir() if folder.is_dir()
                  and (folder.name in unreadable or zlib.crc32(folder.name.encode()) % 6 == 0))  # fmt: skip


def test_a_scan_of_many_folders_never_aborts_on_the_malformed_files(tmp_path):
    folders = _sampled_folders()
    report = scan([str(folder) for folder in folders], tmp_path, gpu=None)
    assert sorted(u.location.file.rsplit("/", 1)[-1] for u in report.unread) == sorted(
        e["file"].rsplit("/", 1)[-1] for e in INDEX if e.get("unreadable"))  # fmt: skip  # walk order, not the index's
    found = {(r.workload.file.rsplit("/", 1)[-1], r.workload.name, r.workload.container) for r in report.workloads}
    names = {folder.name for folder in folders}
    walked = [entry for entry in filter(_walked, SEEN) if entry["file"].split("/")[0] in names]
    assert len(walked) > 100
    for entry in walked:
        for want in entry["workloads"]:
            assert (entry["file"].rsplit("/", 1)[-1], want["name"], want["container"]) in found
    assert report.exit_code("error") == 2  # the unreadable files are reported, the gate still fails on them


def _one(file_name: str, tmp_path, **match):
    (entry,) = [e for e in INDEX if e["file"].endswith(file_name)]
    report = _scan(entry, tmp_path)
    return [r for r in report.workloads if all(getattr(r.workload, k) == v for k, v in match.items())]


def test_a_flag_whose_value_is_an_unset_variable_is_not_judged_and_named(tmp_path):
    (rocm,) = _one("docker_compose__compose.yaml", tmp_path, name="vllm-rocm-server")
    assert rocm.error is None and "--tensor-parallel-size" not in [t.text for t in rocm.workload.argv]
    assert any("--tensor-parallel-size takes its value from ${TENSOR_PARALLEL_SIZE}" in n for n in rocm.report.notes)
    (config,) = _one("llmisvc_config_default.yaml", tmp_path)
    assert "$VLLM_ADDITIONAL_ARGS" not in [t.text for t in config.workload.argv]
    assert "--disable-log-requests" in [t.text for t in config.workload.argv]  # a switch: the variable is no value


def test_an_image_named_for_vllm_runs_vllm_with_a_single_vllm_option(tmp_path):
    (server,) = _one("docker_compose__compose.yaml", tmp_path, name="vllm-server")
    assert [t.text for t in server.workload.argv][:1] == ["--model"]
    assert _one("values-02-basic-config.yaml", tmp_path)  # the production-stack reader is untouched


def test_a_vllm_builds_tag_names_its_release_but_lmcaches_does_not(tmp_path):
    (basic,) = _one("qwen3-32b-tp4-replicas2.yaml", tmp_path)
    assert basic.report.facts["vllm.version"] == "0.10.2"
    assert any("a build of vLLM" in n for n in basic.report.notes)
    (gateway,) = _one("configs__vllm__gpu-deployment.yaml", tmp_path)
    assert gateway.report.facts["vllm.version"] is None  # lmcache/vllm-openai tags are LMCache's


def test_kinds_without_a_layout_are_read_and_a_ray_clusters_gpus_not_compared_per_pod(tmp_path):
    (fleet,) = _one("samples__deepseek-r1__deepseek-r1-huggingface.yaml", tmp_path)
    assert fleet.workload.kind == "RayClusterFleet" and fleet.report.facts["serve.tensor_parallel_size"] == 16
    assert fleet.workload.gpu_limit is None and not _errors(fleet)  # 8 GPUs a pod, TP 16 across the cluster
    assert any("Ray cluster" in n for n in fleet.report.notes)
    storm = _one("1p1d.yaml", tmp_path)
    assert sorted(r.workload.container for r in storm) == ["decode", "prefill"]
    assert all(r.report.facts["deploy.gpu_limit"] == 1 for r in storm)  # one pod each: compared


def test_kubeai_models_and_ray_serve_llm_configs_are_read_as_vllm_serve(tmp_path):
    (model,) = _one("llama-3.1-8b-instruct-fp8-l4.yaml", tmp_path)
    assert [t.text for t in model.workload.argv][0] == "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8"
    assert model.report.facts["gpu.name"] == "L4" and model.report.facts["deploy.gpu_limit"] == 1
    assert model.report.facts["deploy.gpu_from"] == "resourceProfile nvidia-gpu-l4"
    (llm,) = _one("ray-service.deepseek.yaml", tmp_path)
    argv = {t.text: t.line for t in llm.workload.argv}
    assert argv["--pipeline-parallel-size"] == 23 and argv["--enable-chunked-prefill"] == 28  # lines of the file
    # the cluster's most GPUs (head 0 + gpu-group 8 x replicas 2) = tp 8 x pp 2: placeable, no finding either way
    assert llm.report.facts["gpu.name"] == "H100 80GB" and llm.report.facts["deploy.gpu_limit"] == 16
    assert not {"KVD201", "KVD202"} & {p.finding.rule_id for p in llm.placed}


def test_a_ray_serve_app_of_its_own_reads_the_engine_arguments_its_config_gives(tmp_path):
    """vLLM's Ray Serve example shape: an application whose deployment class builds the engine from
    user_config.engine_args (or the app's args): the mapping with a `model` key is read as vllm serve flags."""
    service = ("apiVersion: ray.io/v1\nkind: RayService\nmetadata: {name: serve}\nspec:\n  serveConfigV2: |\n"
               "    applications:\n    - name: app\n      import_path: src.main:deployment\n"
               "      runtime_env: {env_vars: {VLLM_USE_V1: '1'}}\n      deployments:\n        - name: VLLMDeployment\n"
               "          user_config:\n            engine_args:\n              model: Qwen/Qwen2.5-7B-Instruct\n"
               "              tensor_parallel_size: 2\n              max_model_len: 16384\n"
               "    - name: other\n      import_path: app:main\n      args: {model: Qwen/Qwen2.5-3B-Instruct, dtype: half}\n"
               "  rayClusterConfig:\n    headGroupSpec:\n      template:\n        spec:\n"
               "          containers: [{name: head, image: vllm/vllm-openai:v0.25.1}]\n")  # fmt: skip
    (tmp_path / "ray.yaml").write_text(service)
    found = {r.workload.container: r for r in scan([str(tmp_path / "ray.yaml")], tmp_path, gpu=None).workloads}
    assert set(found) == {"serve app app", "serve app other"}
    app = found["serve app app"]
    assert {t.text: t.line for t in app.workload.argv} == {"Qwen/Qwen2.5-7B-Instruct": 14, "--tensor-parallel-size": 15,
                                                             "2": 15, "--max-model-len": 16, "16384": 16}
    assert app.report.facts["serve.tensor_parallel_size"] == 2 and app.workload.env[0].name == "VLLM_USE_V1"
    assert found["serve app other"].report.facts["serve.dtype"] == "half"
    # an app whose code (not in the file) reads its engine arguments from runtime_env variables (ai-on-eks' shape)
    (tmp_path / "env.yaml").write_text(service.replace(
        "      runtime_env: {env_vars: {VLLM_USE_V1: '1'}}\n      deployments:\n        - name: VLLMDeployment\n"
        "          user_config:\n            engine_args:\n              model: Qwen/Qwen2.5-7B-Instruct\n"
        "              tensor_parallel_size: 2\n              max_model_len: 16384\n",
        "      runtime_env:\n        env_vars: {MODEL_ID: Qwen/Qwen2.5-7B-Instruct, MAX_MODEL_LEN: '8192', "
        "TRUST_REMOTE_CODE: 'True', LD_LIBRARY_PATH: /x}\n"))
    env_app = next(r for r in scan([str(tmp_path / "env.yaml")], tmp_path, gpu=None).workloads
                   if r.workload.container == "serve app app")
    assert [t.text for t in env_app.workload.argv] == ["Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192",
                                                       "--trust-remote-code"]


def test_production_stack_tool_flags_follow_the_chart(tmp_path):
    (spec,) = _one("values-13-tool-enabled.yaml", tmp_path)
    words = [t.text for t in spec.workload.argv]
    assert words[1:4] == ["--enable-auto-tool-choice", "--tool-call-parser", "llama3_json"]
    assert words[-2:] == ["--chat-template", "/templates//templates/tool_chat_template_llama3.1_json.jinja"]


def test_a_pod_whose_vllm_spans_pods_is_not_compared_with_its_own_gpus(tmp_path):
    """The RayClusterFleet shape as a plain Deployment: TP 16 with Ray's executor on an 8-GPU pod is no KVD201."""
    pod = ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: head}}\nspec:\n  template:\n    spec:\n"
           "      containers:\n        - name: vllm\n          image: vllm/vllm-openai:v0.25.1\n"
           "          args: [serve, Qwen/Qwen2.5-7B-Instruct, --tensor-parallel-size, '16'{extra}]\n"
           "          resources: {{limits: {{nvidia.com/gpu: 8}}}}\n")  # fmt: skip
    (tmp_path / "ray.yaml").write_text(pod.format(extra=", --distributed-executor-backend, ray"))
    (spans,) = scan([str(tmp_path / "ray.yaml")], tmp_path, gpu=None).workloads
    assert "KVD201" not in _errors(spans) and spans.report.facts["deploy.gpu_limit"] is None
    assert any("--distributed-executor-backend ray: vLLM's workers span several pods" in n for n in spans.report.notes)
    (tmp_path / "one.yaml").write_text(pod.format(extra=""))
    (alone,) = scan([str(tmp_path / "one.yaml")], tmp_path, gpu=None).workloads
    assert "KVD201" in _errors(alone)  # without it, 8 GPUs for TP 16 is short


def test_vllms_own_chart_values_are_read_as_the_deployment_its_template_renders(tmp_path):
    (chart,) = _one("chart-helm__values.yaml", tmp_path)
    assert chart.workload.title == "vLLM chart values vllm" and chart.workload.image == "vllm/vllm-openai:latest"
    assert [t.text for t in chart.workload.argv][:3] == ["/data/", "--served-model-name", "opt-125m"]
    assert chart.report.facts["deploy.gpu_limit"] == 1 and chart.report.facts["serve.block_size"] == 16
    assert any("unknown GPU label value 'TYPE_GPU_USED'" in n for n in chart.report.notes)  # gpuModels' placeholder
