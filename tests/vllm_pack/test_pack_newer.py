"""A vLLM newer than the pack: its facts are built on the fly (and cached) when a builder is at hand, and
otherwise kvdoctor says plainly where its facts stop; a newer release is never judged as an older one."""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import builds_ahead
import pytest
from dryrun_support import wheel_dir

REPO = Path(__file__).resolve().parents[2]
WHEELS = wheel_dir()
ARGS = ("check", "--model", str(REPO / "examples" / "qwen2.5-3b-instruct"), "--kv-cache-dtype", "fp8", "--gpu",
        "A100", "--no-compile")


def test_a_newer_release_without_a_builder_says_where_the_facts_stop(run_cli, tmp_path):
    result = run_cli(*ARGS, "--vllm-version", "0.35.0", env={"KVDOCTOR_CACHE_DIR": str(tmp_path),
                                                             "KVDOCTOR_PACK_PYTHON": ""})
    assert result.code == 0, result.stderr
    assert "kvdoctor's facts about vLLM stop at 0.34.0; 0.35.0 is newer" in result.stdout
    assert "FLASHINFER" not in result.stdout  # nothing judged as if it were 0.34.0


def test_why_not_buildable_names_what_is_missing(monkeypatch, tmp_path):
    from kvdoctor.vllm_pack.on_the_fly import why_not_buildable

    monkeypatch.delenv("KVDOCTOR_PACK_PYTHON", raising=False)
    assert "not newer" in why_not_buildable("0.33.1", tmp_path)
    assert "in the pack" in why_not_buildable("0.34.0", tmp_path)
    assert "no wheel or tree" in why_not_buildable("0.35.0", tmp_path / "absent.whl")


def on_the_fly_command() -> tuple[list[str], dict[str, str], str, Path] | None:
    """The first check of a fake 0.35.0 (the real 0.34.0 wheel under a newer name: the builder asks its code, not its
    name), which builds its facts on the fly: (argv, env, cwd, cache folder), or None without a builder or the wheel."""
    python = os.environ.get("KVDOCTOR_PACK_PYTHON")
    real = next(iter(sorted(WHEELS.glob("vllm-0.34.0-*.whl"))), None)
    if not python or real is None:
        return None
    folder = builds_ahead.scratch() / "newer"
    folder.mkdir(exist_ok=True)
    fake = folder / real.name.replace("0.34.0", "0.35.0")
    if not fake.exists():
        os.symlink(real, fake) if hasattr(os, "symlink") else shutil.copy(real, fake)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "KVDOCTOR_", "HF_"))}
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO), KVDOCTOR_CACHE_DIR=str(folder / "cache"),
               KVDOCTOR_PACK_PYTHON=python)
    argv = [sys.executable, "-m", "kvdoctor", *ARGS, "--vllm-source", str(fake), "--format", "json"]
    return argv, env, str(REPO), folder / "cache"


@pytest.mark.slow
@pytest.mark.vllm_wheel
def test_a_newer_wheel_is_read_on_the_fly_and_cached(run_cli):
    command = on_the_fly_command()
    if command is None:
        pytest.skip("needs KVDOCTOR_PACK_PYTHON (the builder's venv) and the vllm 0.34.0 wheel")
    argv, env, cwd, cache = command
    first = builds_ahead.result("on-the-fly", argv, env, cwd)  # run in the background since collection
    assert first.returncode == 0, first.stderr
    facts = json.loads(first.stdout)["facts"]
    assert facts["vllm.judged"] == "0.35.0" and not facts["vllm.facts_note"]
    assert (cache / "vllm_pack" / "0.35.0" / "index.json").is_file()
    assert facts["attention.backend"] == "FLASHINFER"  # its own (built) facts: fp8 on SM80 runs on FlashInfer
    second = run_cli(*argv[3:], env={**env, "KVDOCTOR_PACK_PYTHON": "/nonexistent"})
    assert second.code == 0 and second.json()["facts"]["attention.backend"] == "FLASHINFER"  # from the cache
