"""Issue 27, check: never a PASS for a release kvdoctor did not read; a series resolves to its newest patch;
undecided findings say in words what decides them; `--fail-on undecided` gates a GPU-less CI job.

Every case runs the real CLI in a subprocess, as a CI job would.
"""

from __future__ import annotations

import re

import pytest

from conftest import EXAMPLE_MODEL

from kvdoctor.vllm_pack.candidates import describe_range
from kvdoctor.vllm_pack.store import pack_releases

MODEL = str(EXAMPLE_MODEL)
NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}


def check_json(run_cli, *args: str, env: dict[str, str] | None = None):
    result = run_cli("check", "--model", MODEL, "--no-compile", "--format", "json", *args, env=env or NO_GPU)
    assert result.code in (0, 1), (result.code, result.stderr)
    return result, result.json()


def by_id(document: dict) -> dict[str, dict]:
    return {f["rule_id"]: f for f in document["findings"]}


# ---------------------------------------------------------------- a release outside the pack is never a PASS


@pytest.mark.parametrize("version", ["0.2.0", "0.6.5", "0.4.1", "0.3", "0.40.0", "0.6.2.post1", "0.25.1rc1"])
def test_release_not_read_is_undecided_never_pass(run_cli, version):
    # vLLM 0.2.0 refuses a bf16 model on a T4 ("Bfloat16 is only supported on GPUs with compute capability of at
    # least 8.0"); kvdoctor read none of these releases (0.6.6 and 0.6.6.post1 are read, not 0.6.5), so it must not say
    # PASS. A post or rc build of a read release is another release (KVD012 fired, a FAIL, on 0.6.2.post1 once 0.6.2
    # was read)
    result, document = check_json(run_cli, "--gpu", "T4", "--vllm-version", version)
    assert document["verdict"] == "WARN"
    finding = by_id(document)["KVD012"]
    assert (finding["status"], finding["severity"]) == ("undecided", "error")
    assert f"vLLM {version}" in finding["title"] and "not a release kvdoctor read" in finding["title"]
    assert describe_range(pack_releases()) in finding["decided_by"][0]  # which releases were read
    assert version in finding["cause"] and ("not among the releases kvdoctor read" in finding["cause"]
                                            or "stop at 0.34.0" in finding["cause"])  # fmt: skip
    for lacking in ("serve-flag parser", "KV-cache and model dtypes", "attention backend choice", "kernels"):
        assert lacking in finding["cause"]
    # nor does kvdoctor's own `--dtype auto` reading speak for it ("casts to float16" on a T4)
    assert document["facts"].get("model.dtype") is None and by_id(document).get("KVD122", {}).get("status") != "fired"
    (line,) = finding["decided_by"]  # only the release decides it
    assert line.startswith("vllm.version, the vLLM release:") and (
        f"{version} is outside that range" in line or f"{version} is not one of them (the nearest releases read" in line)
    assert "kvdoctor did not read it" in line and "--vllm-version" in line
    assert result.code == 0  # undecided never gates by default ...
    gated = run_cli("check", "--model", MODEL, "--no-compile", "--gpu", "T4", "--vllm-version", version,
                    "--fail-on", "undecided", env=NO_GPU)  # fmt: skip
    assert gated.code == 1, gated.stderr  # ... but does when the gate asks for it


@pytest.mark.parametrize("version", ["0.25.1", "0.10.2", "0.34.0", "0.7.3", "0.8.5", "0.8.5.post1", "0.9.2"])
def test_release_read_has_no_unread_finding(run_cli, version):
    _, document = check_json(run_cli, "--gpu", "T4", "--vllm-version", version)
    assert "KVD012" not in by_id(document)


def test_unknown_version_has_no_unread_finding(run_cli):
    _, document = check_json(run_cli, "--gpu", "A100")
    assert "KVD012" not in by_id(document)


