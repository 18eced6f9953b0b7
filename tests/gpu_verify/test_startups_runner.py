"""The runner's per-case environment and release facts (gpu_verify/startups/run_startups.py), offline."""

from __future__ import annotations

from gpu_verify.startups import run_startups
from gpu_verify.startups.grid import case


def test_case_env_sets_runner_and_site(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "1")  # a stale value in the caller's shell must not leak
    site = tmp_path / "site-0.25.1"
    env = run_startups.case_env(case(kv="turboquant_k8v4"), site, tmp_path)
    assert "VLLM_USE_V2_MODEL_RUNNER" not in env
    assert env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0" and env["VLLM_USE_FLASHINFER_SAMPLER"] == "0"
    assert env["PYTHONPATH"].split(":")[0] == str(site) and env["KVD_SITE"] == str(site)
    assert run_startups.case_env(case(runner="0"), site, tmp_path)["VLLM_USE_V2_MODEL_RUNNER"] == "0"


def test_release_facts_read_the_pins(tmp_path):
    info = tmp_path / "vllm-0.34.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.34.0\n"
                                   "Requires-Dist: torch==2.14.0\nRequires-Dist: numpy\nRequires-Dist: triton==3.8.0\n")
    assert run_startups.release_facts(tmp_path, "0.34.0") == {"vllm": "0.34.0", "pins": ["torch==2.14.0", "triton==3.8.0"]}
