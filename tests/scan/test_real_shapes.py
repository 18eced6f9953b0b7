"""Issue 27: deployment files as platform teams have them (tests/fixtures/manifests/real-shapes/, reproductions of
public shapes): checked without the model, one bad file never hiding the others, multi-node GPU counts, flags at
their own lines, vLLM under other image names, kinds not read named, GPU labels, shell variables, and no facts of
the scanning machine's own packages."""

from __future__ import annotations

import shutil

import pytest
from scan_support import MANIFESTS, by_name, line_of, rel, scan

from kvdoctor.model.facts import VersionFacts

SHAPES = "real-shapes"


def _findings(result, status="fired") -> dict:
    return {p.finding.rule_id: p for p in result.placed if p.finding.status == status}


def test_unreadable_model_still_gets_flags_kv_dtypes_gpu_count_and_never_a_pass(tmp_path):
    report = scan([rel(f"{SHAPES}/lws-multinode.yaml")], tmp_path, gpu=None)
    (result,) = report.workloads
    assert result.report is not None and result.error is None
    facts = result.report.facts
    assert facts["serve.args_accepted"] is True and facts["kv.accepted"] is True  # judged without the model
    assert facts["deploy.gpus_needed"] == 16 and facts["deploy.gpus_short"] is False  # GPU count vs TP x PP
    assert facts["model.dtype"] is None  # the model-dependent facts stay unknown
    assert result.verdict == "WARN"
    assert any(u.startswith("model unknown: meta-llama/Meta-Llama-3.1-405B-Instruct not read here") and
               "--model-path meta-llama/Meta-Llama-3.1-405B-Instruct=DIR" in u for u in result.unjudged)  # fmt: skip
    undecided = [p.finding for p in result.placed if p.finding.status == "undecided"]
    lines = [line for f in undecided for line in f.decided_by if "model." in line or "model's" in line]
    assert lines and all("--model-path meta-llama/Meta-Llama-3.1-405B-Instruct=DIR" in line for line in lines)
    assert not any(line.startswith("model.") or "pass --model " in line for line in lines)  # said as --model-path


def test_a_model_on_a_volume_still_gets_its_refused_flag_and_gpu_count_as_errors(tmp_path):
    (tmp_path / "volume.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: llama-volume}\nspec:\n  template:\n    spec:\n"
        "      nodeSelector: {nvidia.com/gpu.product: NVIDIA-L40S}\n      containers:\n        - name: vllm\n"
        "          image: vllm/vllm-openai:v0.27.0\n          args:\n            - /mnt/models/llama-3.1-8b\n"
        "            - --tensor-parallel-size\n            - '4'\n            - --kv-cache-dtype\n            - fp8\n"
        "            - --swap-space\n            - '4'\n"
        "          resources: {limits: {nvidia.com/gpu: 2}}\n")  # fmt: skip
    from kvdoctor.check.run import CheckSettings
    from kvdoctor.scan.judge import ScanDefaults
    from kvdoctor.scan.run import run_scan

    defaults = ScanDefaults(gpu=None, offline=True, cache_dir=tmp_path / "cache")
    (result,) = run_scan([str(tmp_path / "volume.yaml")], defaults, CheckSettings()).workloads  # nothing compiles
    fired = _findings(result)
    assert fired["KVD004"].location.line == 17 and "--swap-space 4" in fired["KVD004"].finding.title  # gone in 0.27
    # no flag of 0.27.0 is spelled like it: the fix says to remove it, not to "spell it as 0.27.0 does"
    assert [f.title for f in fired["KVD004"].finding.fixes] == [
        "Remove the argument, or write it as `vllm serve --help` of vLLM 0.27.0 lists it"]
    assert "gets 2 GPU(s) but vLLM needs 4" in fired["KVD201"].finding.title and result.verdict == "FAIL"
    # the dry run says why it did not run: the model was named, its config not read (not "no model given")
    assert any("config.json was not read" in n for n in result.report.notes), result.report.notes