def test_text_report_of_an_unread_release_says_warn(run_cli):
    result = run_cli("check", "--model", MODEL, "--no-compile", "--gpu", "T4", "--vllm-version", "0.6.5", env=NO_GPU)
    assert result.stdout.startswith("WARN"), result.stdout
    assert "KVD012 vLLM 0.6.5 is not a release kvdoctor read" in result.stdout


# ---------------------------------------------------------------- --vllm-version: series, spellings, nonsense


def test_series_resolves_to_its_newest_patch_and_says_so(run_cli):
    _, series = check_json(run_cli, "--gpu", "T4", "--vllm-version", "0.25")
    _, exact = check_json(run_cli, "--gpu", "T4", "--vllm-version", "0.25.1")
    assert series["facts"]["vllm.version"] == "0.25.1"
    assert series["notes"][0] == ("--vllm-version 0.25 names a series: judged as vLLM 0.25.1, the newest 0.25 "
                                  "release kvdoctor read (0.25.0-0.25.1)")  # fmt: skip
    assert series["verdict"] == exact["verdict"] and sorted(by_id(series)) == sorted(by_id(exact))


def test_other_spelling_of_a_pack_release_is_that_release(run_cli):
    _, document = check_json(run_cli, "--gpu", "T4", "--vllm-version", "v0.25.1")
    assert document["facts"]["vllm.version"] == "0.25.1"
    assert "--vllm-version v0.25.1 read as vLLM 0.25.1" in document["notes"]


def test_series_not_read_stays_not_read(run_cli):
    _, document = check_json(run_cli, "--gpu", "T4", "--vllm-version", "0.3")
    assert document["facts"]["vllm.version"] == "0.3"
    assert by_id(document)["KVD012"]["status"] == "undecided"


def test_old_series_resolves_to_the_patch_read(run_cli):
    _, document = check_json(run_cli, "--gpu", "A100", "--vllm-version", "0.8")
    assert document["facts"]["vllm.version"] == "0.8.5.post1" and "KVD012" not in by_id(document)


# ---------------------------------------------------------------- 0.7-0.9: read, so judged (issue 27)


@pytest.mark.parametrize("version", ["0.7.3", "0.8.5.post1"])
def test_old_release_refuses_bf16_on_a_t4_fail_not_pass(run_cli, version):
    # the case: 0.7-0.8 refuse a bf16 model below SM80 in the worker (not in _get_and_verify_dtype)
    result, document = check_json(run_cli, "--gpu", "T4", "--vllm-version", version)
    assert document["verdict"] == "FAIL" and result.code == 1
    assert by_id(document)["KVD008"]["status"] == "fired"
    assert "Bfloat16 is only supported on GPUs with compute capability" in document["facts"]["model.dtype_error"]
    # the fix is the dtype the same release accepts on this GPU, asked of its own resolution, and it does pass
    fix = by_id(document)["KVD008"]["fixes"][0]
    assert fix["flag"] == "--dtype float16" and "float16, float32" in fix["title"]
    _, fixed = check_json(run_cli, "--gpu", "T4", "--vllm-version", version, "--dtype", "float16")
    assert "KVD008" not in by_id(fixed) and fixed["facts"]["model.dtype_error"] == "none"


def test_0_9_falls_back_to_float16_on_a_t4_and_refuses_bf16_when_asked(run_cli):
    # 0.9's `--dtype auto` picks a dtype the platform supports (float16 on SM75): a warning, not a refusal ...
    _, auto = check_json(run_cli, "--gpu", "T4", "--vllm-version", "0.9.2")
    assert auto["facts"]["model.dtype"] == "float16" and by_id(auto)["KVD122"]["status"] == "fired"
    assert auto["facts"]["model.dtype_error"] == "none"
    # ... while an explicit bfloat16 reaches the worker's check, which refuses it
    result, asked = check_json(run_cli, "--gpu", "T4", "--vllm-version", "0.9.2", "--dtype", "bfloat16")
    assert asked["verdict"] == "FAIL" and "Bfloat16 is only supported" in asked["facts"]["model.dtype_error"]


