"""A value the release's parser keeps but vLLM refuses once it builds its configuration, and an option of older
releases that a newer parser reads as the prefix of another (kvdoctor/vllm_pack/option_values.py, KVD013): real
manifests still pass `--device cuda` / `--device cpu` (an option of 0.4.2-0.9.2), which 0.24.0-0.30.0 read as
`--device-ids cuda` and stop on (vllm/engine/arg_utils.py _resolve_device_ids)."""

from __future__ import annotations

import pytest

from conftest import EXAMPLE_MODEL

MODEL = str(EXAMPLE_MODEL)


def test_the_parser_records_each_option_as_it_took_it():
    from kvdoctor.vllm_pack.release import load_release
    from kvdoctor.vllm_pack.serve_parser import judge_argv

    release = load_release("0.25.1")
    verdict = judge_argv(["m", "--device", "cuda", "--max_model_len", "4096", "--enforce-eager"],
                         release.serve_args, release.allow_abbrev, release.flexible_parser)
    assert verdict.error is None
    device, length, eager = verdict.taken
    assert (device.typed, device.option, device.values, device.abbreviated) == (
        "--device", "--device-ids", ("cuda",), True)
    assert (length.option, length.abbreviated, eager.values) == ("--max-model-len", False, ())


@pytest.mark.parametrize("value, refused", [
    ("0", False), ("2,3,5,7", False), ("0, 1", False), ("GPU-5d2a3c0e-1b2f-4c1d-9e8f-0a1b2c3d4e5f", False),
    ("cuda", True), ("cpu", True), ("auto", True), ("0,cpu", True), ("", True),
])
def test_device_ids_take_gpu_indices_or_uuids(value, refused):
    from kvdoctor.vllm_pack.option_values import refused_value

    refusal = refused_value("--device-ids", (value,))
    assert (refusal is not None) == refused
    if refusal:
        assert repr(value) in refusal.refusal and "arg_utils.py" in refusal.where
    assert refused_value("--max-model-len", (value,)) is None  # an option with no refused values


def test_own_option_releases_are_read_from_the_pack():
    from kvdoctor.vllm_pack.option_values import own_option_releases

    own = own_option_releases("--device")
    assert own[0] == "0.4.2" and own[-1] == "0.9.2"  # the oldest release read has it
    assert own_option_releases("--no-such-option") == ()


@pytest.mark.parametrize("version", ["0.25.1", "0.29.0"])
def test_device_cuda_on_a_release_that_reads_it_as_device_ids_is_an_error(run_cli, version):
    result = run_cli("check", "--gpu", "H100", "--vllm-version", version, "--no-compile", "--format", "json", "--",
                     "vllm", "serve", MODEL, "--device", "cuda")
    assert result.code == 1, result.stdout
    (kvd013,) = [f for f in result.json()["findings"] if f["rule_id"] == "KVD013"]
    assert (kvd013["status"], kvd013["severity"]) == ("fired", "error")
    assert "`--device cuda` is read as `--device-ids cuda`" in kvd013["title"]
    assert "0.4.2-0.9.2" in kvd013["cause"] and "_resolve_device_ids" in kvd013["cause"]
    assert "KVD004" not in {f["rule_id"] for f in result.json()["findings"]}


def test_device_where_it_is_an_option_and_device_ids_with_indices_pass(run_cli):
    own = run_cli("check", "--gpu", "H100", "--vllm-version", "0.9.2", "--no-compile", "--format", "json", "--",
                  "vllm", "serve", MODEL, "--device", "cuda")
    ids = run_cli("check", "--gpu", "H100", "--vllm-version", "0.25.1", "--no-compile", "--format", "json", "--",
                  "vllm", "serve", MODEL, "--device-ids", "0")
    for result in (own, ids):
        assert "KVD013" not in {f["rule_id"] for f in result.json()["findings"]}, result.stdout
        assert "KVD004" not in {f["rule_id"] for f in result.json()["findings"]}, result.stdout


def test_an_ambiguous_option_of_older_releases_gets_no_spelling_fix(run_cli):
    """0.31.0+: `--device` could match --device-ids and --device-memory-utilization; neither is what it meant."""
    result = run_cli("check", "--gpu", "H100", "--vllm-version", "0.31.0", "--no-compile", "--format", "json", "--",
                     "vllm", "serve", MODEL, "--device", "cuda")
    (kvd004,) = [f for f in result.json()["findings"] if f["rule_id"] == "KVD004"]
    assert "ambiguous option: --device" in kvd004["title"]
    assert all("--device-ids" not in fix["title"] for fix in kvd004["fixes"]), kvd004["fixes"]


@pytest.mark.parametrize("version, refused", [("0.9.2", True), ("0.13.0", True), ("0.14.1", False), ("0.25.1", False)])
def test_max_model_len_auto_is_a_value_from_0_14_1(version, refused):
    """--max-model-len auto / -1 (human_readable_int_or_auto, 0.14.1+); human_readable_int before refuses 'auto'."""
    from kvdoctor.vllm_pack.release import load_release
    from kvdoctor.vllm_pack.serve_parser import judge_argv

    options = load_release(version).serve_args
    error = judge_argv(["m", "--max-model-len", "auto"], options).error
    assert (error is not None) == refused, error
    if refused:
        assert "invalid human_readable_int value: 'auto'" in error
    assert judge_argv(["m", "--max-model-len", "32k"], options).error is None or version == "0.9.2"


@pytest.mark.parametrize("utilization, status, words", [
    ("0.9", "PASS", "Maximum concurrency for 32,768 tokens"),  # the whole context fits
    ("0.55", "WARN", "one 2832-token request"),  # auto shrinks it to what the budget's middle holds
    ("0.52", "FAIL", "Cannot auto-fit max_model_len"),  # not one token: vLLM's auto-fit error, not the one-request one
])
def test_max_model_len_auto_is_judged_at_the_length_vllm_shrinks_it_to(run_cli, utilization, status, words):
    result = run_cli("check", "--gpu", "RTX 3060", "--vllm-version", "0.25.1", "--no-compile", "--", "vllm", "serve",
                     MODEL, "--max-model-len", "auto", "--gpu-memory-utilization", utilization)
    assert result.stdout.startswith(status), result.stdout
    assert words in " ".join(result.stdout.split()), result.stdout
