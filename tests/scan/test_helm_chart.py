"""Helm charts rendered by scan (issue 27): real charts stored whole in tests/fixtures/manifests/charts, rendered
as `helm template` would, their workloads read by the Kubernetes readers and placed on the template lines."""

from __future__ import annotations

import shutil
import time

from scan_support import MANIFESTS, REPO, public_index, scan

from kvdoctor.scan.helm_chart import render_chart, set_value
from kvdoctor.scan.run import read_manifests

CHARTS = MANIFESTS / "charts"
NM_VLLM = CHARTS / "neuralmagic__helm-charts" / "charts" / "nm-vllm"
CASTAI = CHARTS / "castai__helm-charts" / "charts" / "castai-hosted-model"
TEMPLATE = "tests/fixtures/manifests/charts/neuralmagic__helm-charts/charts/nm-vllm/templates/deployment.yaml"


def _line(path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_a_charts_values_file_renders_the_chart_with_its_defaults():
    _, workloads, _, unread = read_manifests([str((NM_VLLM / "values.yaml").relative_to(REPO))])
    (workload,) = workloads
    assert not unread
    assert (workload.kind, workload.name, workload.container) == ("Deployment", "nm-vllm", "nm-vllm")
    assert workload.image == "ghcr.io/neuralmagic/nm-vllm-openai:v0.1.0"  # the tag defaults to .Chart.AppVersion
    assert [t.text for t in workload.argv] == ["--host", "0.0.0.0", "--model", "mistralai/Mistral-7B-v0.1", "--port",
                                               "80"]  # fmt: skip
    assert workload.file == TEMPLATE
    template = NM_VLLM / "templates" / "deployment.yaml"
    assert workload.argv[3].line == _line(template, "{{ .Values.modelName }}")
    assert workload.image_line == _line(template, "image:")
    assert any("rendered from Helm chart" in n and "release nm-vllm" in n for n in workload.notes)


def test_an_override_values_file_under_the_chart_wins_over_the_defaults():
    _, (workload,), _, _ = read_manifests([str((NM_VLLM / "examples" / "basic" / "values.yaml").relative_to(REPO))])
    assert [t.text for t in workload.argv][-2:] == ["--dtype", "float16"]
    assert workload.argv[-1].line == _line(NM_VLLM / "templates" / "deployment.yaml", "{{ quote . }}")
    assert workload.gpu_limit == 1
    assert [(s.key, s.values) for s in workload.gpu_selectors] == [("nvidia.com/gpu.product",
                                                                    ("NVIDIA-A100-SXM4-40GB",))]  # fmt: skip
    example = NM_VLLM / "examples" / "basic" / "values.yaml"
    (behind,) = [n for n in workload.notes if n.startswith("values behind it: ")]
    assert f'"float16" ({example.relative_to(REPO)}:{_line(example, "float16")})' in behind  # the value's own line
    defaults = NM_VLLM / "values.yaml"
    assert f"v0.1.0 ({defaults.relative_to(REPO)}:{_line(defaults, 'tag: v0.1.0')})" in behind


def test_scan_judges_the_rendered_workload_with_the_gpu_its_values_name(tmp_path):
    report = scan([str((NM_VLLM / "examples" / "basic" / "values.yaml").relative_to(REPO))], tmp_path, gpu=None)
    (result,) = report.workloads
    assert result.report is not None and result.error is None
    assert result.report.facts["gpu.name"] == "A100 40GB"


def test_a_walk_renders_each_chart_once_and_each_override_once():
    files, workloads, _, unread = read_manifests([str(NM_VLLM.relative_to(REPO))])
    assert files == [str(NM_VLLM.relative_to(REPO)), str((NM_VLLM / "examples/basic/values.yaml").relative_to(REPO))]
    assert sorted(w.argv[3].text for w in workloads) == ["TheBloke/Mistral-7B-Instruct-v0.2-GPTQ",
                                                         "mistralai/Mistral-7B-v0.1"]  # fmt: skip
    assert not unread


def test_values_given_on_the_command_line_override_every_chart(tmp_path):
    override = tmp_path / "prod-values.yaml"
    override.write_text("modelName: Qwen/Qwen2.5-7B-Instruct\nimage: {tag: v0.2.0}\n")
    _, (workload,), _, _ = read_manifests([str((NM_VLLM / "values.yaml").relative_to(REPO))], (override,))
    assert workload.argv[3].text == "Qwen/Qwen2.5-7B-Instruct"
    assert workload.image == "ghcr.io/neuralmagic/nm-vllm-openai:v0.2.0"


def test_a_template_that_fails_is_reported_on_its_own_and_the_others_still_render():
    rendered = render_chart(CASTAI / "child-charts" / "sglang")
    (failure,) = rendered.failures
    assert failure[0].name == "deployment.yaml" and "Required value 'model.name' must be defined" in failure[2]
    assert {t.template.name for t in rendered.templates} >= {"service.yaml"}
    _, _, _, unread = read_manifests([str((CASTAI / "child-charts" / "sglang").relative_to(REPO))])
    assert [u.location.line for u in unread] == [_line(CASTAI / "child-charts/sglang/templates/deployment.yaml",
                                                       "'model.name' must be defined")]  # fmt: skip


def test_castai_vllm_child_chart_renders_its_startup_script_container_which_is_not_vllm_serve():
    rendered = render_chart(CASTAI / "child-charts" / "vllm")
    assert not rendered.failures
    deployment = next(t for t in rendered.templates if t.template.name == "deployment.yaml")
    assert '- "--dtype=half"' in deployment.text and 'command: ["/scripts/startup.sh"]' in deployment.text
    _, workloads, _, _ = read_manifests([str((CASTAI / "child-charts" / "vllm" / "values.yaml").relative_to(REPO))])
    assert workloads == []  # model.name is empty by default: the index reads no workload either


def test_an_unknown_function_names_itself(tmp_path):
    chart = tmp_path / "chart"
    shutil.copytree(NM_VLLM, chart)
    (chart / "templates" / "extra.yaml").write_text("kind: Secret\ndata:\n  ca: {{ genCA \"vllm\" 365 }}\n")
    _, workloads, _, unread = read_manifests([str(chart)])
    # once, though the chart is rendered twice (its defaults, then examples/basic/values.yaml over them)
    assert [u.message.split(": ", 1)[1] for u in unread] == ["not rendered: function genCA"]
    assert unread[0].location.line == 3 and len(workloads) == 2  # the deployment still rendered, both times


def test_an_argo_cd_application_renders_its_chart_with_its_values_and_parameters(tmp_path):
    shutil.copytree(NM_VLLM, tmp_path / "charts" / "nm-vllm")
    app = tmp_path / "apps" / "nm.yaml"
    app.parent.mkdir()
    app.write_text("""apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: granite}
spec:
  destination: {namespace: llm}
  source:
    repoURL: https://example.com/repo.git
    path: charts/nm-vllm
    helm:
      valueFiles: [examples/basic/values.yaml, $values/envs/prod.yaml]
      values: |
        apiServer: {port: 9000}
      parameters:
      - {name: modelName, value: ibm-granite/granite-3.1-8b-instruct}
      - {name: "apiServer.extraArgs[0]", value: --max-model-len}
      - {name: "apiServer.extraArgs[1]", value: "8192"}
""")
    _, (workload,), notes, unread = read_manifests([str(app)])
    assert not unread
    assert notes == [f"Argo CD Application granite ({app}:1): value file $values/envs/prod.yaml is not in the scanned "
                     "tree (relative to charts/nm-vllm): rendered without it"]
    assert workload.name == "granite-nm-vllm"  # the release is the Application's name
    assert [t.text for t in workload.argv] == ["--host", "0.0.0.0", "--model", "ibm-granite/granite-3.1-8b-instruct",
                                               "--port", "9000", "--max-model-len", "8192"]  # fmt: skip
    assert workload.gpu_limit == 1  # from the Application's valueFiles
    assert any("by Argo CD Application granite" in n for n in workload.notes)


def test_a_flux_helmrelease_and_a_chart_outside_the_tree(tmp_path):
    shutil.copytree(NM_VLLM, tmp_path / "charts" / "nm-vllm")
    release = tmp_path / "release.yaml"
    release.write_text("""apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: vllm, namespace: ai}
spec:
  chart: {spec: {chart: ./charts/nm-vllm, sourceRef: {kind: GitRepository, name: repo}}}
  values: {modelName: Qwen/Qwen3-8B}
---
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: remote}
spec:
  source: {repoURL: https://charts.example.com, chart: vllm, targetRevision: 1.0.0}
""")
    _, (workload,), notes, _ = read_manifests([str(release)])
    assert workload.argv[3].text == "Qwen/Qwen3-8B" and workload.name == "vllm-nm-vllm"
    assert notes == [f"Argo CD Application remote ({release}:8) installs chart vllm from https://charts.example.com, "
                     "which is not in the scanned tree: not checked (scan the chart's directory with --values)"]


def test_set_values_are_typed_as_helm_set_types_them():
    values: dict = {}
    set_value(values, "a.b[1].c", "42")
    set_value(values, "flag", "true")
    set_value(values, "tag", "0.10", force_string=True)
    set_value(values, "name\\.dotted", "x")
    assert values == {"a": {"b": [None, {"c": 42}]}, "flag": True, "tag": "0.10", "name.dotted": "x"}


def test_rendering_a_chart_stays_well_under_a_second():
    started = time.perf_counter()
    for _ in range(5):
        read_manifests([str(CASTAI.relative_to(REPO))])
    assert (time.perf_counter() - started) / 5 < 0.5


def _with_test_values(tmp_path, chart, values_name: str):
    """The real chart with values written for the tests in place of its own values.yaml."""
    copy = tmp_path / chart.name
    shutil.copytree(chart, copy)
    shutil.copy(CHARTS / "test-values" / values_name, copy / "values.yaml")
    return copy


def test_the_checksum_idiom_includes_another_template_by_its_helm_name(tmp_path):
    source = CHARTS / "pkstaz__pdf-comparator-ai" / "helm" / "vllm"
    chart = _with_test_values(tmp_path, source, "pdf-comparator-vllm.yaml")
    _, (workload,), _, unread = read_manifests([str(chart / "values.yaml")])
    deployment = chart / "templates" / "deployment.yaml"
    assert "$.Template.BasePath" in deployment.read_text()  # include (print $.Template.BasePath "/configmap.yaml")
    assert [t.text for t in workload.argv][:4] == ["--model", "Qwen/Qwen2.5-7B-Instruct", "--dtype", "auto"]
    assert workload.argv[1].line == _line(deployment, ".Values.model.huggingfaceName")
    assert [(s.key, s.values) for s in workload.gpu_selectors] == [("nvidia.com/gpu.product", ("NVIDIA-L4",))]
    # upstream, templates/servicemonitor.yaml ends without its {{ end }}: Helm refuses it too; the rest renders
    assert [u.message.split(": ", 1)[1] for u in unread] == ["not rendered: unexpected EOF: {{end}} missing"]


def test_args_from_values_through_toyaml(tmp_path):
    source = CHARTS / "inf-monkeys__helm-charts" / "charts" / "vllm"
    chart = _with_test_values(tmp_path, source, "inf-monkeys-vllm.yaml")
    _, (workload,), _, unread = read_manifests([str(chart / "values.yaml")])
    assert not unread
    assert (workload.name, workload.container, workload.image) == ("vllm", "vllm-openai", "vllm/vllm-openai:v0.6.0")
    assert [t.text for t in workload.argv] == ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "4096"]
    assert workload.argv[0].line == _line(chart / "templates" / "vllm-deployment.yaml", ".Values.vllm.args")
    assert workload.gpu_limit == 1


