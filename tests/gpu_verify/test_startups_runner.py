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


def test_a_drawn_grid_is_fixed_by_its_seed_and_distinct():
    from gpu_verify.startups.drawn import MODELS, drawn

    first, again = drawn(20261207, 40), drawn(20261207, 40)
    assert first == again and len({c["id"] for c in first}) == 40
    assert {c["model"] for c in first} <= set(MODELS) and drawn(1, 40) != first


def test_a_drawn_case_is_judged_as_the_serve_command_a_user_pastes(tmp_path):
    from gpu_verify.startups.compare import kvdoctor_argv
    from gpu_verify.startups.drawn import drawn

    case = dict(drawn(5, 1)[0], backend="FLASHINFER", block_size=64)
    argv = kvdoctor_argv(case, "0.26.0", tmp_path, compile_=False)
    serve = argv[argv.index("--") + 1:]
    assert serve[:3] == ["vllm", "serve", str(tmp_path)] and "--no-compile" in argv[:argv.index("--")]
    assert serve[serve.index("--block-size") + 1] == "64" and serve[serve.index("--attention-backend") + 1] == "FLASHINFER"