def test_leader_worker_set_counts_gpus_across_the_group(tmp_path):
    (result,) = scan([rel(f"{SHAPES}/lws-multinode.yaml")], tmp_path).workloads
    assert "KVD201" not in _findings(result) and "KVD202" not in _findings(result)
    assert result.report.facts["deploy.gpu_limit"] == 16
    assert "leader 8 + 1 x worker 8" in result.report.facts["deploy.gpu_resource"]


def test_a_short_group_is_kvd201_with_no_raw_placeholder_in_its_fixes(tmp_path):
    text = (MANIFESTS / SHAPES / "lws-multinode.yaml").read_text().replace("--pipeline_parallel_size 2",
                                                                           "--pipeline_parallel_size 4")
    (tmp_path / "lws.yaml").write_text(text)
    (result,) = scan([str(tmp_path / "lws.yaml")], tmp_path).workloads
    short = _findings(result)["KVD201"].finding
    assert "gets 16 GPU(s) but vLLM needs 32" in short.title
    rendered = " ".join([short.title, short.cause] + [f.title + str(f.flag or "") for f in short.fixes])
    assert "{" not in rendered
    assert short.fixes[0].title.startswith("Give the workload 32 GPUs (")  # the group's, not one container's
    assert "LeaderWorkerSet group of 2 pods" in short.fixes[0].title


def test_kserve_name_placeholder_in_a_quoted_argument_is_a_value_not_helm(tmp_path):
    report = scan([rel(f"{SHAPES}/kserve-vllm-servingruntime.yaml")], tmp_path)
    assert report.unread == ()
    (result,) = report.workloads
    assert result.workload.kind == "ServingRuntime"
    assert "--served-model-name={{.Name}}" in [t.text for t in result.workload.argv]


def test_go_template_inside_a_quoted_string_is_read_and_structural_templating_is_not(tmp_path):
    quoted = (MANIFESTS / "acceptance" / "vllm-k8s.yaml").read_text().replace(
        "name: qwen-a100", 'name: "qwen-{{ .Release.Name }}"', 1)  # fmt: skip
    (tmp_path / "quoted.yaml").write_text(quoted)
    shutil.copy(MANIFESTS / "templated.yaml", tmp_path / "templated.yaml")
    report = scan([str(tmp_path)], tmp_path)
    assert [u.location.file.endswith("templated.yaml") for u in report.unread] == [True]
    assert "Helm/Go template syntax" in report.unread[0].message
    assert {w.workload.name for w in report.workloads} == {"qwen-{{ .Release.Name }}", "qwen-h100"}
    assert report.exit_code("error") == 2  # the unreadable file still fails the gate


def test_a_refused_flag_points_at_its_own_line_and_names_the_releases_refusing_each(tmp_path):
    name = f"{SHAPES}/flags-on-their-lines.yaml"
    (result,) = scan([rel(name)], tmp_path).workloads
    # 0.20.0-0.32.0 refuse --disable-log-requests, 0.33.0-0.34.0 take it (EnableDisableAction): undecided, not fired
    refused = _findings(result, "undecided")["KVD004"]
    assert refused.location.line == line_of(name, "--disable-log-requests \\")
    assert refused.location.line != result.workload.command_line
    assert result.report.facts["serve.args_error"] == "unrecognized arguments: --disable-log-requests"
    assert "KVD004" not in _findings(result)


def test_no_enable_spellings_hidden_from_help_are_still_accepted():
    """vLLM 0.33's EnableDisableAction (vllm/utils/argparse_utils.py:120) keeps --no-enable-x registered, hidden
    from help; the pack records the visible option strings only, so the replay must accept the hidden ones."""
    from kvdoctor.vllm_pack.release import load_release
    from kvdoctor.vllm_pack.serve_parser import judge_argv

    new = load_release("0.33.0")
    for flag in ("--no-enable-chunked-prefill", "--no-enable-prefix-caching", "--disable-prefix-caching"):
        assert judge_argv(["m", flag], new.serve_args, new.allow_abbrev).error is None
    assert judge_argv(["m", "--no-such-flag"], new.serve_args, new.allow_abbrev).error is not None


