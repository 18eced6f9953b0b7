"""What `kvdoctor scan` does with bad, empty, unpinned and secret-laden input, through the real CLI."""

from __future__ import annotations

import json
import shutil

from scan_support import MANIFESTS, line_of, rel


def test_malformed_yaml_is_one_line_with_file_and_line_exit_2(run_cli):
    result = run_cli("scan", rel("malformed.yaml"), "--gpu", "A100")
    assert result.code == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"kvdoctor: error: {rel('malformed.yaml')}:12: malformed YAML")


def test_malformed_file_in_a_directory_is_reported_on_its_own_and_the_others_checked(run_cli, tmp_path):
    shutil.copy(MANIFESTS / "acceptance" / "vllm-k8s.yaml", tmp_path / "good.yaml")
    shutil.copy(MANIFESTS / "malformed.yaml", tmp_path / "bad.yml")
    result = run_cli("scan", str(tmp_path), "--gpu", "A100", "--no-compile", "--format", "json")
    assert result.code == 2
    document = result.json()
    assert document["verdict"] == "ERROR"
    assert [u["location"]["line"] for u in document["unread"]] == [12]
    assert "bad.yml:12: malformed YAML" in document["unread"][0]["message"]
    assert {w["name"] for w in document["workloads"]} == {"qwen-a100", "qwen-h100"}  # still checked
    assert all(w["report"] is not None for w in document["workloads"])
    assert "bad.yml:12: malformed YAML" in result.stderr and "Traceback" not in result.stderr


def test_templated_yaml_says_to_render_with_helm_template(run_cli):
    result = run_cli("scan", rel("templated.yaml"))
    assert result.code == 2
    assert f"{rel('templated.yaml')}:4: Helm/Go template syntax" in result.stderr
    assert "helm template" in result.stderr and "kvdoctor scan -" in result.stderr


def test_a_chart_is_rendered_in_a_walk_and_its_known_values_still_read_when_it_renders_no_workload(run_cli, tmp_path):
    chart = tmp_path / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: demo\nversion: 0.1.0\n")
    shutil.copy(MANIFESTS / "templated.yaml", chart / "templates" / "deployment.yaml")
    shutil.copy(MANIFESTS / "production-stack-values.yaml", chart / "values.yaml")
    (tmp_path / "node_modules").mkdir()
    shutil.copy(MANIFESTS / "malformed.yaml", tmp_path / "node_modules" / "x.yaml")
    result = run_cli("scan", str(tmp_path), "--no-compile", "--format", "json")
    assert result.code == 2, result.stderr  # the template includes a helper the chart does not define
    document = result.json()
    assert [w["name"] for w in document["workloads"]] == ["qwen-a100"]  # production-stack values, read alone
    assert [u["message"].split(": ", 1)[1] for u in document["unread"]] == [
        'not rendered: no template "chart.fullname" associated with template']


def test_manifest_without_vllm_is_no_pass_exit_2_unless_allowed(run_cli):
    result = run_cli("scan", rel("no-vllm.yaml"), "--gpu", "A100")
    assert result.code == 2, result.stderr
    assert result.stdout.startswith("NONE  kvdoctor scan: 0 vLLM workloads in 1 file: nothing checked")
    assert "no vLLM workload in 1 file(s)" in result.stdout
    assert result.stderr.count("\n") == 1 and "--allow-no-workload" in result.stderr
    allowed = run_cli("scan", rel("no-vllm.yaml"), "--allow-no-workload", "--format", "json")
    assert allowed.code == 0 and allowed.json()["verdict"] == "PASS"


def test_unknown_image_tag_is_said_and_version_rules_are_undecided(run_cli):
    result = run_cli("scan", rel("unpinned-and-secret.yaml"), "--no-compile", "--format", "json")
    workload = result.json()["workloads"][0]
    report = workload["report"]
    assert report["facts"]["vllm.version"] is None
    assert report["facts"]["gpu.name"] == "A100 80GB"  # the -SHARED suffix of time-sliced GPUs
    assert any("tag 'latest' does not name a vLLM release" in n for n in report["notes"])
    by_id = {f["rule_id"]: f for f in workload["findings"]}
    assert by_id["KVD204"]["severity"] == "info"
    assert by_id["KVD204"]["location"]["line"] == line_of("unpinned-and-secret.yaml", "image: vllm/vllm-openai:latest")
    unpinned = next(f for f in report["findings"] if f["rule_id"] == "KVD204")
    assert [fix["title"] for fix in unpinned["fixes"]] == ["Pin a release tag"]  # vLLM's own image
    assert by_id["KVD101"]["status"] == "undecided"  # needs the vLLM version
    decided = next(f for f in report["findings"] if f["rule_id"] == "KVD101")["decided_by"]
    assert any(d.startswith("vllm.version") for d in decided)