def test_the_values_option_on_the_command_line(run_cli, tmp_path):
    override = tmp_path / "values-prod.yaml"
    override.write_text("apiServer:\n  extraArgs: [--dtype, bf16x]\n")
    result = run_cli("scan", str(NM_VLLM / "values.yaml"), "--values", str(override), "--no-compile", "--format",
                     "json")  # fmt: skip
    assert result.code == 2, result.stderr  # the rendered --dtype bf16x is refused, at the template's line
    (workload,) = result.json()["workloads"]
    assert workload["error"]["location"]["line"] == _line(NM_VLLM / "templates" / "deployment.yaml", "{{ quote . }}")
    missing = run_cli("scan", str(NM_VLLM), "--values", str(tmp_path / "nope.yaml"))
    assert missing.code == 2 and missing.stderr.startswith("kvdoctor: error: --values ")
    assert "Traceback" not in missing.stderr


def test_a_broken_chart_is_one_line_per_problem_never_a_traceback(run_cli, tmp_path):
    chart = tmp_path / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("name: [oops\n")
    (chart / "templates" / "a.yaml").write_text("a: 1\n")
    malformed = run_cli("scan", str(tmp_path), "--no-compile")
    assert malformed.code == 2 and malformed.stderr == \
        f"kvdoctor: error: {chart}/Chart.yaml:2: malformed YAML (kvdoctor renders charts itself; check it with: " \
        "helm template RELEASE CHART -f values.yaml)\n"  # fmt: skip
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: demo\nversion: 0.1.0\n")
    (chart / "templates" / "b.yaml").write_text("x: 1\n{{ if }}\n")
    (chart / "templates" / "c.yaml").write_bytes(b"\xff\xfe{{ x }}")
    (chart / "templates" / "d.yaml").write_text("{{ until 100000000 }}\n")
    result = run_cli("scan", str(tmp_path), "--no-compile")
    assert result.code == 2 and "Traceback" not in result.stderr
    assert [line.removeprefix("kvdoctor: error: ").split(": ", 1) for line in result.stderr.splitlines()] == [
        [f"{chart}/templates/b.yaml:2", "not rendered: missing value for command (kvdoctor renders charts itself; "
         "check it with: helm template RELEASE CHART -f values.yaml)"],
        [f"{chart}/templates/c.yaml", "not rendered: not UTF-8 text (kvdoctor renders charts itself; check it with: "
         "helm template RELEASE CHART -f values.yaml)"],
        [f"{chart}/templates/d.yaml:1", "not rendered: error calling until: 100000000 is more than kvdoctor generates "
         "(1000000) (kvdoctor renders charts itself; check it with: helm template RELEASE CHART -f values.yaml)"]]


