"""Kustomize overlays: a root kustomization is rendered as `kubectl kustomize` renders it (shapes from Kustomize's
reference: resources, components, patches, patchesStrategicMerge, patchesJson6902, images, namePrefix, namespace,
configMapGenerator) and each value is placed on the file and line that wrote it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from scan_support import MANIFESTS, finding, scan

from kvdoctor.scan.kustomize_patches import PatchError, json_patch, strategic_merge
from kvdoctor.scan.documents import SourceFile, compose_documents
from kvdoctor.scan import nodes

BASE_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
spec:
  template:
    spec:
      nodeSelector:
        nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.8.5
          args:
            - --model
            - Qwen/Qwen2.5-7B-Instruct
            - --tensor-parallel-size
            - "1"
          env:
            - name: HF_HOME
              value: /cache
          resources:
            limits:
              nvidia.com/gpu: 1
        - name: sidecar
          image: busybox
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def located(result, rule_id: str) -> tuple[str, int | None]:
    where = finding(result, rule_id).location
    return Path(where.file).name if "/" in where.file else where.file, where.line


def base(root: Path, deployment: str = BASE_DEPLOYMENT, extra: str = "") -> None:
    write(root, {"base/deployment.yaml": deployment, "base/kustomization.yaml": "resources:\n  - deployment.yaml\n" + extra})


def test_an_overlay_is_rendered_with_its_base_and_findings_point_at_the_patch_and_images_lines(tmp_path):
    base(tmp_path)
    write(tmp_path, {
        "overlays/prod/kustomization.yaml": (
            "apiVersion: kustomize.config.k8s.io/v1beta1\n"
            "kind: Kustomization\n"
            "namePrefix: prod-\n"
            "namespace: serving\n"
            "resources:\n"
            "  - ../../base\n"
            "images:\n"
            "  - name: vllm/vllm-openai\n"
            "    newTag: v0.10.2\n"          # line 9
            "patches:\n"
            "  - path: tp.yaml\n"
        ),
        "overlays/prod/tp.yaml": (
            "apiVersion: apps/v1\n"
            "kind: Deployment\n"
            "metadata:\n"
            "  name: vllm\n"
            "spec:\n"
            "  template:\n"
            "    spec:\n"
            "      containers:\n"
            "        - name: vllm\n"
            "          args: [--model, Qwen/Qwen2.5-7B-Instruct, --tensor-parallel-size, \"2\"]\n"  # line 10
        ),
    })  # fmt: skip
    report = scan([str(tmp_path)], tmp_path)
    (result,) = report.workloads  # the base is not checked again alone
    assert result.workload.title == "Deployment/serving/prod-vllm (container vllm)"
    assert result.sources["vllm."].file.endswith("overlays/prod/kustomization.yaml")
    assert (result.sources["vllm."].line, result.sources["vllm."].what) == (9, "image vllm/vllm-openai:v0.10.2")
    tp = result.sources["serve.tensor_parallel_size"]
    assert (Path(tp.file).name, tp.line, tp.what) == ("tp.yaml", 10, "--tensor-parallel-size 2")
    assert located(result, "KVD201") == ("deployment.yaml", 23)  # the base's one GPU, where the limit is written
    assert [e.value for e in result.workload.env if e.name == "HF_HOME"] == ["/cache"]  # the base's env kept
    assert any("rendered from kustomization" in n for n in result.workload.notes)
    assert any(f.endswith("tp.yaml") for f in report.files)


def test_a_json6902_patch_inline_with_a_target_and_from_a_file_lands_on_its_own_line(tmp_path):
    base(tmp_path)
    write(tmp_path, {
        "overlay/kustomization.yaml": (
            "resources: [../base]\n"
            "patches:\n"
            "  - target: {kind: Deployment, name: vllm}\n"
            "    patch: |-\n"
            "      - op: add\n"
            "        path: /spec/template/spec/containers/0/args/-\n"
            "        value: --kv-cache-dtype=fp8_e5m2\n"  # line 7
            "patchesJson6902:\n"
            "  - target: {group: apps, version: v1, kind: Deployment, name: vllm}\n"
            "    path: gpus.yaml\n"
        ),
        "overlay/gpus.yaml": (
            "- op: replace\n"
            "  path: /spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu\n"
            "  value: 4\n"  # line 3
        ),
    })  # fmt: skip
    (result,) = scan([str(tmp_path / "overlay")], tmp_path).workloads
    dtype = result.sources["serve.kv_cache_dtype"]
    assert (Path(dtype.file).parent.name, Path(dtype.file).name, dtype.line) == ("overlay", "kustomization.yaml", 7)
    assert result.workload.gpu_limit == 4
    assert result.workload.where(result.workload.gpu_limit_line)[1] == 3
    assert located(result, "KVD202") == ("gpus.yaml", 3)  # 4 GPUs for TP 1


def test_strategic_merge_merges_containers_and_env_by_name_and_replaces_args(tmp_path):
    base(tmp_path)
    write(tmp_path, {
        "overlay/kustomization.yaml": "resources: [../base]\npatchesStrategicMerge:\n  - backend.yaml\n",
        "overlay/backend.yaml": (
            "apiVersion: apps/v1\n"
            "kind: Deployment\n"
            "metadata: {name: vllm}\n"
            "spec:\n"
            "  template:\n"
            "    spec:\n"
            "      containers:\n"
            "        - name: vllm\n"
            "          args: [--model, Qwen/Qwen2.5-7B-Instruct]\n"
            "          env:\n"
            "            - name: VLLM_ATTENTION_BACKEND\n"  # line 11
            "              value: FLASHINFER\n"
            "        - name: sidecar\n"
            "          $patch: delete\n"
        ),
    })  # fmt: skip
    (result,) = scan([str(tmp_path)], tmp_path).workloads
    assert [t.text for t in result.workload.argv] == ["--model", "Qwen/Qwen2.5-7B-Instruct"]  # args replaced whole
    env = {e.name: e for e in result.workload.env}
    assert env["HF_HOME"].value == "/cache" and env["VLLM_ATTENTION_BACKEND"].value == "FLASHINFER"
    assert result.workload.where(env["VLLM_ATTENTION_BACKEND"].line)[1] == 11  # the patch's env entry
    file, line = result.workload.where(env["HF_HOME"].line)
    assert (Path(file).parent.name, Path(file).name, line) == ("base", "deployment.yaml", 19)  # the base's, kept
    assert result.sources["env.VLLM_ATTENTION_BACKEND"].file.endswith("backend.yaml")


def test_a_generated_config_map_gives_env_values_on_the_env_files_lines(tmp_path):
    user = BASE_DEPLOYMENT.replace(
        "            - name: HF_HOME\n              value: /cache\n",
        "            - name: VLLM_ATTENTION_BACKEND\n              valueFrom:\n"
        "                configMapKeyRef: {name: vllm-env, key: VLLM_ATTENTION_BACKEND}\n")  # fmt: skip
    base(tmp_path, user, "configMapGenerator:\n  - name: vllm-env\n    envs: [vllm.env]\n")
    write(tmp_path, {"base/vllm.env": "# the backend\nVLLM_ATTENTION_BACKEND=TRITON_ATTN\n"})
    (result,) = scan([str(tmp_path / "base")], tmp_path).workloads
    (backend,) = [e for e in result.workload.env if e.name == "VLLM_ATTENTION_BACKEND"]
    assert backend.value == "TRITON_ATTN"
    file, line = result.workload.where(backend.line)
    assert (Path(file).name, line) == ("vllm.env", 2)


def test_a_component_patches_the_resources_of_the_kustomization_that_takes_it_in(tmp_path):
    base(tmp_path)
    write(tmp_path, {
        "app/kustomization.yaml": "resources: [../base]\ncomponents: [../fp8]\n",
        "fp8/kustomization.yaml": (
            "apiVersion: kustomize.config.k8s.io/v1alpha1\n"
            "kind: Component\n"
            "patches:\n"
            "  - target: {kind: Deployment}\n"
            "    patch: '[{\"op\": \"add\", \"path\": \"/spec/template/spec/containers/0/args/-\", \"value\": "
            "\"--kv-cache-dtype=fp8\"}]'\n"  # line 5
        ),
    })  # fmt: skip
    report = scan([str(tmp_path)], tmp_path)
    (result,) = report.workloads  # the component and the base: taken in, not roots
    dtype = result.sources["serve.kv_cache_dtype"]
    assert (Path(dtype.file).parent.name, dtype.line, dtype.what) == ("fp8", 5, "--kv-cache-dtype fp8")


def test_two_overlays_of_one_base_are_two_workloads_and_the_base_is_not_checked_alone(tmp_path):
    base(tmp_path)
    for name, tag in (("staging", "v0.9.2"), ("prod", "v0.10.2")):
        write(tmp_path, {f"{name}/kustomization.yaml": f"resources: [../base]\nnameSuffix: -{name}\nimages:\n"
                                                       f"  - name: vllm/vllm-openai\n    newTag: {tag}\n"})  # fmt: skip
    report = scan([str(tmp_path)], tmp_path)
    assert sorted((r.workload.name, r.workload.image) for r in report.workloads) == [
        ("vllm-prod", "vllm/vllm-openai:v0.10.2"), ("vllm-staging", "vllm/vllm-openai:v0.9.2")]  # fmt: skip
    # each is the overlay kubectl apply -k deploys, its object written in the base
    assert sorted(Path(r.workload.file).parent.name for r in report.workloads) == ["prod", "staging"]
    assert all(any("the object is written at" in n and "base/deployment.yaml:1" in n for n in r.workload.notes)
               for r in report.workloads)  # fmt: skip


def test_an_images_digest_pins_no_release_and_says_so_at_the_digest_line(tmp_path):
    base(tmp_path)
    write(tmp_path, {"overlay/kustomization.yaml": "resources: [../base]\nimages:\n  - name: vllm/vllm-openai\n"
                                                   "    newName: registry.local/vllm/vllm-openai\n"
                                                   "    digest: sha256:" + "a" * 64 + "\n"})  # fmt: skip
    (result,) = scan([str(tmp_path / "overlay")], tmp_path).workloads
    assert result.workload.image == "registry.local/vllm/vllm-openai@sha256:" + "a" * 64
    assert located(result, "KVD204") == ("kustomization.yaml", 5)


@pytest.mark.parametrize("field, text", [
    ("remote base", "resources:\n  - ../base\n  - https://github.com/example/deploy//vllm?ref=v1\n"),
    ("helmCharts", "resources: [../base]\nhelmCharts:\n  - name: router\n    repo: https://example.com/charts\n"),
    ("a plugin", "resources: [../base]\ntransformers: [plugin.yaml]\n"),
])  # fmt: skip
def test_what_the_reader_cannot_render_leaves_each_workload_undecided_never_pass(tmp_path, field, text):
    base(tmp_path, BASE_DEPLOYMENT.replace("\"1\"", "\"1\"\n            - --max-model-len\n            - \"4096\""))
    write(tmp_path, {"overlay/kustomization.yaml": text})
    report = scan([str(tmp_path / "overlay")], tmp_path)
    (result,) = report.workloads
    assert result.verdict != "PASS"
    assert any("not rendered here" in u and "kustomization.yaml:" in u for u in result.unjudged)
    assert any("may not all be known" in n for n in report.notes)


def test_a_remote_base_alone_is_named_in_the_notes(tmp_path):
    write(tmp_path, {"kustomization.yaml": "resources:\n  - github.com/example/deploy/vllm?ref=v1\n"})
    report = scan([str(tmp_path)], tmp_path)
    assert report.verdict == "NONE" and not report.workloads
    assert any("kustomization.yaml:2: resource github.com/example/deploy/vllm?ref=v1 is fetched from the network" in n
               for n in report.notes)  # fmt: skip


def test_the_same_overlay_without_vllm_is_no_workload(tmp_path):
    base(tmp_path, BASE_DEPLOYMENT.replace("vllm/vllm-openai:v0.8.5", "nginx:1.27").replace(
        "            - --model\n            - Qwen/Qwen2.5-7B-Instruct\n            - --tensor-parallel-size\n"
        "            - \"1\"\n", "            - --port=80\n"))  # fmt: skip
    write(tmp_path, {"overlay/kustomization.yaml": "resources: [../base]\nimages:\n  - name: nginx\n    newTag: '1.28'\n"})
    report = scan([str(tmp_path)], tmp_path)
    assert report.verdict == "NONE" and not report.workloads and not report.unread


def test_a_flux_kustomization_named_kustomization_yaml_is_read_as_an_object(tmp_path):
    write(tmp_path, {"kustomization.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\n"
                                           "metadata: {name: apps}\nspec: {path: ./apps, interval: 10m}\n"})  # fmt: skip
    report = scan([str(tmp_path)], tmp_path)
    assert not report.unread and not any("may not all be known" in n for n in report.notes)


@pytest.mark.parametrize("files, message", [
    ({"kustomization.yaml": "resources: [missing.yaml]\n"}, "kustomization.yaml:1: resource missing.yaml is not there"),
    ({"kustomization.yaml": "resources: [\n"}, "kustomization.yaml:2: malformed YAML"),
    ({"kustomization.yaml": "resources: [d.yaml]\npatches:\n  - target: {kind: Deployment}\n    patch: |-\n"
                            "      - op: replace\n        path: /spec/nothing/here\n        value: 1\n",
      "d.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {}\n"},
     "kustomization.yaml:5: JSON 6902 path part 'nothing' is not in the object"),
])  # fmt: skip
def test_a_kustomization_kustomize_would_refuse_is_one_line_exit_2(run_cli, tmp_path, files, message):
    write(tmp_path, files)
    result = run_cli("scan", str(tmp_path), "--gpu", "A100", "--no-compile", "--offline")
    assert result.code == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert all(line.startswith("kvdoctor: error: ") for line in result.stderr.splitlines())


def test_a_rendered_workload_is_one_json_entry_placed_in_the_overlay(run_cli, tmp_path):
    base(tmp_path)
    write(tmp_path, {"overlay/kustomization.yaml": "resources: [../base]\nimages:\n  - name: vllm/vllm-openai\n"
                                                   "    newTag: v0.10.2\n"})  # fmt: skip
    result = run_cli("scan", str(tmp_path), "--gpu", "A100", "--no-compile", "--offline", "--format", "json")
    document = json.loads(result.stdout)
    (workload,) = document["workloads"]
    assert workload["sources"]["vllm."]["file"].endswith("overlay/kustomization.yaml")
    assert workload["sources"]["vllm."]["line"] == 4


def _node(text: str):
    return compose_documents(SourceFile("x.yaml", text))[0].root


def test_strategic_merge_follows_kubernetes_patch_strategies():
    merged = strategic_merge(_node("spec:\n  containers:\n  - {name: a, image: x, args: [--a, '1']}\n  - {name: b}\n"
                                   "  volumes: [{name: v, emptyDir: {}}]\n"),
                             _node("spec:\n  containers:\n  - {name: a, args: [--b]}\n  - {name: c, image: z}\n"
                                   "  volumes: null\n"))  # fmt: skip
    assert nodes.plain(merged) == {"spec": {"containers": [{"name": "a", "image": "x", "args": ["--b"]}, {"name": "b"},
                                                           {"name": "c", "image": "z"}]}}  # fmt: skip


def test_json6902_refuses_what_rfc_6902_refuses():
    root = _node("spec:\n  args: [--a]\n")
    assert nodes.plain(json_patch(root, _node("- {op: test, path: /spec/args/0, value: --a}\n"
                                               "- {op: copy, from: /spec/args/0, path: /spec/args/-}\n"
                                               "- {op: remove, path: /spec/args/0}\n"), "p.yaml:1")) == \
        {"spec": {"args": ["--a"]}}  # fmt: skip
    with pytest.raises(PatchError, match="test of /spec/args/0 failed"):
        json_patch(root, _node("- {op: test, path: /spec/args/0, value: --b}\n"), "p.yaml:1")
    with pytest.raises(PatchError, match="out of the list"):
        json_patch(root, _node("- {op: replace, path: /spec/args/5, value: x}\n"), "p.yaml:1")


def test_an_argo_cd_application_a_kustomization_takes_in_still_renders_its_chart(tmp_path):
    """The app-of-apps shape (a real homelab tree): kustomization.yaml lists application.yaml, whose chart is in the
    tree; the Application is read as when scanned alone, its workload on the chart's template lines."""
    shutil.copytree(MANIFESTS / "charts" / "neuralmagic__helm-charts" / "charts" / "nm-vllm", tmp_path / "charts" / "nm")
    write(tmp_path, {
        "apps/kustomization.yaml": "resources: [application.yaml]\n",
        "apps/application.yaml": ("apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: granite}\n"
                                  "spec:\n  source:\n    repoURL: https://example.com/repo.git\n    path: charts/nm\n"),
    })  # fmt: skip
    report = scan([str(tmp_path)], tmp_path)
    (result,) = [r for r in report.workloads if r.workload.name == "granite-nm-vllm"]  # (the chart alone: nm-vllm)
    assert result.workload.file.endswith("templates/deployment.yaml") and not report.unread
    assert any("by Argo CD Application granite" in n and "application.yaml:1" in n for n in result.workload.notes)