def test_a_flag_value_kvdoctor_refuses_is_an_error_at_its_line_and_the_rest_is_still_checked(tmp_path):
    bad = by_name(scan([rel("container-paths.yaml")], tmp_path))["bad-dtype"]
    assert bad.verdict == "ERROR" and bad.exit_code("never") == 2
    assert "serve flag --dtype 'bf16'" in bad.error and bad.error_location.line == line_of("container-paths.yaml", "- --dtype")
    assert bad.report is not None and bad.report.facts["vllm.version"] == "0.27.0"  # the rest was checked
    assert [t.text for t in bad.workload.argv] == ["/models/qwen", "--dtype", "bf16"]  # reported as written


def test_a_fix_never_inverts_the_users_setting():
    from kvdoctor.vllm_pack.release import load_release
    from kvdoctor.vllm_pack.serve_parser import judge_argv

    old = load_release("0.25.1")
    verdict = judge_argv(["--disable-log-requests"], old.serve_args, old.allow_abbrev)
    assert verdict.error == "unrecognized arguments: --disable-log-requests"
    assert verdict.closest != "--enable-log-requests"  # the opposite setting is no spelling of it
    assert verdict.closest == "--no-enable-log-requests"  # the same setting as 0.25.1 spells it ...
    assert judge_argv(["--disable-log-requestz"], old.serve_args, old.allow_abbrev).closest != "--disable-log-stats"
    # ... and never another setting that only looks alike (--disable-log-stats), nor one word for another
    assert judge_argv(["--num-scheduler-steps", "8"], old.serve_args, old.allow_abbrev).closest is None
    assert judge_argv(["--enable-prefix-cache"], old.serve_args, old.allow_abbrev).closest == "--enable-prefix-caching"
    new = load_release("0.34.0")
    verdict = judge_argv(["--no-enable-chunked-prefill"], new.serve_args, new.allow_abbrev)
    assert verdict.closest != "--enable-chunked-prefill"


def test_vllm_under_other_image_names_is_found_and_unread_kinds_are_named(tmp_path):
    # copied out of kvdoctor's own checkout: in place, a chart of another fixture would be found at its top
    copies = tmp_path / "shapes"
    copies.mkdir()
    for name in ("other-images-and-kinds.yaml", "chart-raw-values.yaml"):
        shutil.copy(MANIFESTS / SHAPES / name, copies / name)
    report = scan([str(copies / "other-images-and-kinds.yaml"), str(copies / "chart-raw-values.yaml")], tmp_path)
    found = by_name(report)
    assert set(found) == {"granite-ubi9", "local-build", "qwen-llmisvc", "shapes"}
    # a chart's raw values, its chart not scanned (scan/chart_values.py): the container they describe, the model
    # from model.name (the arguments name none), the GPU count left to the templates
    raw = found["shapes"].workload
    assert [t.text for t in raw.argv][:2] == ["meta-llama/Llama-3.1-8B-Instruct", "--max-model-len=8192"]
    assert raw.kind == "Helm values (chart not scanned)" and raw.gpu_limit is None
    assert any("values key model.name" in n for n in raw.notes)
    assert [t.text for t in found["local-build"].workload.argv][:1] == ["--model=/weights/mistral-7b-instruct"]
    assert any("runs its own entrypoint with vLLM serve options only" in n for n in found["local-build"].report.notes)
    # an LLMInferenceService's container main without a command runs the controller's config template's command
    # (data/llm_inference_service.yaml) on spec.model.uri's model, its own args after it
    llmisvc = found["qwen-llmisvc"]
    assert [t.text for t in llmisvc.workload.argv] == ["Qwen/Qwen2.5-7B-Instruct", "--served-model-name",
                                                      "Qwen/Qwen2.5-7B-Instruct", "--port", "8000",
                                                      "--enable-prefix-caching", "--kv-cache-dtype", "fp8"]  # fmt: skip
    assert llmisvc.workload.image == "ghcr.io/llm-d/llm-d:v0.2.0"
    assert any("spec.model.uri" in n for n in llmisvc.report.notes)
    assert not any("chart-raw-values.yaml" in n and "a chart's raw values" in n for n in report.notes)
    # KServe's Hugging Face runtime serves it with vLLM (kserve_huggingface.py): read, its release unknown, never a PASS
    (predictor,) = scan([rel(f"{SHAPES}/kserve-predictor-model.yaml")], tmp_path).workloads
    assert [t.text for t in predictor.workload.argv] == ["meta-llama/meta-llama-3-8b-instruct"]
    assert predictor.verdict != "PASS" and any("huggingfaceserver image" in u for u in predictor.unjudged)