def _production_stack_values_files() -> list:
    index = public_index()
    return [MANIFESTS / "public" / e["file"] for e in index if e["repo"] == "vllm-project/production-stack"
            and not e["heldout"] and any(w.get("kind") == "modelSpec" for w in e["workloads"])]  # fmt: skip


def test_production_stacks_real_chart_renders_what_its_values_reader_reads():
    """The hand-written production-stack values reader and the rendered chart (30 templates) agree on every seen
    production-stack values file of the public index: same model and flags, the template adding --host and --port."""
    chart = CHARTS / "vllm-project__production-stack" / "helm"
    files = _production_stack_values_files()
    assert len(files) >= 4
    for values in files:
        _, by_reader, _, _ = read_manifests([str(values.relative_to(REPO))])
        _, rendered, _, unread = read_manifests([str(chart.relative_to(REPO))], (values,))
        assert not unread, values.name
        for expected in by_reader:
            if any(n.startswith("raySpec") for n in expected.notes):
                continue  # a RayCluster: its head runs vLLM inside a Ray start-up script, read differently
            (workload,) = [w for w in rendered if w.name == f"vllm-stack-{expected.name}-deployment-vllm"]
            words = [t.text for t in workload.argv]
            assert words[1:5] == ["--host", "0.0.0.0", "--port", "8000"], values.name
            assert [words[0]] + words[5:] == [t.text for t in expected.argv], values.name
            assert (workload.image, workload.gpu_limit) == (expected.image, expected.gpu_limit), values.name


