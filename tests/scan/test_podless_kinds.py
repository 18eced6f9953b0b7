"""Kinds that run no container are not named as unread workloads, however much they mention vLLM (a whole
kubernetes-sigs/lws checkout named 'Service vllm-leader mentions vLLM ... render it to the Deployment/Pod')."""

from __future__ import annotations

from kvdoctor.scan.run import read_manifests

FILE = """\
apiVersion: v1
kind: Service
metadata:
  name: vllm-leader
spec:
  selector: {app: vllm}
---
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata:
  name: vllm
spec:
  selector: {matchLabels: {app: vllm}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: start
data:
  start.sh: vllm serve Qwen/Qwen3-0.6B
---
apiVersion: inference.llmaz.io/v1alpha1
kind: BackendRuntime
metadata:
  name: vllm
spec:
  command: [python3, -m, vllm.entrypoints.openai.api_server]
"""


def test_podless_kinds_are_not_named_but_a_configmap_and_an_unknown_kind_still_are(tmp_path):
    path = tmp_path / "all.yaml"
    path.write_text(FILE)
    _, found, notes, _ = read_manifests([str(path)])
    assert found == []
    named = sorted(n.split(": ", 1)[1].split(" ", 1)[0] for n in notes)
    assert named == ["BackendRuntime", "ConfigMap"]  # not Service, not PodMonitor


def test_a_helm_unittest_suite_and_an_issue_form_are_not_named(tmp_path):
    # production-stack's helm/tests/*_test.yaml and aibrix's .github/ISSUE_TEMPLATE/200_bug_report.yml
    (tmp_path / "deployment_test.yaml").write_text(
        "suite: test vllm deployment\ntemplates: [templates/deployment-vllm-multi.yaml]\ntests:\n"
        "  - it: passes flags\n    asserts:\n      - contains: {path: 'spec.template.spec.containers[0].args', "
        "content: --enable-prefix-caching}\n        # vllm serve\n")
    (tmp_path / "bug.yml").write_text(
        "name: Bug report\nbody:\n  - type: textarea\n    attributes: {label: 'Your vllm serve command'}\n")
    (tmp_path / "raw-values.yaml").write_text("engine:\n  image: vllm/vllm-openai:v0.25.1\n")
    _, found, notes, _ = read_manifests([str(tmp_path)])
    assert found == [] and len(notes) == 1 and "raw-values.yaml" in notes[0]  # a raw values file is still named


def test_an_unread_kind_is_named_without_a_blank_name_and_with_what_to_do_for_its_kind(tmp_path):
    # ycx666994/llm-inference-platform: 'Kustomization  mentions vLLM ... (render it to the Deployment/Pod it creates)'
    (tmp_path / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [vllm-deployment.yaml]\n")
    (tmp_path / "config.yaml").write_text(FILE.split("---\n")[2])  # the ConfigMap holding a vllm serve script
    _, _, notes, unread = read_manifests([str(tmp_path)])
    config_map = next(n for n in notes if "config.yaml" in n)
    assert "ConfigMap start mentions vLLM" in config_map and "a script it holds is not" in config_map
    # the kustomization is rendered now (tests/scan/test_kustomize.py): its missing resource is what kustomize refuses
    (missing,) = unread
    assert missing.message.endswith("kustomization.yaml:3: resource vllm-deployment.yaml is not there")