@pytest.mark.parametrize("name", ["kustomization.yaml", "kustomization.yml", "Kustomization"])
def test_each_file_name_kubectl_reads_is_a_kustomization(tmp_path, name):
    base(tmp_path)
    write(tmp_path, {f"overlay/{name}": "resources: [../base]\nnamePrefix: x-\n"})
    (result,) = scan([str(tmp_path)], tmp_path).workloads
    assert result.workload.name == "x-vllm" and result.workload.file.endswith(f"overlay/{name}")


def test_the_files_a_rendered_workload_comes_from_are_named_in_the_notes(tmp_path):
    base(tmp_path)
    write(tmp_path, {"overlay/kustomization.yaml": "resources: [../base]\npatches: [{path: p.yaml}]\n",
                     "overlay/p.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: vllm}\nspec: {replicas: 2}\n"})
    (note,) = [n for n in scan([str(tmp_path)], tmp_path).notes if "rendered from" in n]
    assert "4 file(s)" in note and all(name in note for name in ("base/deployment.yaml", "overlay/p.yaml"))


def test_each_overlay_reads_its_own_patched_config_map(tmp_path):
    """take566/kubernetes: base's ConfigMap vllm-config patched per overlay (VLLM_MODEL, VLLM_EXTRA_ARGS) and read with
    envFrom under sh -c; scanned together, each render's env comes from its own ConfigMap, not an ambiguous pool."""
    user = BASE_DEPLOYMENT.replace(
        "          args:\n            - --model\n            - Qwen/Qwen2.5-7B-Instruct\n            - --tensor-parallel-size\n"
        "            - \"1\"\n",
        "          command: [sh, -c, 'exec vllm serve \"$VLLM_MODEL\" $VLLM_EXTRA_ARGS']\n"
        "          envFrom: [{configMapRef: {name: vllm-config}}]\n")  # fmt: skip
    base(tmp_path, user, "  - config.yaml\n")
    write(tmp_path, {"base/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: vllm-config}\n"
                                         "data: {VLLM_MODEL: facebook/opt-125m}\n"})  # fmt: skip
    for name, extra in (("small", "--max-model-len 1024 --enforce-eager"), ("big", "--tensor-parallel-size 2")):
        write(tmp_path, {f"{name}/kustomization.yaml": f"resources: [../base]\nnameSuffix: -{name}\npatches: [{{path: cm.yaml}}]\n",
                         f"{name}/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: vllm-config}\n"
                                            f"data:\n  VLLM_EXTRA_ARGS: {extra}\n"})  # fmt: skip
    report = scan([str(tmp_path)], tmp_path)
    argv = {r.workload.name: [t.text for t in r.workload.argv] for r in report.workloads}
    assert argv == {"vllm-small": ["facebook/opt-125m", "--max-model-len", "1024", "--enforce-eager"],  # split, as sh does
                    "vllm-big": ["facebook/opt-125m", "--tensor-parallel-size", "2"]}  # fmt: skip
    big = next(r for r in report.workloads if r.workload.name == "vllm-big")
    assert located(big, "KVD201") == ("deployment.yaml", 20)  # TP 2 (big/cm.yaml's) on the base's one GPU
    extra = big.sources["env.VLLM_EXTRA_ARGS"]  # the value's own line, in the overlay's patch
    assert (Path(extra.file).parent.name, Path(extra.file).name, extra.line) == ("big", "cm.yaml", 5)