def test_subcharts_render_with_the_parents_values_under_their_key_and_their_condition(tmp_path):
    override = tmp_path / "values.yaml"
    override.write_text("vllm:\n  model: {name: Qwen/Qwen3-8B}\n  maxModelLen: 4096\n")
    rendered = render_chart(CASTAI, [override])
    assert not rendered.failures  # sglang (a file:// dependency with condition sglang.enabled: false) is skipped
    names = {t.name for t in rendered.templates}
    assert "castai-hosted-model/charts/vllm/templates/deployment.yaml" in names
    assert not any("/charts/sglang/" in n for n in names)
    deployment = next(t for t in rendered.templates if t.name.endswith("charts/vllm/templates/deployment.yaml"))
    assert '- "--served-model-name=Qwen/Qwen3-8B"' in deployment.text and '- "--max-model-len=4096"' in deployment.text


def test_a_parent_sees_its_subcharts_defaults_under_their_key_and_a_subchart_always_has_global(tmp_path):
    # bjw-s' app-template idiom: a library aliased `common` whose defaults the wrapper merges from .Values.common,
    # and `.Values.global.x` in a subchart whose parent sets no global
    app, lib = tmp_path / "app", tmp_path / "app" / "charts" / "lib"
    (lib / "templates").mkdir(parents=True)
    (app / "templates").mkdir()
    (app / "Chart.yaml").write_text("apiVersion: v2\nname: app\nversion: 1.0.0\n"
                                    "dependencies:\n  - {name: lib, version: 1.0.0, alias: common}\n")
    (app / "values.yaml").write_text("image: vllm/vllm-openai:v0.25.1\n")
    (lib / "Chart.yaml").write_text("apiVersion: v2\nname: lib\nversion: 1.0.0\n")
    (lib / "values.yaml").write_text("rbac:\n  roles: {}\nport: 8000\n")
    (lib / "templates" / "names.yaml").write_text("{{- if not .Values.global.nameOverride }}{{- end }}\n")
    (app / "templates" / "app.yaml").write_text(
        "{{- range $k, $v := .Values.common.rbac.roles }}{{ $k }}{{ end }}\n"
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: vllm\nspec:\n  containers:\n  - name: vllm\n"
        "    image: {{ .Values.image }}\n    args: [--port, \"{{ .Values.common.port }}\"]\n")
    rendered = render_chart(app, [])
    assert not rendered.failures, rendered.failures
    assert '--port, "8000"' in next(t.text for t in rendered.templates if t.name.endswith("app.yaml"))


