"""`kvdoctor check` where vLLM is installed: versions and kernels come from the installed distribution."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from dryrun_support import vllm_wheels  # noqa: F401 - fixture

KERNELS = ("vllm/v1/attention/ops/triton_turboquant_store.py", "vllm/v1/attention/ops/triton_turboquant_decode.py")


@pytest.fixture
def site_with_vllm(vllm_wheels, tmp_path) -> Path:  # noqa: F811
    """A site-packages holding vLLM 0.25.1's kernel files and dist-info (no FlashInfer), as pip would lay it."""
    site = tmp_path / "site"
    with zipfile.ZipFile(vllm_wheels["0.25.1"]) as wheel:
        for member in KERNELS:
            (site / member).parent.mkdir(parents=True, exist_ok=True)
            (site / member).write_bytes(wheel.read(member))
    info = site / "vllm-0.25.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.25.1\n")
    (info / "RECORD").write_text("".join(f"{member},,\n" for member in KERNELS))
    return site


def installed_env(cli_env, site):
    return {"PYTHONPATH": f"{cli_env['PYTHONPATH']}:{site}"}


def test_installed_vllm_sets_the_version_and_its_kernels_are_compiled(run_cli, cli_env, site_with_vllm):
    result = run_cli("check", "--model", "Qwen/Qwen2.5-3B-Instruct", "--kv-cache-dtype", "turboquant_k8v4",
                     "--gpu", "A100", "--format", "json", env=installed_env(cli_env, site_with_vllm))
    document = result.json()
    assert document["facts"]["vllm.version"] == "0.25.1"
    assert document["facts"]["flashinfer.installed"] is False
    assert "installed vllm" in document["dry_run"]["source_label"]
    fired = {f["rule_id"] for f in document["findings"] if f["status"] == "fired"}
    # a dense model runs on the V2 runner, which does not have the 'auto' bug (vLLM's use_v2_model_runner)
    assert "KVD101" in fired and "KVD102" not in fired


def test_installed_vllm_without_flashinfer_is_not_judged_as_if_it_had_it(run_cli, cli_env, site_with_vllm):
    result = run_cli("check", "--model", "Qwen/Qwen2.5-3B-Instruct", "--kv-cache-dtype", "fp8", "--gpu", "A10",
                     "--format", "json", env=installed_env(cli_env, site_with_vllm))
    document = result.json()
    fired = {f["rule_id"] for f in document["findings"] if f["status"] == "fired"}
    assert "KVD119" in fired and "KVD113" not in fired  # no FlashInfer here: vLLM cannot pick it
    assert document["facts"]["attention.backend"] is None


def test_what_if_version_other_than_installed_does_not_compile_installed_kernels(run_cli, cli_env, site_with_vllm):
    result = run_cli("check", "--model", "Qwen/Qwen2.5-3B-Instruct", "--kv-cache-dtype", "turboquant_k8v4",
                     "--gpu", "A100", "--vllm-version", "0.27.0", "--format", "json",
                     env={**installed_env(cli_env, site_with_vllm), "KVDOCTOR_VLLM_WHEELS": "/nonexistent"})
    document = result.json()
    assert document["facts"]["vllm.version"] == "0.27.0"
    assert document["dry_run"]["source_label"].startswith("kvdoctor probe kernel")
    assert document["dry_run"]["status"] == "passed"  # the probe models 0.27.0's widened keys