REPLACEMENT = """\
replacements:
  - source: {kind: ConfigMap, name: params, fieldPath: data.state}
    targets:
      - select: {kind: Deployment, name: TARGET}
        fieldPaths:
          - spec.template.spec.containers.[name=manager].env.[name=STATE].value
"""


@pytest.mark.parametrize(("target", "undecided"), [("controller", False), ("vllm", True)])
def test_a_replacement_leaves_only_the_objects_it_writes_into_undecided(tmp_path, target, undecided):
    # odh-model-controller's overlays: replacements into the controller's Deployment, not into the vLLM runtimes
    base(tmp_path)
    write(tmp_path, {"overlay/kustomization.yaml": "resources: [../base]\n" + REPLACEMENT.replace("TARGET", target)})
    report = scan([str(tmp_path)], tmp_path)
    (result,) = report.workloads
    assert not report.unread and any("replacements" in u for u in result.unjudged) is undecided


@pytest.mark.parametrize(("arg", "undecided"), [("--served-model-name=$(MODEL_NAME)", True), ("--served-model-name=x", False)])
def test_vars_leave_only_the_workloads_that_use_one_undecided(tmp_path, arg, undecided):
    base(tmp_path, BASE_DEPLOYMENT.replace('            - "1"\n', f'            - "1"\n            - {arg}\n'))
    write(tmp_path, {"overlay/kustomization.yaml": "resources: [../base]\nvars:\n  - name: MODEL_NAME\n"
                                                   "    objref: {kind: ConfigMap, name: params, apiVersion: v1}\n"})  # fmt: skip
    (result,) = scan([str(tmp_path)], tmp_path).workloads
    assert any("vars" in u for u in result.unjudged) is undecided