def test_files_capabilities_lookup_and_the_release_as_helm_template_gives_them(tmp_path):
    chart = tmp_path / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "config").mkdir()
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: demo\nversion: 1.2.3\nappVersion: '0.9'\n")
    (chart / "config" / "args.txt").write_text("--max-model-len 4096")
    (tmp_path / "secret.txt").write_text("outside the chart")
    (chart / "templates" / "cm.yaml").write_text(
        "a: {{ .Files.Get \"config/args.txt\" | quote }}\n"
        "b: {{ .Files.Get \"../secret.txt\" | quote }}\n"
        "c: {{ .Files.Get \"templates/cm.yaml\" | quote }}\n"
        "d: {{ (.Files.Glob \"config/*\").AsConfig | nindent 2 }}\n"
        "e: {{ .Capabilities.KubeVersion.Version }} {{ .Capabilities.APIVersions.Has \"apps/v1\" }}"
        " {{ semverCompare \">=1.21-0\" .Capabilities.KubeVersion.GitVersion }}\n"
        "f: {{ lookup \"v1\" \"Secret\" \"ns\" \"name\" | toJson }}\n"
        "g: {{ .Release.Name }} {{ .Release.Namespace }} {{ .Release.Service }} {{ .Chart.Version }}"
        " {{ .Chart.AppVersion }} {{ .Template.Name }}\n")
    (rendered,) = render_chart(chart).templates
    assert rendered.text.splitlines() == [
        'a: "--max-model-len 4096"', 'b: ""', 'c: ""', "d: ", "  args.txt: --max-model-len 4096",
        "e: v1.31.0 false true", "f: {}", "g: demo default Helm 1.2.3 0.9 demo/templates/cm.yaml"]


def test_a_dependency_from_a_chart_repository_not_in_charts_is_named_not_hidden(tmp_path):
    """A real chart (tylertitsworth/ai-cluster's vllm) is a values file over bjw-s app-template from its Helm
    repository: without `helm dependency build` its templates are not in the tree, so the chart is reported as not
    rendered, naming the dependency, never as a tree in which nothing runs vLLM. Once charts/ holds it, no such line."""
    chart = tmp_path / "vllm"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: vllm\nversion: 0.1.0\ndependencies:\n"
                                      "  - name: app-template\n    version: 3.x.x\n"
                                      "    repository: https://bjw-s-labs.github.io/helm-charts/\n"
                                      "  - name: off\n    version: 1.0.0\n    repository: oci://example/charts\n"
                                      "    condition: off.enabled\n")
    (chart / "values.yaml").write_text("app-template:\n  controllers: {}\n")
    failures = [why for _, _, why in render_chart(chart).failures]
    assert failures == ["not rendered: dependency app-template (https://bjw-s-labs.github.io/helm-charts/ 3.x.x) "
                        "is not in charts/: its templates are not here (`helm dependency build` fetches it)"]
    # `helm dependency build` leaves it packed in charts/: unpacked and rendered under its key
    import io
    import tarfile

    (chart / "charts").mkdir()
    with tarfile.open(chart / "charts" / "app-template-3.7.3.tgz", "w:gz") as packed:
        for name, text in (("app-template/Chart.yaml", "apiVersion: v2\nname: app-template\nversion: 3.7.3\n"),
                           ("app-template/templates/pod.yaml", "kind: Pod\nmetadata:\n  name: {{ .Release.Name }}\n"
                            "spec:\n  containers: {{ .Values.controllers | toJson }}\n")):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            packed.addfile(info, io.BytesIO(data))
    rendered = render_chart(chart)
    assert rendered.failures == []
    assert [t.text for t in rendered.templates] == ["kind: Pod\nmetadata:\n  name: vllm\nspec:\n  containers: {}\n"]


