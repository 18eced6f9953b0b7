"""Compiler children started before the jobs are known: used when they fit, skipped when the last run was cached."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kvdoctor.dryrun import DryRunRequest, compiler_process, run_dry_run, warm_children
from kvdoctor.dryrun.runner import prestart_compilers

REPO = Path(__file__).resolve().parents[2]
PROBE = DryRunRequest("turboquant_k8v4", "bfloat16", 128, 2, (8, 0), use_probe=True)


def test_a_prestarted_child_compiles_the_jobs_and_the_next_run_starts_none(tmp_path, monkeypatch):
    monkeypatch.delenv("KVDOCTOR_NO_PRESTART", raising=False)
    spawned = []
    real = compiler_process.spawn_child

    def counting(env, triton_cache):
        spawned.append(triton_cache)
        return real(env, triton_cache)

    monkeypatch.setattr(compiler_process, "spawn_child", counting)
    assert prestart_compilers(tmp_path) >= 1
    started = len(spawned)
    report = run_dry_run(PROBE, cache_dir=tmp_path)
    assert report.failure_kind == "bf16_to_fp8e4b15_assert"
    assert len(spawned) == started  # the probe's one job went to a warm child, none was spawned for it
    assert (tmp_path / "triton").is_dir()  # the payload's Triton cache was used, not the spawn-time one
    warm_children.discard()
    assert prestart_compilers(tmp_path) == 0  # same command line, everything cached now: nothing started early


def test_a_warm_child_with_another_environment_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("KVDOCTOR_PRESTART_TEST", "before")
    assert warm_children.prestart(None, ["x"], compiler_process.child_env(), compiler_process.spawn_child, 1) == 1
    monkeypatch.setenv("KVDOCTOR_PRESTART_TEST", "after")  # e.g. a fault-injection variable set since
    assert warm_children.take(compiler_process.child_env()) is None
    assert warm_children._warm == []


def test_an_unused_warm_child_exits_when_its_stdin_closes_empty():
    env = compiler_process.child_env()
    proc = compiler_process.spawn_child(env, str(Path("/nonexistent")))
    out, err = proc.communicate("", timeout=60)
    assert proc.returncode == 0 and "Traceback" not in err


def test_a_crash_drops_the_hint(tmp_path, monkeypatch):
    monkeypatch.delenv("KVDOCTOR_NO_PRESTART", raising=False)
    prestart_compilers(tmp_path)
    warm_children.discard()
    hints = list((tmp_path / warm_children.HINTS).iterdir())
    assert len(hints) == 1
    monkeypatch.setenv("KVDOCTOR_DRYRUN_FAULT", "segfault")
    assert run_dry_run(PROBE, cache_dir=tmp_path).failure_kind == "crashed"
    assert not hints[0].exists()


def test_the_check_command_prestarts_only_when_it_compiles(tmp_path):
    """Through the CLI: a cold founding check pre-starts, the warm one after it does not."""
    env = {"KVDOCTOR_CACHE_DIR": str(tmp_path), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    args = [sys.executable, "-m", "kvdoctor", "check", "--model", str(REPO / "examples" / "qwen2.5-3b-instruct"),
            "--kv-cache-dtype", "turboquant_k8v4", "--gpu", "A100", "--vllm-version", "0.25.1", "--offline", "-f", "json"]  # fmt: skip
    first = subprocess.run(args, env=env, capture_output=True, text=True, cwd=tmp_path)
    assert first.returncode == 1, first.stderr
    assert len(list((tmp_path / warm_children.HINTS).iterdir())) == 1
    second = subprocess.run(args, env=env, capture_output=True, text=True, cwd=tmp_path)
    cold, warm = json.loads(first.stdout)["dry_run"], json.loads(second.stdout)["dry_run"]
    assert (warm["status"], warm["failure_kind"]) == (cold["status"], cold["failure_kind"])
    assert all(k["cached"] for k in warm["kernels"]) and not any(k["cached"] for k in cold["kernels"])