def test_vllm_version_default_applies_to_unpinned_images(run_cli):
    result = run_cli("scan", rel("unpinned-and-secret.yaml"), "--no-compile", "--format", "json",
                     "--vllm-version", "0.25.1")  # fmt: skip
    workload = result.json()["workloads"][0]
    assert workload["report"]["facts"]["vllm.version"] == "0.25.1"
    assert result.code == 1
    assert {f["rule_id"] for f in workload["findings"] if f["status"] == "fired"} >= {"KVD101", "KVD204"}


def test_secret_and_configmap_env_are_unknown_and_said(run_cli):
    result = run_cli("scan", rel("unpinned-and-secret.yaml"), "--no-compile", "--format", "json",
                     "--vllm-version", "0.25.1")  # fmt: skip
    workload = result.json()["workloads"][0]
    unknown = next(f for f in workload["findings"] if f["rule_id"] == "KVD203")
    assert "VLLM_ATTENTION_BACKEND comes from ConfigMap 'vllm-flags' key 'backend'" in unknown["title"]
    assert unknown["location"]["line"] == line_of("unpinned-and-secret.yaml", "- name: VLLM_ATTENTION_BACKEND")
    assert workload["report"]["facts"]["serve.attention_backend"] == "auto"  # judged as unset, and said so
    notes = workload["report"]["notes"]
    assert any("VLLM_API_KEY comes from Secret 'vllm-api' key 'key'" in n for n in notes)  # no rule reads it
    assert any("VLLM_USE_V2_MODEL_RUNNER comes from Secret 'vllm-flags' key 'v2'" in n for n in notes)
    assert any("environment from Secret 'vllm-extra-env'" in n for n in notes)
    assert "env.VLLM_USE_V2_MODEL_RUNNER" not in workload["report"]["facts"]


def test_no_gpu_named_and_no_default_is_checked_with_the_gpu_unknown(run_cli):
    result = run_cli("scan", rel("acceptance/compose.yaml"), "--no-compile", "--format", "json")
    workload = result.json()["workloads"][0]
    assert workload["report"] is not None and workload["error"] is None
    assert workload["verdict"] == "WARN"  # never a PASS: the GPU's rules were not judged
    assert workload["report"]["facts"]["gpu.name"] is None  # not the scanning machine's GPU
    assert workload["report"]["facts"]["serve.args_accepted"] is True and workload["report"]["facts"]["kv.accepted"]
    (why,) = workload["unjudged"]
    assert why.startswith("GPU unknown: the manifest names no GPU") and "pass --gpu" in why
    assert result.code == 0, result.stderr


def test_missing_path_and_bad_defaults_are_exit_2(run_cli):
    assert run_cli("scan", "no/such/dir").code == 2
    bad_gpu = run_cli("scan", rel("no-vllm.yaml"), "--gpu", "A1000000")
    assert bad_gpu.code == 2 and "unknown GPU" in bad_gpu.stderr
    assert run_cli("scan", rel("no-vllm.yaml"), "--vllm-version", "banana").code == 2
    assert run_cli("scan", rel("no-vllm.yaml"), "--format", "prometheus").code == 2


def test_stdin_as_helm_template_output(run_cli):
    text = (MANIFESTS / "acceptance" / "vllm-k8s.yaml").read_text()
    result = run_cli("scan", "-", "--no-compile", "--format", "json", stdin=text)
    assert result.code == 1, result.stderr
    document = result.json()
    assert {w["file"] for w in document["workloads"]} == {"<stdin>"}
    a100 = next(w for w in document["workloads"] if w["name"] == "qwen-a100")
    assert next(f for f in a100["findings"] if f["rule_id"] == "KVD101")["location"]["line"] == \
        line_of("acceptance/vllm-k8s.yaml", "--kv-cache-dtype")  # fmt: skip


