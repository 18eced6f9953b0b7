"""`kvdoctor check` end to end, as a user runs it: the issue's acceptance commands and bad input."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import CONFIGS, EXAMPLE_MODEL, REPO, assert_valid_report
from dryrun_support import vllm_wheels  # noqa: F401 - fixture

FOUNDING = ["check", "--model", "Qwen/Qwen2.5-3B-Instruct", "--kv-cache-dtype", "turboquant_k8v4"]


def rule_ids(document, status="fired"):
    return {f["rule_id"] for f in document["findings"] if f["status"] == status}


def test_founding_case_from_hf_cache_fails_with_its_fixes(run_cli, report_schema):
    result = run_cli(*FOUNDING, "--gpu", "A100", "--vllm-version", "0.25.1", "--format", "json")
    assert result.code == 1, result.stderr
    document = result.json()
    assert_valid_report(document, report_schema)
    assert document["verdict"] == "FAIL"
    assert document["facts"]["model.source"] == "hf-cache:Qwen/Qwen2.5-3B-Instruct"
    founding = next(f for f in document["findings"] if f["rule_id"] == "KVD101")
    assert "'auto'" in founding["cause"] and "convert_custom_float8" in founding["cause"]
    fixes = {fix["flag"] or fix["version"]: fix for fix in founding["fixes"]}
    assert "vllm>=0.27.0" in fixes and "0.26.0" in fixes["vllm>=0.27.0"]["title"]
    assert "--dtype float16" in fixes and "--kv-cache-dtype turboquant_4bit_nc" in fixes
    # the dry run ran (0.25.1's own kernels if KVDOCTOR_VLLM_WHEELS has its wheel, else the probe kernel) and agrees
    assert any("innermost cause: AssertionError" in line for line in founding["evidence"])
    assert fixes["--dtype float16"]["verified"] == "verified"


def test_founding_case_text_report(run_cli):
    result = run_cli(*FOUNDING, "--gpu", "A100", "--vllm-version", "0.25.1")
    assert result.code == 1
    assert result.stdout.startswith("FAIL")
    assert "KVD101" in result.stdout and "--dtype float16" in result.stdout


def test_same_on_hopper_has_no_compile_error(run_cli, report_schema):
    result = run_cli(*FOUNDING, "--gpu", "H100", "--vllm-version", "0.25.1", "--format", "json")
    document = result.json()
    assert_valid_report(document, report_schema)
    assert "KVD101" not in rule_ids(document) and "KVD104" not in rule_ids(document)
    assert document["dry_run"]["status"] == "passed"


def test_fixed_release_on_ampere_only_warns(run_cli, report_schema):
    result = run_cli(*FOUNDING, "--gpu", "A100", "--vllm-version", "0.27.0", "--format", "json")
    assert result.code == 0
    document = result.json()
    assert_valid_report(document, report_schema)
    assert document["verdict"] == "WARN"
    assert rule_ids(document) == {"KVD104"}
    assert run_cli(*FOUNDING, "--gpu", "A100", "--vllm-version", "0.27.0", "--fail-on", "warning").code == 1


def test_pasted_serve_command(run_cli, report_schema):
    result = run_cli("check", "--gpu", "sm_86", "--vllm-version", "0.25.1", "--format", "json", "--",
                     "vllm", "serve", "Qwen/Qwen2.5-3B-Instruct", "--kv-cache-dtype", "turboquant_k8v4",
                     "--enforce-eager", "--port", "8000")
    assert result.code == 1
    document = result.json()
    assert_valid_report(document, report_schema)
    assert "KVD101" in rule_ids(document)
    assert document["facts"]["serve.enforce_eager"] is True
    assert "--port=8000" in document["facts"]["serve.unknown_flags"]


def test_unknown_kv_dtype_gets_vllms_wording_and_closest(run_cli):
    result = run_cli("check", "--model", str(EXAMPLE_MODEL), "--gpu", "H100", "--vllm-version", "0.25.1",
                     "--kv-cache-dtype", "fp8_e4m3fn", "--format", "json")
    assert result.code == 1
    finding = next(f for f in result.json()["findings"] if f["rule_id"] == "KVD001")
    # vLLM's own parser refuses it first (--kv-cache-dtype has choices, vllm/engine/arg_utils.py)
    assert "argument --kv-cache-dtype: invalid choice: 'fp8_e4m3fn'" in finding["cause"]
    assert "Closest valid value: fp8_e4m3." in finding["cause"]


@pytest.mark.parametrize(("typed", "closest"), [("FP8", "fp8"), ("fp8 ", "fp8"), ("Auto", "auto"),
                                                ("zzzzqq", "none of them is close")])
def test_an_unknown_kv_dtype_gets_the_value_meant_as_its_closest(run_cli, typed, closest):
    result = run_cli("check", "--model", str(EXAMPLE_MODEL), "--gpu", "H100", "--vllm-version", "0.25.1", "--no-compile",
                     "--kv-cache-dtype", typed, "--format", "json")
    finding = next(f for f in result.json()["findings"] if f["rule_id"] == "KVD001")
    assert f"Closest valid value: {closest}." in finding["cause"]


def test_no_gpu_no_flag_says_what_would_decide(run_cli, report_schema):
    result = run_cli(*FOUNDING, "--vllm-version", "0.25.1", "--format", "json",
                     env={"CUDA_VISIBLE_DEVICES": ""})
    document = result.json()
    assert_valid_report(document, report_schema)
    undecided = {f["rule_id"]: f for f in document["findings"] if f["status"] == "undecided"}
    assert "KVD101" in undecided
    assert any(line.startswith("gpu.capability, the target GPU: pass --gpu") for line in undecided["KVD101"]["decided_by"])


def test_real_vllm_kernels_verify_the_upgrade_fix(run_cli, vllm_wheels, report_schema):  # noqa: F811
    wheel_dir = str(vllm_wheels["0.25.1"].parent)
    result = run_cli(*FOUNDING, "--gpu", "A100", "--vllm-version", "0.25.1", "--format", "json",
                     env={"KVDOCTOR_VLLM_WHEELS": wheel_dir})
    document = result.json()
    assert_valid_report(document, report_schema)
    assert document["dry_run"]["source_label"].startswith("vLLM 0.25.1 kernels")
    founding = next(f for f in document["findings"] if f["rule_id"] == "KVD101")
    assert all(fix["verified"] == "verified" for fix in founding["fixes"]), founding["fixes"]
    assert any("kernel line" in line and "float8e4b15" in line for line in founding["evidence"])


def test_vllm_source_sets_the_version_fact(run_cli, vllm_wheels):  # noqa: F811
    result = run_cli("check", "--model", str(EXAMPLE_MODEL), "--kv-cache-dtype", "turboquant_k8v4", "--gpu", "A100",
                     "--vllm-source", str(vllm_wheels["0.26.0"]), "--format", "json")
    document = result.json()
    assert document["facts"]["vllm.version"] == "0.26.0"
    assert "KVD101" not in rule_ids(document) and document["dry_run"]["status"] == "passed"


def test_output_file_and_terminal_report(run_cli, tmp_path, report_schema):
    out = tmp_path / "report.json"
    result = run_cli(*FOUNDING, "--gpu", "A100", "--vllm-version", "0.25.1", "--no-compile",
                     "--format", "json", "--output", str(out))
    assert result.stdout.startswith("FAIL")
    import json

    assert_valid_report(json.loads(out.read_text()), report_schema)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "/nonexistent/model"], "model path not found"),
        (["--model", str(CONFIGS)], "no config.json"),
        (["--model", "Qwen/NotCached-1B"], "not in the local Hugging Face cache"),
        (["--model", str(EXAMPLE_MODEL), "--gpu", "A1000"], "unknown GPU 'A1000'"),
        (["--model", str(EXAMPLE_MODEL), "--dtype", "bf16"], "unknown --dtype 'bf16'"),
        (["--model", str(EXAMPLE_MODEL), "--vllm-version", "latest"], "is not a version"),
        (["--model", str(EXAMPLE_MODEL), "--fail-on", "sometimes"], "--fail-on"),
        (["--model", str(EXAMPLE_MODEL), "--format", "yaml"], "unknown format"),
        (["--model", "a/b", "--", "vllm", "serve", "c/d"], "conflicting models"),
        (["--model", str(EXAMPLE_MODEL), "--", "vllm", "serve", "--tensor-parallel-size", "two"], "--tensor-parallel-size"),
    ],
)
def test_bad_input_exits_2_with_one_line(run_cli, args, message):
    result = run_cli("check", *args)
    assert result.code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.stderr


def test_malformed_config_json_and_rules_file_exit_2(run_cli, tmp_path):
    (tmp_path / "config.json").write_text('{"num_attention_heads": 16,,}')
    result = run_cli("check", "--model", str(tmp_path))
    assert result.code == 2 and "invalid JSON at line 1" in result.stderr and "Traceback" not in result.stderr
    rules = tmp_path / "org.yaml"
    rules.write_text("rules:\n  - id: ORG001\n    title: t\n    severity: critical\n    cause: c\n    when: {fact: gpu.name, eq: x}\n")
    result = run_cli("check", "--model", str(EXAMPLE_MODEL), "--rules", str(rules))
    assert result.code == 2 and "rule 'ORG001', field 'severity'" in result.stderr


def test_org_rules_file_adds_findings(run_cli, tmp_path):
    rules = tmp_path / "org.yaml"
    rules.write_text(
        "rules:\n  - id: ORG100\n    title: No TurboQuant in prod yet\n    severity: error\n"
        "    cause: Platform policy\n    references: [https://wiki.example/kv]\n"
        "    when: {fact: kv.is_turboquant, eq: true}\n"
    )
    result = run_cli(*FOUNDING, "--gpu", "H100", "--vllm-version", "0.27.0", "--rules", str(rules), "--no-compile",
                     "--format", "json")
    assert result.code == 1 and "ORG100" in rule_ids(result.json())


def test_cli_start_up_imports_nothing_heavy():
    code = ("import sys, kvdoctor.cli; heavy = {'torch', 'triton', 'pynvml', 'huggingface_hub', 'rich'} & set(sys.modules);"
            " print(sorted(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO).stdout.strip()
    assert out == "[]"


def test_check_without_compile_never_imports_triton_or_torch(tmp_path):
    code = (
        "import sys\n"
        "from kvdoctor.check.run import CheckSettings, run_check\n"
        "from kvdoctor.facts.collect import CheckOptions\n"
        f"run_check(CheckOptions(model={str(EXAMPLE_MODEL)!r}, kv_cache_dtype='turboquant_k8v4', gpu='A100', environ={{}}),"
        " CheckSettings(compile=False))\n"
        "print(sorted({'torch', 'triton'} & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.stdout.strip() == "[]", out.stderr


def test_readme_first_command_on_the_bundled_example(run_cli):
    readme = (REPO / "README.md").read_text()
    command = next(line for line in readme.splitlines() if line.startswith("pip install -e") and "kvdoctor check" in line)
    args = command.split("&& kvdoctor ", 1)[1].split()
    result = run_cli(*args)
    assert result.code == 1, result.stderr
    assert result.stdout.startswith("FAIL") and "KVD101" in result.stdout and "verified by compile" in result.stdout