def test_castai_vllm_chart_with_a_model_is_its_wrapper_scripts_workload_and_without_one_none(tmp_path):
    # the default values leave service.name (the Deployment's name) and model.name empty: an object Kubernetes
    # refuses, no workload; values like the parent chart's ci/test-values.yaml name both, and the startup script's
    # vLLM options are checked
    chart = tmp_path / "vllm"
    shutil.copytree(CASTAI / "child-charts" / "vllm", chart)
    _, workloads, notes, _ = read_manifests([str(chart)])
    assert workloads == [] and any("renders no vLLM workload" in n for n in notes)
    (chart / "ci").mkdir()
    (chart / "ci" / "test-values.yaml").write_text('model:\n  name: "dummy/model"\nservice:\n  name: vllm-test\n')
    _, workloads, _, _ = read_manifests([str(chart)])
    (found,) = workloads
    assert found.container == "vllm" and "--kv-cache-dtype=auto" in [t.text for t in found.argv]


def _tiny_chart(root):
    chart = root / "charts" / "llm"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: llm\nversion: 1.0.0\n")
    (chart / "values.yaml").write_text("enabled: false\nmodel: Qwen/Qwen3-8B\ntp: 1\n")
    (chart / "templates" / "deploy.yaml").write_text(
        "{{- if .Values.enabled }}\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}-llm\n"
        "spec:\n  template:\n    spec:\n      containers:\n      - name: vllm\n        image: vllm/vllm-openai:v0.25.1\n"
        "        args: [serve, {{ .Values.model | quote }}, --tensor-parallel-size, \"{{ .Values.tp }}\","
        " {{ \"a b\" | wrap 1 | quote }}]\n{{- end }}\n")
    return chart


def test_a_helmfiles_releases_render_their_local_charts_with_their_value_files_inline_values_and_sets(tmp_path):
    _tiny_chart(tmp_path)
    (tmp_path / "values").mkdir()
    (tmp_path / "values" / "qwen.yaml").write_text("enabled: true\nmodel: Qwen/Qwen3-32B\n")
    (tmp_path / "helmfile.yaml").write_text(
        "releases:\n  - name: qwen\n    namespace: llm\n    chart: ./charts/llm\n    values:\n      - values/qwen.yaml\n"
        "      - tp: 2\n    set:\n      - name: model\n        value: Qwen/Qwen3-14B\n"
        "  - name: off\n    chart: ./charts/llm\n  - name: web\n    chart: bitnami/nginx\n")
    files, found, notes, unread = read_manifests([str(tmp_path)])
    assert not unread, unread
    (workload,) = found
    assert workload.name == "llm/qwen-llm" or workload.name.endswith("qwen-llm")
    assert [t.text for t in workload.argv][:4] == ["serve", "Qwen/Qwen3-14B", "--tensor-parallel-size", "2"]
    assert not any("raw values" in n for n in notes)  # values/qwen.yaml is read through its release
    assert any("bitnami/nginx" in n and "not in the scanned tree" in n for n in notes)


def test_sprigs_float_max_and_min_keep_their_fractions():
    from kvdoctor.scan.gotemplate.execute import Renderer

    assert Renderer().render_text("{{ maxf 1.5 0.5 }}|{{ minf 1.5 0.5 }}|{{ biggest 3 7 }}", {}, "t") == "1.5|0.5|7"
