"""--target-package / KVDOCTOR_TARGET_PACKAGES end to end: the assumed value shown, a stated value the pack was not
built for leaves the choice undecided (never a PASS), a bad item is exit 2 in one line."""

from __future__ import annotations

import pytest

from conftest import CONFIGS, FIXTURES

GPT_OSS = FIXTURES / "startup_logs" / "configs" / "openai__gpt-oss-20b.json"  # attention sinks, head size 64


def check(run_cli, *args, env=None):
    result = run_cli("check", "--model", str(GPT_OSS), "--gpu", "B200", "--no-compile", "--format", "json", *args,
                     env=env)
    return result, result.json()


def test_default_is_assumed_and_decided_from_the_second_read(run_cli):
    # 0.34.0's wheel does not require flashinfer-cubin: the pack read it without TRT-LLM kernels, then asked its
    # backends again with them present (the official image has them), so the default is decided from that read
    result, document = check(run_cli, "--vllm-version", "0.34.0")
    facts = document["facts"]
    assert facts["target.flashinfer_cubin"] == "present" and "assumed" in facts["target.packages"]
    assert facts["attention.undecided"] == "none" and facts["attention.backend"]
    assert "KVD011" not in {f["rule_id"] for f in document["findings"]}
    assert "asked with flashinfer-cubin present" in facts["attention.evidence"]
    assert any("flashinfer-cubin present (assumed" in note for note in document["notes"])


def test_default_is_undecided_where_the_pack_was_built_otherwise(run_cli):
    # 0.18.1 (a grid release) was read once, without the cubins: FlashInfer's sink support on SM10x is not decided
    # for the official image, and the reason names the flag
    result, document = check(run_cli, "--vllm-version", "0.18.1")
    facts = document["facts"]
    assert document["verdict"] == "WARN" and "KVD011" in {f["rule_id"] for f in document["findings"]}
    assert "--target-package flashinfer-cubin=absent" in facts["attention.undecided"]


def test_stated_absent_is_judged_where_the_pack_holds_that_value(run_cli):
    result, document = check(run_cli, "--vllm-version", "0.34.0", "--target-package", "flashinfer-cubin=absent")
    facts = document["facts"]
    assert facts["attention.undecided"] == "none" and facts["attention.backend"] == "FLASH_ATTN"
    assert facts["attention.assumes"].startswith("flashinfer-cubin absent (stated)")
    # and 0.25.1, read with the cubins present, is undecided for that image: never a silent PASS
    result, document = check(run_cli, "--vllm-version", "0.25.1", env={"KVDOCTOR_TARGET_PACKAGES": "flashinfer-cubin=absent"})
    assert document["verdict"] != "PASS"
    assert "the pack read vLLM 0.25.1 with flashinfer-cubin present" in document["facts"]["attention.undecided"]


def test_a_selection_that_depends_on_none_says_so(run_cli):
    result = run_cli("check", "--model", str(CONFIGS / "llama-3.1-8b-instruct.json"), "--gpu", "H100",
                     "--vllm-version", "0.34.0", "--no-compile", "--format", "json",
                     "--target-package", "flashinfer=absent", "--target-package", "flashinfer-cubin=absent")
    facts = result.json()["facts"]
    assert facts["attention.assumes"] == "none" and facts["attention.backend"] == "FLASH_ATTN"
    assert facts["target.packages"].count("(stated)") == 2


@pytest.mark.parametrize("command", [
    ["check", "--model", str(CONFIGS / "llama-3.1-8b-instruct.json"), "--gpu", "H100", "--no-compile"],
    ["scan", str(FIXTURES / "manifests")],
    ["matrix", "--model", str(CONFIGS / "llama-3.1-8b-instruct.json"), "--gpus", "H100"],
])
def test_a_bad_item_is_exit_2_in_one_line(run_cli, command):
    result = run_cli(*command, "--target-package", "flashinfer-cubin=maybe")
    assert result.code == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().count("\n") == 0 and "NAME=present|absent" in result.stderr


def test_a_bad_env_item_names_the_variable(run_cli):
    result = run_cli("check", "--model", str(CONFIGS / "llama-3.1-8b-instruct.json"), "--gpu", "H100", "--no-compile",
                     env={"KVDOCTOR_TARGET_PACKAGES": "xformers=absent"})
    assert result.code == 2 and "KVDOCTOR_TARGET_PACKAGES 'xformers=absent'" in result.stderr


def test_scan_hands_the_stated_packages_to_each_workload(run_cli):
    manifest = (FIXTURES / "manifests" / "public" / "GoogleCloudPlatform__kubernetes-engine-samples"
                / "ai-ml__llm-serving-gemma__vllm__vllm-2-9b-it.yaml")
    result = run_cli("scan", str(manifest), "--gpu", "H100", "--vllm-version", "0.34.0", "--no-compile", "--format",
                     "json", "--target-package", "flashinfer=absent")
    facts = result.json()["workloads"][0]["report"]["facts"]
    assert (facts["target.flashinfer"], facts["target.flashinfer_cubin"]) == ("absent", "present")
    assert "flashinfer absent (stated)" in facts["target.packages"]


def test_stated_flashinfer_decides_whether_the_target_has_it(run_cli):
    # KVD119's hint is `--target-package flashinfer=present|absent`: the stated value must reach the fact it decides,
    # over the wheel's pins (0.26.0 pins flashinfer-python) and where the wheel pins none (0.10.2)
    def run(version, value):
        result = run_cli("check", "--model", str(CONFIGS / "llama-3.1-8b-instruct.json"), "--gpu", "L40S",
                         "--vllm-version", version, "--no-compile", "--format", "json",
                         *(["--target-package", f"flashinfer={value}"] if value else []))  # fmt: skip
        document = result.json()
        return document["facts"].get("flashinfer.installed"), {f["rule_id"]: f["status"] for f in document["findings"]}

    assert run("0.10.2", None) == (None, {"KVD119": "undecided"})  # no pin, nothing stated: undecided, in words
    assert run("0.10.2", "present") == (True, {})
    installed, statuses = run("0.10.2", "absent")
    assert installed is False and statuses["KVD119"] == "fired"
    assert run("0.26.0", None)[0] is True and run("0.26.0", "absent")[0] is False