@pytest.mark.parametrize("version", ["0.7.3", "0.8.5.post1", "0.9.2"])
def test_old_release_judges_fp8_kv_on_a_t4_by_its_v0_engine(run_cli, version):
    # fp16 on a T4 with an fp8 cache: V0 (below SM80 in 0.8-0.9, always in 0.7) picks XFormers, which starts
    _, document = check_json(run_cli, "--gpu", "T4", "--vllm-version", version, "--dtype", "half",
                             "--kv-cache-dtype", "fp8")  # fmt: skip
    facts = document["facts"]
    assert facts["attention.backend"] == "XFORMERS", facts.get("attention.picked_by")
    assert "V0 engine" in str(facts.get("attention.picked_by")) + str(facts.get("attention.evidence"))
    assert "KVD012" not in by_id(document) and "KVD011" not in by_id(document)


def test_0_10_2_fp8_kv_on_an_l40s_falls_back_to_v0_and_starts(run_cli):
    # the issue's case: the pack built with VLLM_USE_V1=1 said FlashAttention's constructor refuses it; vLLM 0.10.2's
    # _is_v1_supported_oracle sends an fp8 KV cache without FA3 to V0 (XFormers), which starts
    result, document = check_json(run_cli, "--gpu", "L40S", "--vllm-version", "0.10.2", "--kv-cache-dtype", "fp8")
    facts = document["facts"]
    assert (facts["attention.backend"], facts["attention.engine"]) == ("XFORMERS", "V0")
    assert "Falling back to V0" in facts["attention.evidence"] and "vllm/engine/arg_utils.py:" in facts["attention.evidence"]
    assert not [f for f in document["findings"] if f["severity"] == "error" and f["status"] != "quiet"]
    assert result.code == 0


# ---------------------------------------------------------------- 0.5-0.6: parser and dtype resolution read (issue 27)

EAGER = ["0.4.3", "0.5.5", "0.6.3.post1", "0.6.6.post1"]


def test_0_6_series_is_its_newest_patch_read(run_cli):
    _, document = check_json(run_cli, "--gpu", "A100", "--vllm-version", "0.6")
    assert document["facts"]["vllm.version"] == "0.6.6.post1" and "KVD012" not in by_id(document)
    assert "0.6 names a series: judged as vLLM 0.6.6.post1" in document["notes"][0]


@pytest.mark.parametrize("version", EAGER)
def test_0_5_0_6_refuse_bf16_on_a_t4_fail_never_pass(run_cli, version):
    # their `--dtype auto` keeps bf16 and vllm/worker/worker.py refuses it below SM80 (not kvdoctor's 'casts to
    # float16' reading, which 0.9+ does; 0.4 asks torch.cuda itself, 0.5-0.6 the platform)
    result, document = check_json(run_cli, "--gpu", "T4", "--vllm-version", version)
    assert document["verdict"] == "FAIL" and result.code == 1
    assert by_id(document)["KVD008"]["status"] == "fired" and "KVD122" not in by_id(document)
    assert document["facts"]["model.dtype_error"].startswith(
        "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU")


@pytest.mark.parametrize("version", EAGER)
def test_0_5_0_6_never_pass_their_unread_backend_choice(run_cli, version):
    result, document = check_json(run_cli, "--gpu", "H100", "--vllm-version", version, "--kv-cache-dtype", "fp8")
    assert document["verdict"] == "WARN" and result.code == 0
    finding = by_id(document)["KVD011"]
    assert "which_attn_to_use" in finding["cause"]  # the reason the builder recorded, not a guess
    assert any("not read: " in note and "attention backend choice" in note for note in document["notes"])