def test_a_patch_of_an_object_that_runs_no_pod_is_no_unknown(tmp_path):
    # the Service a patch removes an annotation from is not composed (podless kinds): nothing the checks read changes
    base(tmp_path, BASE_DEPLOYMENT + "---\napiVersion: v1\nkind: Service\nmetadata: {name: vllm, annotations: {a: b}}\n")
    write(tmp_path, {"overlay/kustomization.yaml": "resources: [../base]\npatches:\n  - target: {kind: Service, name: vllm}\n"
                                                   "    patch: '[{\"op\": \"remove\", \"path\": \"/metadata/annotations/a\"}]'\n"})
    report = scan([str(tmp_path)], tmp_path)
    (result,) = report.workloads
    assert not [u for u in result.unjudged if "not rendered here" in u]
    assert not any("may not all be known" in n for n in report.notes)


@pytest.mark.parametrize(("config", "undecided"), [
    ("varReference:\n  - {path: spec/commonName, kind: Certificate}\nnameReference: []\n", False),
    ("images:\n  - {path: spec/runtime/image, kind: Model}\n", True),  # where images go: may be the workload's
])  # fmt: skip
def test_a_transformer_configuration_of_names_and_vars_only_leaves_no_container_unknown(tmp_path, config, undecided):
    base(tmp_path)
    write(tmp_path, {"overlay/kustomization.yaml": "resources: [../base]\nconfigurations: [conf.yaml]\n",
                     "overlay/conf.yaml": config})
    (result,) = scan([str(tmp_path)], tmp_path).workloads
    assert any("configurations" in u for u in result.unjudged) is undecided