def test_an_llminferenceservice_without_a_pod_template_runs_its_config_templates_command(tmp_path):
    # its controller runs vLLM from a config template the file does not hold (data/llm_inference_service.yaml); the
    # object need not say "vllm"
    (tmp_path / "llmisvc.yaml").write_text(
        "apiVersion: serving.kserve.io/v1alpha1\nkind: LLMInferenceService\nmetadata: {name: qwen}\n"
        "spec:\n  model:\n    uri: hf://Qwen/Qwen2.5-7B-Instruct\n")  # fmt: skip
    report = scan([str(tmp_path / "llmisvc.yaml")], tmp_path)
    (result,) = report.workloads
    assert result.workload.container == "main" and result.workload.argv[0].text == "Qwen/Qwen2.5-7B-Instruct"
    assert any("config template" in n for n in result.workload.notes)


def test_flags_of_another_server_are_not_taken_for_vllm(tmp_path):
    (tmp_path / "tgi.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: tgi}\nspec:\n  containers:\n    - name: tgi\n"
        "      image: ghcr.io/huggingface/text-generation-inference:2.4\n"
        "      args: [--model-id, /data/llama, --num-shard, '2', --port, '8080']\n")  # fmt: skip
    report = scan([str(tmp_path / "tgi.yaml")], tmp_path)
    assert report.workloads == () and report.verdict == "NONE" and report.exit_code("error") == 2


def test_vke_gpu_label_is_read_and_shell_variables_come_from_the_env(tmp_path):
    (result,) = scan([rel(f"{SHAPES}/vke-sh-model-id.yaml")], tmp_path, gpu=None).workloads
    assert result.report.facts["gpu.name"] == "Tesla V100"
    argv = [t.text for t in result.workload.argv]
    assert argv[:3] == ["/models/Qwen2.5-7B-Instruct", "--tensor-parallel-size", "2"]  # $MODEL_ID, ${TP}
    assert result.report.facts["deploy.gpus_short"] is False


def test_an_unknown_gpu_label_value_is_said_as_such(tmp_path):
    text = (MANIFESTS / SHAPES / "vke-sh-model-id.yaml").read_text().replace("Tesla-V100", "Tesla-X900")
    (tmp_path / "vke.yaml").write_text(text)
    (result,) = scan([str(tmp_path / "vke.yaml")], tmp_path, gpu=None).workloads
    assert result.report.facts["gpu.name"] is None
    assert any("unknown GPU label value" in u and "Tesla-X900" in u for u in result.unjudged)
    assert not any("names no GPU" in n for n in result.report.notes)


@pytest.fixture
def local_vllm_without_flashinfer(monkeypatch):
    """The scanning machine has vLLM 0.25.1 installed but no FlashInfer: neither is the image's."""
    import kvdoctor.facts.probes.versions as versions

    monkeypatch.setattr(versions, "probe_versions",
                        lambda: VersionFacts(vllm="0.25.1", vllm_source="installed", triton="3.5.0", torch="2.9.0",
                                             flashinfer=None, python="3.12.0"))  # fmt: skip