@pytest.mark.parametrize("version", ["0.6.3.post1", "0.6.6.post1"])
def test_0_6_command_is_judged_by_0_6s_own_parser(run_cli, version):
    def run(*flags):
        return run_cli("check", "--no-compile", "--gpu", "A100", "--vllm-version", version, "-f", "json", "--",
                       "vllm", "serve", MODEL, *flags, env=NO_GPU).json()  # fmt: skip

    # 0.6's --kv-cache-dtype choices are auto, fp8, fp8_e5m2, fp8_e4m3 (fp8_inc came later)
    refused = by_id(run("--kv-cache-dtype", "fp8_inc"))["KVD001"]
    assert refused["status"] == "fired"
    assert "invalid choice: 'fp8_inc' (choose from auto, fp8, fp8_e5m2, fp8_e4m3)" in refused["cause"]
    unknown = by_id(run("--async-scheduling"))["KVD004"]  # a flag of later releases
    assert unknown["status"] == "fired" and "unrecognized arguments: --async-scheduling" in unknown["title"]
    accepted = by_id(run("--kv-cache-dtype", "fp8_e4m3", "--enable-chunked-prefill", "--max-num-seqs", "64"))
    assert accepted.get("KVD001", {}).get("status") != "fired" and accepted.get("KVD004", {}).get("status") != "fired"


def test_0_6_image_with_the_api_server_module_is_judged_by_its_parser(run_cli, tmp_path):
    manifest = tmp_path / "old.yaml"
    manifest.write_text(f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: old-vllm}}
spec:
  selector: {{matchLabels: {{app: old}}}}
  template:
    metadata: {{labels: {{app: old}}}}
    spec:
      nodeSelector: {{nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}}
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.6.3.post1
          command: ["python3", "-m", "vllm.entrypoints.openai.api_server"]
          args: ["--model", "{MODEL}", "--kv-cache-dtype", "fp8_e4m3", "--num-scheduler-steps", "8"]
          resources: {{limits: {{nvidia.com/gpu: 1}}}}
