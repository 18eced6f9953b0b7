"""A gate you can trust: plausible wrong input is an error or the right verdict, never a confident PASS.

Every case runs the real CLI in a subprocess, as a CI job would.
"""

from __future__ import annotations

import json

import pytest

from conftest import EXAMPLE_MODEL

MODEL = str(EXAMPLE_MODEL)
A100_0251 = ["--gpu", "A100", "--vllm-version", "0.25.1", "--no-compile"]


def one_error_line(result, *needles: str) -> None:
    assert result.code == 2, (result.code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvdoctor: error: "), result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def findings(result) -> dict[str, str]:
    return {f["rule_id"]: f["status"] for f in result.json()["findings"]}


# ---------------------------------------------------------------- check's own flags


def test_typo_of_kv_cache_dtype_names_the_flag(run_cli):
    result = run_cli("check", "--model", MODEL, "--kv-cache-dtyp", "turboquant_k8v4", *A100_0251)
    one_error_line(result, "--kv-cache-dtyp", "did you mean --kv-cache-dtype?")


def test_matrix_spelling_gpus_on_check(run_cli):
    result = run_cli("check", "--model", MODEL, "--gpus", "A100", "--no-compile")
    one_error_line(result, "--gpus", "did you mean --gpu?")


@pytest.mark.parametrize(
    "flag, value, closest",
    [
        ("--kv-cache-dtypes", "fp8", "--kv-cache-dtype"),  # matrix's flag
        ("--vllm-versoin", "0.25.1", "--vllm-version"),
        ("--vllm_version", "0.25.1", "--vllm-version"),
        ("--fail_on", "warning", "--fail-on"),
        ("--offlne", None, "--offline"),
        ("--no-compiel", None, "--no-compile"),
        ("--formt", "json", "--format"),
        ("--rule", "x.yaml", "--rules"),
        ("--fix-sources", "x.whl", "--fix-source"),
        ("--torch-chek", None, "--torch-check"),
        ("--verbos", None, "--verbose"),
    ],
)
def test_typos_of_kvdoctor_flags(run_cli, flag, value, closest):
    args = [flag] + ([value] if value else [])
    result = run_cli("check", "--model", MODEL, *args, "--gpu", "A100", "--no-compile")
    one_error_line(result, f"no such option: {flag}", f"did you mean {closest}?")


@pytest.mark.parametrize("flag", ["--workers", "--log", "--gpu-list"])
def test_flags_of_other_sub_commands(run_cli, flag):
    result = run_cli("check", "--model", MODEL, flag, "2", "--gpu", "A100", "--no-compile")
    one_error_line(result, f"no such option: {flag}")


def test_vllm_flag_before_the_separator_is_a_serve_flag(run_cli):
    result = run_cli("check", "--model", MODEL, "--max-model-len", "4096", "--enforce-eager", *A100_0251,
                     "--format", "json")  # fmt: skip
    assert result.code == 0, result.stderr
    assert result.json()["facts"]["serve.max_model_len"] == 4096


def test_help_says_how_the_two_forms_differ(run_cli):
    result = run_cli("check", "--help")
    assert result.code == 0
    text = " ".join(result.stdout.split())
    assert "pasted command after `--`" in text and "kvdoctor's own flags belong before the `--`" in text


# ---------------------------------------------------------------- nothing to judge


def test_no_arguments_at_all(run_cli):
    one_error_line(run_cli("check"), "nothing to judge")


def test_only_a_gpu(run_cli):
    one_error_line(run_cli("check", "--gpu", "A100", "--kv-cache-dtype", "fp8"), "nothing to judge", "--model")


def test_pasted_command_without_a_model(run_cli):
    one_error_line(run_cli("check", "--gpu", "A100", "--", "vllm", "serve", "--kv-cache-dtype", "fp8"), "nothing to judge")


# ---------------------------------------------------------------- kvdoctor flags inside the pasted command


@pytest.mark.parametrize("flag, value", [("--gpu", "A100"), ("--vllm-version", "0.25.1"), ("--no-compile", None),
                                         ("--offline", None), ("--fail-on", "warning")])  # fmt: skip
def test_kvdoctor_flag_after_the_separator(run_cli, flag, value):
    tail = [flag] + ([value] if value else [])
    result = run_cli("check", "--", "vllm", "serve", MODEL, "--kv-cache-dtype", "turboquant_k8v4", *tail)
    one_error_line(result, f"{flag} is a kvdoctor flag", "before `--`")


# ---------------------------------------------------------------- serve flags judged by the release's parser


def test_pasted_unknown_flag_is_an_error_in_vllms_words(run_cli):
    result = run_cli("check", *A100_0251, "--format", "json", "--", "vllm", "serve", MODEL, "--max-modle-len", "4096")
    assert result.code == 1
    found = {f["rule_id"]: f for f in result.json()["findings"]}
    assert found["KVD004"]["status"] == "fired"
    assert "unrecognized arguments: --max-modle-len 4096" in found["KVD004"]["cause"]
    assert "--max-model-len" in found["KVD004"]["cause"]


def test_pasted_ambiguous_prefix_on_a_release_that_has_both(run_cli):
    # --kv-cache-dtyp prefixes --kv-cache-dtype and --kv-cache-dtype-skip-layers (0.24.0+)
    result = run_cli("check", *A100_0251, "--format", "json", "--", "vllm", "serve", MODEL,
                     "--kv-cache-dtyp", "turboquant_k8v4")  # fmt: skip
    assert result.code == 1
    found = {f["rule_id"]: f for f in result.json()["findings"]}
    assert "ambiguous option: --kv-cache-dtyp could match --kv-cache-dtype" in found["KVD004"]["cause"]


def test_pasted_prefix_is_read_as_vllm_reads_it_where_unambiguous(run_cli):
    result = run_cli("check", "--gpu", "A100", "--vllm-version", "0.25.1", "--no-compile", "--format", "json", "--",
                     "vllm", "serve", MODEL, "--max-model-le", "4096", "--kv-cache-dtype", "fp8")  # fmt: skip
    document = result.json()
    assert document["facts"]["serve.max_model_len"] == 4096
    assert "KVD004" not in findings(result)


def test_pasted_underscore_spelling_is_accepted(run_cli):
    result = run_cli("check", *A100_0251, "--format", "json", "--", "vllm", "serve", MODEL, "--max_model_len", "4096")
    assert "KVD004" not in findings(result)
    assert result.json()["facts"]["serve.max_model_len"] == 4096


# ---------------------------------------------------------------- KV dtypes no release accepts


def test_fp9_without_a_version_fails(run_cli):
    result = run_cli("check", "--model", MODEL, "--kv-cache-dtype", "fp9", "--gpu", "A100", "--no-compile",
                     "--format", "json")  # fmt: skip
    assert result.code == 1
    assert findings(result)["KVD001"] == "fired"


def test_value_newer_than_an_unknown_release_is_undecided(run_cli):
    result = run_cli("check", "--model", MODEL, "--kv-cache-dtype", "nvfp4_4over6", "--gpu", "B200", "--no-compile",
                     "--format", "json")  # fmt: skip
    found = {f["rule_id"]: f for f in result.json()["findings"]}
    assert found["KVD001"]["status"] == "undecided"
    assert "0.28.0" in found["KVD001"]["cause"]


# ---------------------------------------------------------------- unknown stays unknown


@pytest.mark.parametrize("kv", ["turboquant_k8v4", "fp8"])
def test_unknown_version_same_verdict_with_and_without_compile(run_cli, kv):
    args = ["check", "--model", MODEL, "--kv-cache-dtype", kv, "--gpu", "A100", "--format", "json"]
    compiled, static = run_cli(*args), run_cli(*args, "--no-compile")
    assert compiled.code == static.code
    fired = lambda r: sorted(k for k, v in findings(r).items() if v == "fired")  # noqa: E731
    assert fired(compiled) == fired(static)
    assert any("vLLM version is unknown" in n for n in compiled.json()["notes"]) or compiled.json()["dry_run"] is None


def test_hint_for_model_dtype_names_the_gpu_not_the_model(run_cli):
    result = run_cli("check", "--model", MODEL, "--kv-cache-dtype", "turboquant_k8v4", "--vllm-version", "0.25.1",
                     "--no-compile", "--format", "json")  # fmt: skip
    for finding in result.json()["findings"]:
        for line in finding["decided_by"]:
            assert "pass --model" not in line, line


def test_absent_quantization_config_is_known_absent(run_cli):
    result = run_cli("check", "--model", MODEL, "--no-compile", "--vllm-version", "0.25.1", "--format", "json")
    assert "KVD140" not in findings(result)
    assert result.json()["facts"]["model.kv_cache_quant_algo"] == "none"


@pytest.mark.parametrize("kv", ["auto", "fp8", "fp8_e5m2", "bfloat16", "turboquant_k8v4", "turboquant_4bit_nc",
                                "nvfp4", "int8_per_token_head"])  # fmt: skip
@pytest.mark.parametrize("gpu", ["A100", "H100", "T4", "L4"])
def test_fully_given_configuration_leaves_nothing_undecided(run_cli, kv, gpu):
    result = run_cli("check", "--model", MODEL, "--kv-cache-dtype", kv, "--gpu", gpu, "--vllm-version", "0.27.0",
                     "--no-compile", "--format", "json")  # fmt: skip
    # undecided only where kvdoctor's own evidence stops (a rule checked against other releases), never because
    # an input is unknown
    undecided = [f for f in result.json()["findings"] if f["status"] == "undecided"]
    for finding in undecided:
        assert any("is outside that range" in line for line in finding["decided_by"]), (kv, gpu, finding)


def test_rule_outside_its_checked_range_is_not_applied_silently(run_cli):
    # KVD122 (bf16 -> fp16 fallback) was checked against 0.9.2+; vLLM 0.2.0 raised instead
    result = run_cli("check", "--model", MODEL, "--gpu", "T4", "--vllm-version", "0.2.0", "--no-compile",
                     "--format", "json")  # fmt: skip
    found = {f["rule_id"]: f for f in result.json()["findings"]}
    assert found["KVD122"]["status"] == "undecided"
    assert any("0.2.0 is outside that range" in line for line in found["KVD122"]["decided_by"])


def test_offline_hint_names_the_hf_cli(run_cli):
    result = run_cli("check", "--model", "nobody/not-cached-model", "--offline", "--gpu", "A100", "--no-compile")
    one_error_line(result, "hf download")
    assert "huggingface-cli" not in result.stderr


def test_json_of_gate_cases_validates(run_cli, report_schema):
    from conftest import assert_valid_report

    result = run_cli("check", *A100_0251, "--format", "json", "--", "vllm", "serve", MODEL, "--max-modle-len", "4096")
    assert_valid_report(json.loads(result.stdout), report_schema)
