"""Batches s71 and s73 (stop 42): a values file kept outside its chart (helm-examples/qwen3.yaml for
helm-charts/llm-k8s/) is rendered with the chart of the repository whose values.yaml declares most of its keys; none
when no chart near it fits or two fit as well, and never a chart outside the scanned paths or the git checkout."""

from __future__ import annotations

from scan_support import write_tree

from kvdoctor.scan.run import read_manifests

CHART = {
    "charts/llm/Chart.yaml": "apiVersion: v2\nname: llm\nversion: 0.1.0\n",
    "charts/llm/values.yaml": "enabled: false\nmodel: ''\nimage: vllm/vllm-openai:v0.10.1.1\nmaxModelLen: 4096\n",
    "charts/llm/templates/deploy.yaml": """\
{{- if .Values.enabled }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-vllm
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: {{ .Values.image }}
        args: ["--model", "{{ .Values.model }}", "--max-model-len", "{{ .Values.maxModelLen }}"]
{{- end }}
""",
}
EXAMPLE = "# serve Qwen with vllm\nenabled: true\nmodel: Qwen/Qwen3-8B\nmaxModelLen: 8192\n"


def test_a_values_file_outside_its_chart_is_rendered_with_the_chart_whose_keys_it_sets(tmp_path):
    root = write_tree(tmp_path / "repo", {**CHART, "examples/qwen.yaml": EXAMPLE})
    (workload,) = read_manifests([str(root)])[1]  # the chart's own defaults render nothing (enabled: false)
    assert (workload.name, workload.container) == ("llm-vllm", "vllm")
    assert [t.text for t in workload.argv] == ["--model", "Qwen/Qwen3-8B", "--max-model-len", "8192"]


def test_a_yaml_file_that_sets_other_keys_is_not_taken_for_the_charts_values(tmp_path):
    other = "# vllm benchmark settings\nrequests: 100\nconcurrency: 8\n"
    root = write_tree(tmp_path / "repo", {**CHART, "bench/vllm.yaml": other})
    assert read_manifests([str(root)])[1] == []


def test_two_charts_that_fit_as_well_leave_the_file_unread(tmp_path):
    twin = {name.replace("charts/llm", "charts/llm2"): text for name, text in CHART.items()}
    root = write_tree(tmp_path / "repo", {**CHART, **twin, "examples/qwen.yaml": EXAMPLE})
    assert read_manifests([str(root)])[1] == []


def test_a_chart_outside_the_scanned_folder_is_not_taken(tmp_path):
    root = write_tree(tmp_path / "repo", {**CHART, "examples/qwen.yaml": EXAMPLE})
    assert read_manifests([str(root / "examples")])[1] == []


def test_a_gitops_values_file_deep_in_its_tree_is_rendered_with_the_chart_at_the_top(tmp_path):
    # batch s95: argocd/applications/dev/values/vllm-inference.yaml for helm-charts/standard-service/
    root = write_tree(tmp_path / "repo", {**CHART, "argocd/applications/dev/values/qwen.yaml": EXAMPLE})
    (workload,) = read_manifests([str(root)])[1]
    assert [t.text for t in workload.argv] == ["--model", "Qwen/Qwen3-8B", "--max-model-len", "8192"]


def test_the_values_file_scanned_alone_finds_the_chart_at_its_checkouts_top_however_deep_it_sits(tmp_path):
    # stop 60: the checkout's root is found as git finds it, not only within the file's two parent folders
    root = write_tree(tmp_path / "repo", {**CHART, "argocd/applications/dev/values/qwen.yaml": EXAMPLE})
    values = root / "argocd" / "applications" / "dev" / "values" / "qwen.yaml"
    assert read_manifests([str(values)])[1] == []  # no checkout: the scanned file's own folders only
    (root / ".git").mkdir()
    (workload,) = read_manifests([str(values)])[1]
    assert [t.text for t in workload.argv] == ["--model", "Qwen/Qwen3-8B", "--max-model-len", "8192"]


REFUSING = {**CHART, "charts/llm/templates/deploy.yaml": (
    "{{- if not .Values.enabled }}{{ fail \"enabled must be true\" }}{{- end }}\n"
    + CHART["charts/llm/templates/deploy.yaml"])}


def test_a_chart_that_refuses_its_own_defaults_is_no_unread_file_when_a_values_file_renders_it(tmp_path):
    root = write_tree(tmp_path / "repo", {**REFUSING, "examples/qwen.yaml": EXAMPLE})
    _, found, notes, unread = read_manifests([str(root)])
    assert [w.name for w in found] == ["llm-vllm"] and unread == []
    assert any("refuses to render with its own values.yaml alone" in n and "enabled must be true" in n for n in notes)


def test_a_chart_that_refuses_its_defaults_and_that_nothing_renders_stays_unread(tmp_path):
    root = write_tree(tmp_path / "repo", REFUSING)
    _, found, _, unread = read_manifests([str(root)])
    assert found == [] and len(unread) == 1 and "enabled must be true" in unread[0].message