""")
    result = run_cli("scan", str(manifest), "--no-compile", "--format", "json", env=NO_GPU)
    (workload,) = result.json()["workloads"]
    statuses = {f["rule_id"]: (f["status"], f["severity"]) for f in workload["findings"]}
    assert workload["report"]["facts"]["vllm.version"] == "0.6.3.post1" and "KVD012" not in statuses
    assert not [r for r, (status, severity) in statuses.items() if status == "fired" and severity == "error"]
    assert workload["verdict"] == "WARN" and statuses["KVD011"] == ("fired", "warning")  # never PASS


def test_0_4_3_is_judged_by_its_api_server_parser(run_cli):
    # 0.4.3 has no `vllm serve`: its server is the api_server module, a plain argparse parser that does not read
    # `_` as `-` (FlexibleArgumentParser came in 0.5)
    def run(version, *flags):
        return by_id(run_cli("check", "--no-compile", "--gpu", "A100", "--vllm-version", version, "-f", "json", "--",
                             "python", "-m", "vllm.entrypoints.openai.api_server", "--model", MODEL, *flags,
                             env=NO_GPU).json())  # fmt: skip

    old = run("0.4.3", "--max_model_len", "4096")
    assert old["KVD004"]["status"] == "fired" and "unrecognized arguments: --max_model_len 4096" in old["KVD004"]["title"]
    assert run("0.5.5", "--max_model_len", "4096").get("KVD004", {}).get("status") != "fired"
    assert run("0.4.3", "--max-model-len", "4096", "--kv-cache-dtype", "fp8_e5m2").get("KVD004", {}).get("status") \
        != "fired"
    _, document = check_json(run_cli, "--gpu", "A100", "--vllm-version", "0.4")
    assert document["facts"]["vllm.version"] == "0.4.3"
    assert any("its server is `python -m vllm.entrypoints.openai.api_server` (no `vllm serve` yet)" in note
               for note in document["notes"])


@pytest.mark.parametrize("text, needles", [
    ("0", ["fits several release series", "0.25", "0.34"]),
    ("latest", ["is not a version", "a series such as 0.25"]),
    ("0.25.x", ["is not a version"]),
])  # fmt: skip
def test_ambiguous_or_no_version_is_exit_2(run_cli, text, needles):
    for command in (["check", "--model", MODEL], ["scan", "tests/fixtures/manifests/acceptance/vllm-k8s.yaml"]):
        result = run_cli(*command, "--no-compile", "--vllm-version", text)
        assert result.code == 2, (command, result.stdout, result.stderr)
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith("kvdoctor: error: --vllm-version") and "Traceback" not in result.stderr
        for needle in needles:
            assert needle in line, line


# ---------------------------------------------------------------- undecided findings read like sentences


TEMPLATE_WORDS = ("the knowledge pack's releases", "supply it on the command line", "vLLM unknown")


def _decided_lines(document: dict) -> list[str]:
    return [line for f in document["findings"] if f["status"] == "undecided" for line in f["decided_by"]]


@pytest.mark.parametrize("args", [
    ["--kv-cache-dtype", "turboquant_k8v4", "--vllm-version", "0.25.1"],
    ["--kv-cache-dtype", "fp8"],
    ["--kv-cache-dtype", "fp8", "--gpu", "V100"],
    ["--gpu", "T4", "--vllm-version", "0.6.5"],
])  # fmt: skip
def test_each_undecided_line_names_the_fact_and_in_words_what_decides_it(run_cli, args):
    _, document = check_json(run_cli, *args)
    undecided = [f for f in document["findings"] if f["status"] == "undecided"]
    assert undecided
    for finding in undecided:
        lines = finding["decided_by"]
        supplied = set(re.findall(r"([a-z_]+\.[a-z_]+), [^:;,]+: pass --", " ".join(lines)))  # said how, somewhere
        for line in lines:
            fact, _, words = line.partition(", ")
            assert "." in fact and " " not in fact, line  # the fact by its name first ...
            assert words and not any(t in line for t in TEMPLATE_WORDS[:2]), line  # ... then words, no template
            if "--" in words or "does not say" in words or "no kvdoctor flag" in words:
                continue  # the flag that supplies it, or why none does
            # a derived fact: the inputs it follows from, each with its own line that says how to supply it
            inputs = words.removeprefix("which follows from ").split(" and ")
            assert words.startswith("which follows from ") and set(inputs) <= supplied, (line, lines)


def test_model_dtype_is_said_to_follow_from_the_gpu(run_cli):
    _, document = check_json(run_cli, "--kv-cache-dtype", "turboquant_k8v4", "--vllm-version", "0.25.1")
    lines = by_id(document)["KVD101"]["decided_by"]
    assert "model.dtype, which follows from gpu.capability" in lines, lines
    assert any(line.startswith("gpu.capability, the target GPU: pass --gpu") for line in lines), lines
    # a derived input no line of its own names is spelled out where it first comes up, once
    lines = by_id(document)["KVD108"]["decided_by"]
    assert lines[0].startswith("attention.error, which follows from gpu.capability, the target GPU: pass --gpu")
    assert lines[1] == "model.dtype, which follows from gpu.capability", lines


def test_attention_error_names_the_release_and_gpu_not_a_missing_flag(run_cli):
    _, document = check_json(run_cli, "--kv-cache-dtype", "fp8")
    lines = by_id(document)["KVD111"]["decided_by"]
    assert lines[0] == "attention.error, which follows from vllm.version and gpu.capability", lines
    assert any(line.startswith("vllm.version, the vLLM release: pass --vllm-version") for line in lines)
    assert any(line.startswith("gpu.capability, the target GPU: pass --gpu") for line in lines)


def test_unread_release_says_so_for_facts_it_would_give(run_cli):
    _, document = check_json(run_cli, "--gpu", "T4", "--vllm-version", "0.6.5")
    lines = [line for line in _decided_lines(document) if line.startswith("attention.backend")]
    assert lines and all("kvdoctor did not read vLLM 0.6.5" in line for line in lines), lines


def test_turing_rule_names_the_gpu_not_a_generation(run_cli):
    # KVD117 (FlashInfer picked below SM80 by 0.20.0-0.23.0) must not call a V100 (SM 7.0, Volta) 'Turing'
    _, document = check_json(run_cli, "--gpu", "T4", "--vllm-version", "0.23.0", "--kv-cache-dtype", "fp8")
    assert by_id(document)["KVD117"]["title"].startswith("vLLM 0.23.0 picks FlashInfer on Tesla T4 (Turing, SM 7.5)")
    # no V100 configuration gets FlashInfer from 0.20-0.23, so its title is asked of the rule with a V100's facts
    from rules_support import rules, scenario_facts

    from kvdoctor.rules.engine import finding_for

    (rule,) = [r for r in rules() if r.id == "KVD117"]
    title = finding_for(rule, scenario_facts(gpu="V100", vllm="0.23.0"), "undecided").title
    assert title.startswith("vLLM 0.23.0 picks FlashInfer on Tesla V100 (Volta, SM 7.0)"), title
    # the GPU unknown: said in words, never "on unknown (a GPU, SM unknown)"
    _, document = check_json(run_cli, "--vllm-version", "0.9.2")
    assert by_id(document)["KVD117"]["title"] == ("vLLM 0.9.2 picks FlashInfer on a GPU, below SM80, where FlashInfer "
                                                   "is broken")  # fmt: skip


def test_a_fit_rule_about_releases_disagreeing_is_quiet_once_the_release_is_named(run_cli, tmp_path):
    # KVD184 ("... depends on the vLLM release") was left undecided on every model-less scan with a pinned image
    _, named = check_json(run_cli, "--gpu", "A100", "--vllm-version", "0.28.0", "--max-model-len", "131072")
    assert "KVD184" not in by_id(named)
    manifest = tmp_path / "volume.yaml"
    manifest.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: vllm\n"
                        "      image: vllm/vllm-openai:v0.28.0\n      args: [/mnt/models/llama]\n")  # fmt: skip
    (workload,) = run_cli("scan", str(manifest), "--no-compile", "--format", "json", env=NO_GPU).json()["workloads"]
    assert "KVD184" not in {f["rule_id"] for f in workload["findings"]}
    unpinned = manifest.read_text().replace("v0.28.0", "latest")
    manifest.write_text(unpinned)
    (workload,) = run_cli("scan", str(manifest), "--no-compile", "--format", "json", env=NO_GPU).json()["workloads"]
    assert {f["rule_id"]: f["status"] for f in workload["findings"]}.get("KVD184") == "undecided"


# ---------------------------------------------------------------- --fail-on undecided: the GPU-less CI gate


def test_gpu_less_ci_without_gpu_or_version_exits_0_by_default_and_1_with_fail_on_undecided(run_cli):
    args = ["check", "--model", MODEL, "--kv-cache-dtype", "turboquant_k8v4", "--no-compile"]
    default = run_cli(*args, env=NO_GPU)
    document = run_cli(*args, "--format", "json", env=NO_GPU).json()
    undecided_errors = [f for f in document["findings"] if f["status"] == "undecided" and f["severity"] == "error"]
    assert undecided_errors and not [f for f in document["findings"] if f["status"] == "fired" and f["severity"] == "error"]
    assert default.code == 0
    gated = run_cli(*args, "--fail-on", "undecided", env=NO_GPU)
    assert gated.code == 1, gated.stderr


def test_fail_on_undecided_passes_a_fully_decided_pass(run_cli):
    result = run_cli("check", "--model", MODEL, "--no-compile", "--gpu", "H100", "--vllm-version", "0.27.0",
                     "--fail-on", "undecided", env=NO_GPU)  # fmt: skip
    assert result.code == 0, (result.stdout, result.stderr)


def test_fail_on_undecided_ignores_undecided_warnings(run_cli):
    # KVD122 (bf16 -> fp16 fallback) is a warning left undecided without a GPU: no error rule is undecided
    args = ["check", "--model", MODEL, "--no-compile", "--vllm-version", "0.27.0"]
    document = run_cli(*args, "--format", "json", env=NO_GPU).json()
    if any(f["status"] == "undecided" and f["severity"] == "error" for f in document["findings"]):
        pytest.skip("an undecided error rule on this configuration; the case needs warnings only")
    assert run_cli(*args, "--fail-on", "undecided", env=NO_GPU).code == 0


def test_fail_on_undecided_gates_scan_and_bad_fail_on_names_it(run_cli):
    manifest = "tests/fixtures/manifests/unpinned-and-secret.yaml"  # vllm:latest: the version rules are undecided
    default = run_cli("scan", manifest, "--no-compile", env=NO_GPU)
    gated = run_cli("scan", manifest, "--no-compile", "--fail-on", "undecided", env=NO_GPU)
    assert gated.code == 1 or default.code == 1, (default.stdout, gated.stderr)
    assert gated.code >= default.code
    wrong = run_cli("check", "--model", MODEL, "--fail-on", "undecide")
    assert wrong.code == 2 and "error, warning, undecided, never" in wrong.stderr


def test_fail_on_undecided_from_the_config_file(run_cli, tmp_path):
    (tmp_path / "kvdoctor.toml").write_text('fail-on = "undecided"\n')
    args = ["check", "--model", MODEL, "--kv-cache-dtype", "turboquant_k8v4", "--no-compile",
            "--config", str(tmp_path / "kvdoctor.toml")]  # fmt: skip
    assert run_cli(*args, env=NO_GPU).code == 1
    assert run_cli(*args, "--fail-on", "error", env=NO_GPU).code == 0  # the flag wins


def test_fail_on_undecided_on_explain_is_accepted(run_cli, tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text("INFO 12-04 10:00:00 api_server.py:1 vLLM API server version 0.25.1\n")
    result = run_cli("explain", str(log), "--fail-on", "undecided")
    assert result.code in (0, 1) and "internal error" not in result.stderr, result.stderr


def test_unread_release_gets_no_probe_compile_that_speaks_for_it(run_cli):
    # a probe kernel failing fp8e4nv on SM75 once fired KVD110 ("vLLM 0.8.5 selects TRITON_ATTN ..."): a claim about
    # a release kvdoctor never read (0.8.5 runs an fp8 KV cache on a T4 on its V0 engine)
    result = run_cli("check", "--model", MODEL, "--gpu", "T4", "--vllm-version", "0.6.5", "--kv-cache-dtype", "fp8",
                     "--format", "json", env=NO_GPU)  # fmt: skip
    document = result.json()
    assert result.code == 0 and document["verdict"] == "WARN" and document["dry_run"] is None
    assert not [f["rule_id"] for f in document["findings"] if f["status"] == "fired" and f["severity"] == "error"]
    assert "dry run skipped: kvdoctor did not read vLLM 0.6.5, so which kernels it builds is unknown" in document["notes"]


def test_release_without_backend_facts_gets_no_probe_compile_either(run_cli):
    result = run_cli("check", "--model", MODEL, "--gpu", "T4", "--vllm-version", "0.6.6.post1", "--dtype", "half",
                     "--kv-cache-dtype", "fp8", "--format", "json", env=NO_GPU)  # fmt: skip
    document = result.json()
    assert document["dry_run"] is None and document["verdict"] == "WARN", (result.stdout, result.stderr)
    assert ("dry run skipped: kvdoctor did not read vLLM 0.6.6.post1's attention backend choice, so which kernels it "
            "builds is unknown") in document["notes"]


@pytest.mark.parametrize("tag", ["v0.6.5", "v0.4.1"])
def test_scan_of_an_old_image_is_not_judged_never_pass(run_cli, tmp_path, tag):
    # real manifests still run 0.4-0.9 (issue 27): a release not read is explicitly not judged, and the CI gate
    # can fail on it
    manifest = tmp_path / "old.yaml"
    manifest.write_text(f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: old-vllm}}
spec:
  selector: {{matchLabels: {{app: old}}}}
  template:
    metadata: {{labels: {{app: old}}}}
    spec:
      nodeSelector: {{nvidia.com/gpu.product: Tesla-T4}}
      containers:
        - name: vllm
          image: vllm/vllm-openai:{tag}
          args: ["--model", "{MODEL}", "--kv-cache-dtype", "fp8"]
          resources: {{limits: {{nvidia.com/gpu: 1}}}}
""")
    result = run_cli("scan", str(manifest), "--format", "json", env=NO_GPU)
    assert result.code == 0, result.stderr
    (workload,) = result.json()["workloads"]
    assert workload["verdict"] == "WARN" and workload["report"]["facts"]["vllm.version"] == tag[1:]
    statuses = {f["rule_id"]: (f["status"], f["severity"]) for f in workload["findings"]}
    assert statuses["KVD012"] == ("undecided", "error")
    assert not [r for r, (status, severity) in statuses.items() if status == "fired" and severity == "error"]
    assert run_cli("scan", str(manifest), "--fail-on", "undecided", env=NO_GPU).code == 1


