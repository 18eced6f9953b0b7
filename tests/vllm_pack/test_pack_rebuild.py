"""The shipped pack is what the builder makes from vLLM's released wheels, byte for byte (issue 11 acceptance)."""
from __future__ import annotations

import os
from pathlib import Path

import builds_ahead
import pytest
from dryrun_support import wheel_dir

from kvdoctor.builders.vllm_pack.build import is_legacy
from kvdoctor.builders.vllm_pack.wheel import find_wheel

REPO = Path(__file__).resolve().parents[2]
WHEELS = wheel_dir()
PACK_PYTHON = os.environ.get("KVDOCTOR_PACK_PYTHON")
VERSIONS = ("0.25.1", "0.34.0", "0.6.6.post1")  # 0.6: the pre-0.7 path (~20 s)


def rebuild_command(version: str) -> tuple[list[str], None, None, Path]:
    """The builder's command for one release (argv, env, cwd) and the folder it writes."""
    out = builds_ahead.scratch() / f"rebuild-{version}"
    argv = [PACK_PYTHON, "-m", "kvdoctor.builders.vllm_pack", "--python", PACK_PYTHON, "--wheels", str(WHEELS),
            "--versions", version, "--out", str(out), "--samples-out", str(out / "samples")]
    return argv, None, None, out


def runnable(version: str) -> bool:
    return bool(PACK_PYTHON) and find_wheel(WHEELS, version) is not None


@pytest.mark.vllm_wheel
@pytest.mark.parametrize("version", VERSIONS)
def test_rebuild_from_the_wheel_is_byte_identical(version):
    if not PACK_PYTHON:
        pytest.skip("KVDOCTOR_PACK_PYTHON (the builder's venv, made by .ci/run) is not set")
    if find_wheel(WHEELS, version) is None:
        pytest.skip(f"no vllm-{version} wheel in {WHEELS}")
    argv, env, cwd, out = rebuild_command(version)
    proc = builds_ahead.result(f"rebuild-{version}", argv, env, cwd)  # built in the background since collection
    assert proc.returncode == 0, proc.stderr[-3000:]
    shipped = REPO / "kvdoctor" / "data" / "vllm_pack"
    core = f"{version}.json.gz" if is_legacy(version) else f"{version}.json"
    for name in (core, f"{version}.detail.json.gz"):
        assert (out / name).read_bytes() == (shipped / name).read_bytes(), f"{name} differs from the rebuild"
    samples = REPO / "tests" / "vllm_pack" / "samples" / f"{version}.json.gz"
    if samples.exists() or (out / "samples" / f"{version}.json.gz").exists():  # none before 0.7: no selector read
        assert (out / "samples" / f"{version}.json.gz").read_bytes() == samples.read_bytes()
