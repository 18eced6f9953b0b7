"""A chart's data files (read by its templates through .Files.Get / .Files.Glob and filled with tpl, the shape of
kserve's charts/kserve-*-resources: files/x/resources.yaml plus files/x/*-patch.yaml) in a directory walk."""

from __future__ import annotations

from kvdoctor.scan.documents import discover
from kvdoctor.scan.run import read_manifests

TEMPLATE = """\
{{- $base := .Files.Get "files/runtimes/resources.yaml" -}}
{{- $patches := "" -}}
{{- range $path, $_ := .Files.Glob "files/runtimes/*-patch.yaml" -}}
{{- $patches = printf "%s\\n%s" $patches (tpl ($.Files.Get $path) $) -}}
{{- end -}}
{{ $base }}
---
{{ $patches }}
"""
RUNTIME = """\
apiVersion: serving.kserve.io/v1alpha1
kind: ClusterServingRuntime
metadata:
  name: kserve-vllmserver
spec:
  containers:
  - name: kserve-container
    image: vllm/vllm-openai:v0.25.1
    args: [--model, /mnt/models, --max-model-len, "4096"]
"""
PATCH = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-patched
data:
  model: "{{ .Values.model }}"
"""


def _chart(tmp_path):
    chart = tmp_path / "repo" / "charts" / "runtimes"
    (chart / "templates").mkdir(parents=True)
    (chart / "files" / "runtimes").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: runtimes\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("model: qwen\n")
    (chart / "templates" / "resources.yaml").write_text(TEMPLATE)
    (chart / "files" / "runtimes" / "resources.yaml").write_text(RUNTIME)
    (chart / "files" / "runtimes" / "configmap-patch.yaml").write_text(PATCH)
    return tmp_path / "repo"


def test_files_glob_ranges_over_the_charts_files_as_helm_does(tmp_path):
    _, found, _, unread = read_manifests([str(_chart(tmp_path))])
    assert not any("range can't iterate" in u.message for u in unread)  # was: not rendered
    rendered = [w for w in found if "rendered from Helm chart" in " ".join(w.notes)]
    assert [(w.kind, w.name) for w in rendered] == [("ClusterServingRuntime", "kserve-vllmserver")]


def test_a_template_data_file_is_named_as_the_charts_data_never_unread(tmp_path):
    _, found, notes, unread = read_manifests([str(_chart(tmp_path))])
    assert unread == []  # the patch's {{ .Release.Name }} is filled by the chart's tpl, not a file left unread
    assert any("configmap-patch.yaml:4" in n and "data of chart" in n for n in notes)
    # a data file that is plain YAML is still read on its own too
    assert ("ClusterServingRuntime", "kserve-vllmserver") in [(w.kind, w.name) for w in found
                                                              if "rendered from Helm chart" not in " ".join(w.notes)]


def test_a_chart_that_renders_no_vllm_workload_though_its_values_name_vllm_is_named(tmp_path):
    # kserve's charts/kserve-runtime-configs: its vLLM ClusterServingRuntime sits behind servingruntime.enabled: false
    chart = tmp_path / "runtime-configs"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: runtime-configs\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("# runtimes\nservingruntime:\n  enabled: false\n  image: vllm/vllm-openai\n")
    (chart / "templates" / "runtime.yaml").write_text(
        "{{- if .Values.servingruntime.enabled }}\n" + RUNTIME.replace("vllm/vllm-openai:v0.25.1",
                                                                       "{{ .Values.servingruntime.image }}")
        + "{{- end }}\n")  # fmt: skip
    _, found, notes, unread = read_manifests([str(chart)])
    assert found == [] and unread == []
    assert any("renders no vLLM workload" in n and "values.yaml:4" in n for n in notes)
    (chart / "values.yaml").write_text("servingruntime:\n  enabled: false\n")
    assert read_manifests([str(chart)])[2] == []  # values that name no vLLM: an unrelated chart, not named


def test_a_values_file_a_template_globs_stays_an_override_not_data(tmp_path):
    repo = _chart(tmp_path)
    chart = repo / "charts" / "runtimes"
    (chart / "templates" / "config.yaml").write_text('{{- range $p, $_ := .Files.Glob "*.yaml" }}# {{ $p }}\n{{- end }}\n')
    (chart / "values-prod.yaml").write_text("model: llama\n")
    sources = discover([str(repo)])[0]
    assert any(getattr(s, "values_files", ()) and s.values_files[-1].name == "values-prod.yaml" for s in sources)


def test_a_data_file_that_runs_nothing_is_not_named_as_an_unread_document(tmp_path):
    # neuralmagic's nm-vllm-grafana-dashboards: .Files.Glob "dashboards/*.json", a Grafana dashboard of vLLM's metrics,
    # was named 'a YAML document that mentions vLLM ... (a chart's raw values?)'
    chart = tmp_path / "dashboards"
    (chart / "templates").mkdir(parents=True)
    (chart / "dashboards").mkdir()
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: dashboards\nversion: 0.1.0\n")
    (chart / "templates" / "cm.yaml").write_text(
        '{{- range $path, $_ := .Files.Glob "dashboards/*.json" }}\n---\napiVersion: v1\nkind: ConfigMap\n'
        'metadata:\n  name: d\ndata:\n  d.json: {{ $.Files.Get $path | toJson }}\n{{- end }}\n')
    (chart / "dashboards" / "vllm.json").write_text('{"title": "vLLM", "panels": [{"expr": "vllm:num_requests_running"}]}')
    _, found, notes, unread = read_manifests([str(chart)])
    assert found == [] and unread == [] and not any("vllm.json" in n for n in notes)