def test_scan_of_a_0_7_image_on_a_t4_is_judged(run_cli, tmp_path):
    # 0.7.3 is read: its worker's bf16 refusal on a T4 is a FAIL, not "not read"
    manifest = tmp_path / "old.yaml"
    manifest.write_text(f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: old-vllm}}
spec:
  selector: {{matchLabels: {{app: old}}}}
  template:
    metadata: {{labels: {{app: old}}}}
    spec:
      nodeSelector: {{nvidia.com/gpu.product: Tesla-T4}}
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.7.3
          args: ["--model", "{MODEL}", "--kv-cache-dtype", "fp8"]
          resources: {{limits: {{nvidia.com/gpu: 1}}}}
""")
    result = run_cli("scan", str(manifest), "--format", "json", env=NO_GPU)
    (workload,) = result.json()["workloads"]
    statuses = {f["rule_id"]: f["status"] for f in workload["findings"]}
    assert workload["verdict"] == "FAIL" and "KVD012" not in statuses and statuses["KVD008"] == "fired"
    assert result.code == 1


def test_old_release_judges_a_pasted_command_with_its_own_parser(run_cli):
    # 0.7.3's switches have no --no- form and --max-model-len is a plain int there (0.25.1 takes both)
    for args, words in ((["--no-enforce-eager"], "unrecognized arguments: --no-enforce-eager"),
                        (["--max-model-len", "32k"], "invalid int value: '32k'")):
        old = run_cli("check", "--no-compile", "--gpu", "A100", "--vllm-version", "0.7.3", "-f", "json", "--",
                      "vllm", "serve", MODEL, *args, env=NO_GPU)
        finding = by_id(old.json())["KVD004"]
        assert finding["status"] == "fired" and words in finding["title"] + finding["cause"], finding
        new = run_cli("check", "--no-compile", "--gpu", "A100", "--vllm-version", "0.25.1", "-f", "json", "--",
                      "vllm", "serve", MODEL, *args, env=NO_GPU)
        assert "KVD004" not in by_id(new.json()) or by_id(new.json())["KVD004"]["status"] != "fired"


def test_an_unread_release_inside_the_packs_span_names_the_nearest_releases_read():
    """vLLM 0.11.1 lies between releases the pack read (0.11.0, 0.11.2): 'outside that range' would be false."""
    from kvdoctor.rules.engine import _outside_read

    assert "0.11.1" not in pack_releases() and {"0.11.0", "0.11.2"} <= set(pack_releases())
    assert _outside_read("0.11.1").startswith("is not one of them (the nearest releases read: ")
    assert _outside_read("0.2.0") == _outside_read("99.0.0") == "is outside that range"