def test_a_patch_given_alone_is_checked_as_its_kustomization_renders_it(tmp_path, monkeypatch):
    """The pre-commit hook passes the changed files: an overlay's patch alone is a fragment, so the overlay that takes
    it in is rendered in its place (a file no kustomization takes in is read alone, as before)."""
    base(tmp_path)
    write(tmp_path, {"overlay/kustomization.yaml": "resources: [../base]\npatches: [{path: tp.yaml}]\n",
                     "overlay/tp.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: vllm}\nspec:\n"
                                        "  template:\n    spec:\n      containers:\n        - name: vllm\n"
                                        "          args: [--model, Qwen/Qwen2.5-7B-Instruct, --tensor-parallel-size, '2']\n",
                     "alone.yaml": BASE_DEPLOYMENT.replace("name: vllm\nspec", "name: other\nspec")})  # fmt: skip
    monkeypatch.chdir(tmp_path)
    report = scan(["overlay/tp.yaml", "alone.yaml"], tmp_path)
    assert sorted((r.workload.name, Path(r.workload.file).name) for r in report.workloads) == [
        ("other", "alone.yaml"), ("vllm", "kustomization.yaml")]  # fmt: skip
    rendered = next(r for r in report.workloads if r.workload.name == "vllm")
    assert located(rendered, "KVD201") == ("deployment.yaml", 23)  # the patch's TP 2 on the base's one GPU
    assert any("overlay/tp.yaml: taken in by overlay/kustomization.yaml" in n for n in report.notes)