def test_fail_on_never_and_warning(run_cli):
    never = run_cli("scan", rel("acceptance"), "--gpu", "A100", "--no-compile", "--fail-on", "never")
    assert never.code == 0
    h100_only = (MANIFESTS / "acceptance" / "vllm-k8s.yaml").read_text().split("---")[2]
    warn = run_cli("scan", "-", "--no-compile", "--fail-on", "warning", stdin=h100_only)
    assert warn.code == 0, warn.stdout


def test_config_file_supplies_the_gpu_default_and_ignores(run_cli, tmp_path, cli_env):
    shutil.copy(MANIFESTS / "acceptance" / "compose.yaml", tmp_path / "compose.yaml")
    (tmp_path / "examples").symlink_to(MANIFESTS.parents[2] / "examples")
    (tmp_path / "kvdoctor.toml").write_text('gpu = "A100"\n[ignore]\nKVD111 = "accepted for the demo"\n')
    cli_env["KVDOCTOR_TEST_CWD"] = str(tmp_path)  # run_cli reads its working directory from here
    result = run_cli("scan", "compose.yaml", "--no-compile", "--format", "json")
    assert result.code in (0, 1), result.stderr
    workload = result.json()["workloads"][0]
    assert workload["report"]["facts"]["gpu.name"] == "A100 80GB"
    guard = next(f for f in workload["findings"] if f["rule_id"] == "KVD111")
    assert guard["gates"] is False
    assert json.dumps(workload).count("accepted for the demo") >= 1


def test_unusable_workloads_are_reported_at_their_line_and_exit_2(run_cli):
    result = run_cli("scan", rel("container-paths.yaml"), "--no-compile", "--format", "json")
    assert result.code == 2
    workloads = {w["name"]: w for w in result.json()["workloads"]}
    bad = workloads["bad-dtype"]["error"]
    assert "serve flag --dtype 'bf16'" in bad["message"]
    assert bad["location"]["line"] == line_of("container-paths.yaml", "- --dtype")
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"kvdoctor: error: {rel('container-paths.yaml')}:")


def test_a_model_that_cannot_be_read_still_gets_the_model_independent_check(run_cli):
    result = run_cli("scan", rel("container-paths.yaml"), "--no-compile", "--format", "json")
    volume = {w["name"]: w for w in result.json()["workloads"]}["volume-model"]
    assert volume["error"] is None and volume["report"] is not None
    (why,) = volume["unjudged"]
    assert why.startswith("model unknown: /models/qwen not read here") and "--model-path /models/qwen=DIR" in why
    assert volume["verdict"] == "WARN"  # never a PASS: the model-dependent rules were not judged
    report = volume["report"]
    assert report["facts"]["vllm.version"] == "0.27.0" and report["facts"]["kv.accepted"] is True


def test_model_path_maps_a_container_path_to_a_local_config(run_cli):
    result = run_cli("scan", rel("container-paths.yaml"), "--no-compile", "--format", "json",
                     "--model-path", "/models/qwen=examples/qwen2.5-3b-instruct")  # fmt: skip
    workloads = {w["name"]: w for w in result.json()["workloads"]}
    volume = workloads["volume-model"]
    assert volume["verdict"] == "PASS" and volume["report"]["facts"]["model.model_id"] == "qwen2.5-3b-instruct"
    assert workloads["bad-dtype"]["verdict"] == "ERROR"  # the flag is still wrong
    assert run_cli("scan", rel("container-paths.yaml"), "--model-path", "nonsense").code == 2


def test_python_tags_are_never_constructed(run_cli, tmp_path):
    marker = tmp_path / "pwned"
    manifest = tmp_path / "tagged.yaml"
    text = (MANIFESTS / "acceptance" / "vllm-k8s.yaml").read_text()
    manifest.write_text(text.replace("ports: [{containerPort: 8000}]",
                                     f"ports: !!python/object/apply:os.system ['touch {marker}']"))  # fmt: skip
    result = run_cli("scan", str(manifest), "--no-compile", "--format", "json")
    assert result.code == 1, result.stderr  # read as data, judged as before
    assert not marker.exists()


def test_oversized_manifest_is_refused_on_one_line(run_cli, tmp_path):
    big = tmp_path / "big.yaml"
    with big.open("wb") as handle:
        handle.truncate(9 * 1024 * 1024)
    result = run_cli("scan", str(big))
    assert result.code == 2 and "over 8 MiB, not read" in result.stderr