def test_scan_reads_neither_the_local_vllm_nor_its_flashinfer(tmp_path, local_vllm_without_flashinfer):
    (unpinned,) = scan([rel("unpinned-and-secret.yaml")], tmp_path).workloads
    assert unpinned.report.facts["vllm.version"] is None  # the image's tag, not this machine's vLLM
    assert "KVD119" not in _findings(unpinned) and "KVD119" not in _findings(unpinned, "undecided")
    pinned = by_name(scan([rel("acceptance/vllm-k8s.yaml")], tmp_path))["qwen-h100"]
    assert pinned.report.facts["flashinfer.installed"] is True  # the release's pins: the image has it
    assert "KVD119" not in _findings(pinned)


def test_check_with_a_named_release_does_not_read_the_local_flashinfer(tmp_path, local_vllm_without_flashinfer):
    from kvdoctor.check.run import CheckSettings, run_check
    from kvdoctor.facts.collect import CheckOptions

    options = CheckOptions(serve_argv=("vllm", "serve", "examples/qwen2.5-3b-instruct", "--kv-cache-dtype", "fp8"),
                           gpu="A10", vllm_version="0.26.0", offline=True, cache_dir=tmp_path)  # fmt: skip
    report = run_check(options, CheckSettings(compile=False))
    assert report.facts["flashinfer.installed"] is True
    assert not any(f.rule_id == "KVD119" and f.status == "fired" for f in report.findings)


def test_every_format_reports_an_unread_file_and_a_scan_that_found_nothing(tmp_path):
    import json

    from kvdoctor.report.scan import github, junit, markdown, sarif, text
    from kvdoctor.report.scan import json as json_format

    shutil.copy(MANIFESTS / "malformed.yaml", tmp_path / "bad.yaml")
    shutil.copy(MANIFESTS / "acceptance" / "vllm-k8s.yaml", tmp_path / "good.yaml")
    unread = scan([str(tmp_path)], tmp_path)
    assert len(unread.workloads) == 2 and len(unread.unread) == 1
    assert "bad.yaml:12" in text.render(unread) and "not read" in text.render(unread)
    assert json.loads(json_format.render(unread))["unread"][0]["location"]["line"] == 12
    assert any(r["ruleId"] == "kvdoctor/not-read" for r in json.loads(sarif.render(unread))["runs"][0]["results"])
    assert "::error file=" in github.render(unread) and "bad.yaml,line=12" in github.render(unread)
    assert "file not read" in junit.render(unread) and "bad.yaml:12" in markdown.render(unread)
    nothing = scan([rel("no-vllm.yaml")], tmp_path)
    assert nothing.verdict == "NONE" and nothing.exit_code("never") == 2
    assert text.render(nothing).startswith("NONE  kvdoctor scan: 0 vLLM workloads in 1 file: nothing checked")
    assert "<error" in junit.render(nothing) and "**NONE**" in markdown.render(nothing)
    assert json.loads(json_format.render(nothing))["verdict"] == "NONE"


def test_a_hidden_no_spelling_is_read_as_written_never_as_its_opposite():
    """0.33+'s hidden --no-enable-x resolves to --enable-x's option: spelling it out must keep the user's `no`."""
    from kvdoctor.vllm_pack.release import load_release
    from kvdoctor.vllm_pack.serve_parser import canonical_argv

    new = load_release("0.34.0")
    assert canonical_argv(["m", "--no-enable-prefix-caching", "--tensor-parallel", "8"], new.serve_args,
                          new.allow_abbrev) == ["m", "--no-enable-prefix-caching", "--tensor-parallel-size", "8"]


def test_an_abbreviation_is_read_even_when_the_releases_disagree_on_another_word(tmp_path):
    # batch s34 (dstack gpt-oss-120b): --tensor-parallel 8 beside --disable-log-requests (refused by 0.17.1-0.32.0)
    from kvdoctor.facts.collect import _as_vllm_reads_it

    words = ["openai/gpt-oss-120b", "--tensor-parallel", "8", "--no-enable-prefix-caching", "--disable-log-requests"]
    assert _as_vllm_reads_it(words, None) == ["openai/gpt-oss-120b", "--tensor-parallel-size", "8",
                                              "--no-enable-prefix-caching", "--disable-log-requests"]  # fmt: skip
